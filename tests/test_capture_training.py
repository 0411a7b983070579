"""Training under eagerc.capture: grad mode on and parameters requiring grad. The forward is
recorded as under no_grad and compiled through AOTAutograd (training.py); `backward()`
runs the compiled backward. Gradients are compared with eager's (eagerc.testing's table)
on models nobody here wrote (transformers, torch.nn), each step counted: one record, one
training graph, no eager runs."""
import copy

import pytest
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close

BACKENDS = ["eager", None]  # None: Inductor through eagerc's compile/cache layer


def _grads(module):
    # A parameter an output's graph reaches but the loss does not (BERT's pooler when the
    # loss reads the last hidden state) gets zeros from a compiled backward, as under
    # torch.compile, and None in eager: both mean "no contribution".
    return {n: (p.grad if p.grad is not None else torch.zeros_like(p))
            for n, p in module.named_parameters()}


def _steps(model, make_inputs, loss_of, backend, steps=3, lr=0.1, model_tol=False):
    """Train `model` under capture and a copy eagerly, step for step (SGD outside the
    captured call), comparing losses, gradients and the updated parameters."""
    torch.manual_seed(0)
    ref = copy.deepcopy(model)
    captured = capture(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=lr)
    for _ in range(steps):
        inputs = make_inputs()
        opt.zero_grad()
        opt_ref.zero_grad()
        loss = loss_of(captured(*inputs))
        loss.backward()
        loss_ref = loss_of(ref(*inputs))
        loss_ref.backward()
        assert_close(loss, loss_ref, model=model_tol)
        got, want = _grads(model), _grads(ref)
        for name in want:
            assert_close(got[name], want[name], model=model_tol, msg=lambda m, n=name: f"{n}: {m}")
        opt.step()
        opt_ref.step()
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert_close(p, q, model=model_tol)
    return capture_stats(captured)


def _assert_one_training_graph(stats, steps=3):
    assert stats["records"] == 1, stats
    assert stats["graphs"] == 1 and stats["training_graphs"] == 1, stats
    assert stats["eager_runs"] == 0 and stats["hits"] == steps - 1, stats
    assert stats["stop_reasons"] == {}, stats


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_training_steps(backend):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4))
    stats = _steps(model, lambda: (torch.randn(5, 8),),
                   lambda out: torch.nn.functional.cross_entropy(out, torch.arange(5) % 4),
                   backend)
    _assert_one_training_graph(stats)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batchnorm_train_mode_updates_running_stats(backend):
    """BatchNorm in train mode writes its running statistics (input mutations of the graph,
    applied by AOTAutograd's epilogue) and counts batches."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU()).train()
    ref = copy.deepcopy(model)
    stats = _steps(model, lambda: (torch.randn(2, 3, 8, 8),), lambda out: out.pow(2).mean(),
                   backend)
    assert stats["eager_runs"] == 0 and stats["graphs"] >= 1, stats
    bn = model[1]
    assert bn.num_batches_tracked.item() == 3
    assert not torch.equal(bn.running_mean, ref[1].running_mean)  # it moved from its start


class _ScaleGrad(torch.autograd.Function):
    """Identity forward, backward scaled by 3: a backward no derivative of the forward's
    ops gives."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class _WithFunction(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return _ScaleGrad.apply(self.lin(x)).relu()


@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_function_keeps_its_backward(backend):
    model = _WithFunction()
    stats = _steps(model, lambda: (torch.randn(3, 4),), lambda out: out.sum(), backend)
    _assert_one_training_graph(stats)


class _DropoutNet(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.lin = torch.nn.Linear(16, 32)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.lin(x))


def test_dropout_train_mode_eager_backend_draws_as_eager():
    """With the eager backend the graphs run the ATen ops the program called: the same
    draws from torch's generator as eager, so seeded steps are equal, gradients too."""
    torch.manual_seed(1)
    model = _DropoutNet(0.5).train()
    ref = copy.deepcopy(model)
    captured = capture(model, backend="eager")
    for step in range(3):
        x = torch.randn(8, 16)
        torch.manual_seed(100 + step)
        out = captured(x)
        out.sum().backward()
        torch.manual_seed(100 + step)
        out_ref = ref(x)
        out_ref.sum().backward()
        assert torch.equal(out, out_ref)
        assert_close(model.lin.weight.grad, ref.lin.weight.grad)
    _assert_one_training_graph(capture_stats(captured))


def test_dropout_train_mode_inductor_mask_matches_backward():
    """With Inductor, dropout draws as under torch.compile (Inductor's own random
    lowering): not eager's numbers, but a new mask per call, about p dropped, and the
    backward uses the forward's mask: d(sum)/d(bias) = kept / (1 - p) per unit."""
    p = 0.25
    torch.manual_seed(2)
    model = _DropoutNet(p).train()
    captured = capture(model)
    masks = []
    for _ in range(3):
        model.zero_grad()
        x = torch.randn(64, 16)
        out = captured(x)
        out.sum().backward()
        kept = (out != 0).float()
        assert_close(model.lin.bias.grad, kept.sum(0) / (1 - p))
        pre = model.lin(x).detach()
        assert_close(out[kept.bool()], (pre / (1 - p))[kept.bool()])
        assert 0.15 < 1 - kept.mean().item() < 0.35
        masks.append(kept)
    assert not torch.equal(masks[1], masks[2])
    _assert_one_training_graph(capture_stats(captured))


