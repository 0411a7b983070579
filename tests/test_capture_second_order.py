"""Double backward through a captured training call (eagerc/capture/second_order.py): a
gradient penalty differentiates the gradient of a captured call's output again, which
AOTAutograd's compiled backward refuses. Each step is compared with eager's: the penalty's
gradients, the parameters' gradients, BatchNorm's running statistics and dropout's draws;
the captured calls stay captured (one record, one training graph, no eager runs)."""
import copy

import pytest
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close

BACKENDS = ["eager", None]  # None: Inductor through eagerc's compile/cache layer


def _penalized_steps(model, backend, steps=3, seeded=False):
    torch.manual_seed(0)
    ref = copy.deepcopy(model)
    captured = capture(model, backend=backend)
    for step in range(steps):
        x = torch.randn(6, 4)
        results = []
        for m, fn in ((model, captured), (ref, ref)):
            m.zero_grad()
            xi = x.clone().requires_grad_()
            if seeded:
                torch.manual_seed(100 + step)  # the same dropout masks on both sides
            out = fn(xi)
            grad_x, = torch.autograd.grad(out.sum(), xi, create_graph=True)
            loss = out.pow(2).mean() + grad_x.pow(2).sum()
            loss.backward()
            results.append((loss.detach(), grad_x.detach(), xi.grad,
                            {n: p.grad for n, p in m.named_parameters()},
                            {n: b.clone() for n, b in m.named_buffers()}))
        (loss, gx, xg, grads, bufs), (loss_r, gx_r, xg_r, grads_r, bufs_r) = results
        assert_close(loss, loss_r)
        assert_close(gx, gx_r)
        assert_close(xg, xg_r)
        assert grads.keys() == grads_r.keys()
        for name in grads_r:
            assert grads[name] is not None and grads_r[name] is not None, name
            assert_close(grads[name], grads_r[name])
        for name in bufs_r:
            assert_close(bufs[name], bufs_r[name])
    return capture_stats(captured)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_penalty_through_a_captured_mlp(backend):
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                              torch.nn.Softplus(), torch.nn.Linear(16, 1))
    stats = _penalized_steps(mlp, backend)
    assert (stats["records"], stats["training_graphs"], stats["eager_runs"]) == (1, 1, 0), stats
    assert stats["hits"] == 2, stats


def test_second_order_keeps_batch_norm_statistics_and_dropout_draws():
    # The eager backend draws dropout's masks from torch's generator, as eager does: the
    # recomputation for the second order replays them and leaves the running statistics
    # as the one forward left them.
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.BatchNorm1d(16), torch.nn.Tanh(),
                                torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
    stats = _penalized_steps(model, "eager", seeded=True)
    assert (stats["records"], stats["training_graphs"], stats["eager_runs"]) == (1, 1, 0), stats


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_order_backward_twice_with_retained_graph(backend):
    # A plain backward lets the compiled graph go after using it; a second backward through
    # the same outputs (retain_graph=True) recomputes, and gradients add up as in eager.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    ref = copy.deepcopy(model)
    captured = capture(model, backend=backend)
    for _ in range(3):
        x = torch.randn(5, 4)
        for m, fn in ((model, captured), (ref, ref)):
            m.zero_grad()
            loss = fn(x).square().sum()
            loss.backward(retain_graph=True)
            loss.backward()
        for (name, p), p_ref in zip(model.named_parameters(), ref.parameters()):
            assert_close(p.grad, p_ref.grad)
    stats = capture_stats(captured)
    assert (stats["training_graphs"], stats["eager_runs"]) == (1, 0), stats


def test_a_plain_training_step_goes_straight_to_aotautograds_node():
    # Only parameters require grad: no second node (it would cost an engine pass per
    # backward); an input requiring grad takes it.
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    captured = capture(model, backend="eager")
    for _ in range(3):
        plain = captured(torch.randn(5, 4))
        penalized = captured(torch.randn(5, 4).requires_grad_())
    assert "TwiceDifferentiable" not in type(plain.grad_fn).__name__
    assert "TwiceDifferentiable" in type(penalized.grad_fn).__name__
    assert capture_stats(captured)["eager_runs"] == 0
