"""numpy on tensor data under capture (eagerc/capture/numpy_ops.py): traced into the graph
through torch._numpy, results equal to eager's, the second identical call a hit; reads of
the values by Python stop with a reason (and the call stays correct)."""
import numpy as np
import pytest
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close


def _run(fn, make, backend="eager", calls=3):
    """`calls` calls on fresh inputs (same shapes): each result equal to eager's."""
    captured = capture(fn, backend=backend)
    with torch.no_grad():
        for _ in range(calls):
            args = make()
            assert_close(captured(*args), fn(*args))
    return capture_stats(captured)


def _whole(stats, calls=3):
    assert stats["records"] == 1 and stats["graphs"] == 1, stats
    assert stats["hits"] == calls - 1 and stats["eager_runs"] == 0, stats
    assert stats["stop_reasons"] == {}, stats


def _x():
    return (torch.randn(3, 4),)


def _tile_sqrt(x):
    a = (x * 2).numpy()
    b = np.tile(a, (2, 1))
    c = np.sqrt(np.abs(b)) + 1.0
    return torch.from_numpy(c) * x.sum()


def _methods(x):
    a = x.numpy()
    b = a.reshape(4, 3).T.astype(np.float64)[1:, :2]
    m = np.mean(b, axis=0, keepdims=True)
    return torch.tensor(b - m, dtype=torch.float32) + 1


def _concat_where(x, y):
    a, b = x.numpy(), y.numpy()
    c = np.concatenate([a, b], axis=1)
    d = np.where(c > 0, c, 0.1 * c)
    return torch.as_tensor(d).relu() + x.mean()


def _input_array_out(x):
    # the argument itself read as an array: a graph input, not a constant
    return torch.from_numpy(np.exp(x.numpy()) - 1)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn,make", [
    (_tile_sqrt, _x), (_methods, _x), (_input_array_out, _x),
    (_concat_where, lambda: (torch.randn(3, 4), torch.randn(3, 2)))],
    ids=["tile_sqrt", "methods", "input_array", "concat_where"])
def test_numpy_on_tensor_data_is_one_graph(fn, make, backend):
    _whole(_run(fn, make, backend))


def test_numpy_module_forward_training_keeps_gradients():
    lin = torch.nn.Linear(4, 4)

    def f(x):
        scale = torch.from_numpy(np.sqrt(np.abs(x.detach().numpy())) + 1)
        return (lin(x) * scale).sum()

    captured = capture(f, backend="eager")
    for _ in range(3):
        x = torch.randn(2, 4)
        lin.zero_grad()
        captured(x).backward()
        got = [p.grad.clone() for p in lin.parameters()]
        lin.zero_grad()
        f(x).backward()
        assert_close(got, [p.grad for p in lin.parameters()])
    stats = capture_stats(captured)
    _whole(stats)
    assert stats["training_graphs"] == 1, stats


def _value_read(x):
    a = x[0, 0].numpy()
    return x * float(a)


def _scalar(x):
    s = x.numpy().sum()  # a numpy scalar: its value leaves the graph
    return x * s


def _asarray(x):
    b = np.asarray(x.numpy() * 2)
    return torch.from_numpy(b + 1)


def _printed(x):
    a = x.numpy()
    str(a)
    return x + 1


@pytest.mark.parametrize("fn,reason", [
    (_value_read, "numpy array from tensor data read: ndarray.__float__"),
    (_scalar, "numpy scalar from tensor data: ndarray.sum"),
    (_asarray, "numpy native on tensor data: asarray"),
    (_printed, "numpy array from tensor data read: ndarray.__str__")],
    ids=["float", "scalar", "asarray", "str"])
def test_values_read_by_python_stop_and_stay_correct(fn, reason):
    stats = _run(fn, _x)
    assert stats["graphs"] == 0 and reason in stats["stop_reasons"], stats
    assert stats["records"] == 1 and stats["misses"] == 1, stats  # no re-record


def test_numpy_on_plain_numbers_is_unchanged():
    def f(x):
        return x * float(np.sqrt(np.prod(x.shape)))
    _whole(_run(f, _x))


def test_array_returned_outside_run_behaves_as_ndarray():
    # a traced array that outlives the monitor run is still numpy's value
    def f(x):
        return (x + 1).numpy() * 2

    captured = capture(f, backend="eager")
    x = torch.randn(2, 3)
    out = captured(x)
    np.testing.assert_allclose(out, f(x))
    assert float(out.sum()) == pytest.approx(float(f(x).sum()))
    assert repr(out) == repr(np.asarray(f(x)))


def test_array_stored_outside_is_rebuilt_by_the_mock():
    """An array of tensor data stored on an outside object: the mock stores the graph's
    tensor's `.numpy()` (a plain ndarray, as eager's)."""
    class State:
        pass
    state = State()

    def f(x):
        state.a = np.sqrt(np.abs((x * 2).numpy()))
        return x + 1

    captured = capture(f, backend="eager")
    for _ in range(3):
        x = torch.randn(3, 4)
        assert_close(captured(x), x + 1)
        np.testing.assert_allclose(state.a, np.sqrt(np.abs((x * 2).numpy())), rtol=1e-6)
    _whole(capture_stats(captured))