def test_eval_then_train_records_apart():
    """The same module in no_grad inference and in training: one record each (the guard
    checks grad mode), both served from their graphs afterwards."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    captured = capture(model, backend="eager")
    x = torch.randn(2, 4)
    for _ in range(2):
        with torch.no_grad():
            assert_close(captured(x), model(x))
        out = captured(x)
        assert out.requires_grad
        out.sum().backward()
    stats = capture_stats(captured)
    assert stats["records"] == 2 and stats["graphs"] == 2 and stats["training_graphs"] == 1
    assert stats["hits"] == 2 and stats["eager_runs"] == 0


def test_readme_snippet_captures_in_grad_mode():
    """`captured = eagerc.capture(model); captured(x)` on a plain model with grad mode on
    (no no_grad): the second call is a hit of a compiled record."""
    import eagerc
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    captured = eagerc.capture(model)
    x = torch.randn(4, 8)
    captured(x)
    out = captured(x)
    assert_close(out, model(x))
    stats = eagerc.capture_stats(captured)
    assert stats["hits"] == 1 and stats["graphs"] == 1 and stats["eager_runs"] == 0, stats


transformers = pytest.importorskip("transformers")


def _bert():
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=64, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    return transformers.BertForSequenceClassification(cfg)


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2,
                                  n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [_bert, _gpt2], ids=["bert", "gpt2"])
def test_transformers_training_step(make, backend):
    torch.manual_seed(0)
    model = make().train()
    ids = lambda: (torch.randint(0, 100, (2, 16)),)  # noqa: E731
    stats = _steps(model, ids, lambda out: out.logits.float().pow(2).mean(), backend,
                   model_tol=True)
    _assert_one_training_graph(stats)


def test_grad_fn_read_of_a_tensor_the_run_made():
    """`y.grad_fn is not None` on a tensor the run made is fixed by grad mode and the
    inputs' requires_grad (both guarded): one record per grad mode, no stop."""
    lin = torch.nn.Linear(4, 4)

    def f(x):
        y = lin(x)
        return y * 2 if y.grad_fn is not None else y * 3
    captured = capture(f, backend="eager")
    x = torch.randn(2, 4)
    for _ in range(2):
        assert_close(captured(x), lin(x) * 2)
        with torch.no_grad():
            assert_close(captured(x), lin(x) * 3)
    stats = capture_stats(captured)
    assert stats["records"] == 2 and stats["hits"] == 2 and stats["stop_reasons"] == {}, stats


class _Experts(torch.nn.Module):
    """MoE experts as transformers computes them on the CPU: rows sorted by expert,
    `torch._grouped_mm` with cumulative offsets (float32: its meta function refuses it)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 8, 8) * 0.3)

    def forward(self, x, offs):
        return torch._grouped_mm(x, self.w, offs=offs).relu()


@pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="no torch._grouped_mm")
@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_mm_float32_training(backend):
    offsets = iter([[2, 2, 7], [0, 5, 7], [3, 6, 7]])  # a new split of the rows per step

    def inputs():
        return torch.randn(7, 8), torch.tensor(next(offsets), dtype=torch.int32)
    stats = _steps(_Experts(), inputs, lambda out: out.pow(2).mean(), backend)
    _assert_one_training_graph(stats)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool_training(backend):
    """A ResNet stem (convolution, BatchNorm, ReLU, max pooling): Inductor's decomposition
    of max_pool2d_with_indices asks its lowerings, which the joint trace must have imported."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1)).train()
    stats = _steps(model, lambda: (torch.randn(2, 3, 12, 12),), lambda out: out.pow(2).mean(),
                   backend)
    _assert_one_training_graph(stats)


class _NLL(torch.nn.Module):
    """GaussianNLLLoss checks its variance's values (`torch.any(var < 0)`): a graph
    AOTAutograd cannot trace (DataDependentOutputException)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)
        self.loss = torch.nn.GaussianNLLLoss()

    def forward(self, x, target):
        out = self.lin(x)
        return self.loss(out, target, out.detach().abs() + 0.5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_aot_cannot_trace_runs_as_recorded(backend, caplog):
    """A training graph AOTAutograd refuses runs as recorded (its ops build eager's
    autograd graph): gradients equal eager's, still one graph and no eager run."""
    with caplog.at_level("WARNING", logger="eagerc"):
        stats = _steps(_NLL(), lambda: (torch.randn(3, 4), torch.randn(3, 2)),
                       lambda out: out, backend)
    assert "not traced by AOTAutograd" in caplog.text
    _assert_one_training_graph(stats)


def test_value_read_after_dropout_p0_in_training():
    """XLM's `assert lengths.max().item() <= slen` after a dropout with p=0 in train mode:
    such a dropout draws nothing, so the read is checked after the graph (no stop)."""
    lin = torch.nn.Linear(4, 4)

    def f(x, lengths):
        h = torch.nn.functional.dropout(lin(x), p=0.0, training=True)
        assert lengths.max().item() <= x.shape[0]
        return h.sum()

    captured = capture(f, backend="eager")
    for _ in range(3):
        x = torch.randn(5, 4)
        lin.zero_grad()
        captured(x, torch.tensor([3, 5])).backward()
        got = [p.grad.clone() for p in lin.parameters()]
        lin.zero_grad()
        f(x, torch.tensor([3, 5])).backward()
        assert_close(got, [p.grad for p in lin.parameters()])
    stats = capture_stats(captured)
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["training_graphs"] == 1 and stats["records"] == 1, stats
