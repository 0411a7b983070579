"""Capture never raises where eager works and never returns another value (issue 12).

Each test is a small program in a real-world idiom that once raised under capture or
returned a wrong value; faults injected into the monitor, the record builder, the guard
and the mock show the safety net: the call runs eagerly, once, and the reason is counted.
"""
import numpy as np
import pytest
import torch

from eagerc.capture import capture, capture_stats
from eagerc.capture import faults, monitor_run, record_cache
from eagerc.testing import assert_close

X = torch.randn(2, 3, 4)


def run(fn, *args, calls=3, backend="eager"):
    """Capture `fn`, call it `calls` times on `args`; every result equals eager's."""
    cap = capture(fn, backend=backend)
    with torch.no_grad():
        ref = fn(*args)
        for _ in range(calls):
            assert_close(cap(*args), ref, equal_nan=True)
    return capture_stats(cap)


def value_checked(fn, a, b):
    """Whether the value `fn` reads on `a` is checked after its graph (speculate.py): a call
    on `b`, which reads another value, misses the first record (and is still right)."""
    cap = capture(fn, backend="eager")
    with torch.no_grad():
        for args in (a, a, b):
            assert_close(cap(args), fn(args))
    return capture_stats(cap)["value_misses"] == 1


def one_graph(stats, calls=3):
    assert stats["stop_reasons"] == {}
    assert (stats["records"], stats["graphs"], stats["hits"]) == (1, 1, calls - 1)


def test_tensor_pow_operator():
    # Tensor.__pow__ is a wrapper FX named torch._tensor.pow, which does not resolve.
    one_graph(run(lambda x: x ** 2 + 2 ** x, X))


def test_numpy_scalar_global_in_graph():
    scale = np.float64(0.5)  # np.float64 is a float subclass: it reached the graph source
    one_graph(run(lambda x: x * scale, X))


class Keywords(torch.nn.Module):
    def __init__(self):
        super().__init__()
        setattr(self, "lambda", 0.5)  # an attribute named like a keyword
        self.eps = float("inf")

    def forward(self, x):
        return x * getattr(self, "lambda") + torch.clamp(x, max=self.eps)


def test_keyword_attribute_and_inf_in_guard_source():
    one_graph(run(Keywords(), X))


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_non_finite_float_argument_hits(value):
    one_graph(run(lambda x, s: x * s, X, value))


def test_non_finite_float_dict_keys():
    def f(x):
        return {0.5: x, float("inf"): x + 1}
    stats = run(f, X)
    assert stats["records"] == 1 and stats["hits"] == 2


class TwoZeros(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.b, self.a = 0, 0  # one RefGraph node for both (the same int object)

    def forward(self, x):
        if self.b == 0:
            return x + self.a
        return x - 1


def test_every_path_to_an_equal_int_is_checked():
    m = TwoZeros()
    cap = capture(m, backend="eager")
    with torch.no_grad():
        cap(X)
        m.a = 5
        assert_close(cap(X), m(X))
    assert capture_stats(cap)["records"] == 2


def test_method_wrapper_and_dunder_calls():
    one_graph(run(lambda x: x.__add__(1).__rsub__(2).__mul__(x), X))


@pytest.fixture
def eager_fallback_counts():
    def count(stats, stage):
        return sum(n for r, n in stats["stop_reasons"].items()
                   if r.startswith(f"internal error in {stage}"))
    return count


def test_fault_in_record_builder_gives_eager_result(monkeypatch, eager_fallback_counts):
    def broken(*a, **k):
        raise SyntaxError("generated source")
    monkeypatch.setattr(monitor_run, "build_record", broken)
    side = []

    def f(x):
        side.append(1)
        return x * 2
    stats = run(f, X, calls=2)
    assert side == [1, 1, 1]  # eager ref + one run per call: never twice
    assert eager_fallback_counts(stats, "record") == 2


def test_fault_in_monitor_set_up_runs_eagerly_once(monkeypatch, eager_fallback_counts):
    from eagerc.capture import monitor

    def broken(self):
        raise ValueError("not enough values to unpack")
    monkeypatch.setattr(monitor.Monitor, "prepare", broken)
    side = []

    def f(x):
        side.append(1)
        return x + 1
    stats = run(f, X, calls=4)
    assert side == [1] * 5
    assert eager_fallback_counts(stats, "monitor") == faults.MAX_FAULTS
    assert stats["eager_runs"] == 1  # after MAX_FAULTS faults: eager for good


def test_fault_in_mock_runs_eagerly_and_drops_the_record(eager_fallback_counts):
    cap = capture(lambda x: x * 3, backend="eager")
    with torch.no_grad():
        cap(X)
        rec = cap.cache.records[0]

        def broken(slots):
            raise AttributeError("'method-wrapper' object has no attribute '__module__'")
        rec.mock = broken
        assert_close(cap(X), X * 3)
        assert_close(cap(X), X * 3)
    stats = capture_stats(cap)
    assert eager_fallback_counts(stats, "mock") == 1
    assert stats["records"] == 1 and stats["misses"] == 2  # re-recorded once


def test_fault_in_guard_runs_eagerly(monkeypatch, eager_fallback_counts):
    cap = capture(lambda x: x - 1, backend="eager")

    def broken(self, args, kwargs):
        raise TypeError("permute() missing 1 required positional arguments")
    with torch.no_grad():
        cap(X)
        monkeypatch.setattr(record_cache.RecordCache, "match", broken)
        assert_close(cap(X), X - 1)
    assert eager_fallback_counts(capture_stats(cap), "guard") == 1


def test_fault_in_op_recorder_stops_capture_not_the_program(monkeypatch):
    from eagerc.capture import op_recorder

    def broken(self, value):
        raise ValueError("not enough values to unpack")
    monkeypatch.setattr(op_recorder.OpRecorder, "_to_fx", broken)
    stats = run(lambda x: torch.relu(x) + 1, X)
    assert any(r.startswith("monitor error: ValueError") for r in stats["stop_reasons"])


def test_program_exception_still_propagates():
    def f(x):
        raise KeyError("mine")
    cap = capture(f, backend="eager")
    with pytest.raises(KeyError, match="mine"):
        cap(X)


def test_identical_raising_calls_are_monitored_once():
    # The corpus' FastSpeech2+HiFiGAN got token ids beyond its text vocabulary: every
    # identical call raised IndexError (in eager too), and each was a monitor run again.
    emb = torch.nn.Embedding(10, 4)

    def f(ids):
        return emb(ids) * 2

    cap = capture(f, backend="eager")
    bad, good = torch.tensor([[1, 12]]), torch.tensor([[1, 2]])
    with torch.no_grad():
        for _ in range(3):
            with pytest.raises(IndexError):
                emb(bad)
            with pytest.raises(IndexError):
                cap(bad)
        st = capture_stats(cap)
        assert (st["records"], st["misses"], st["hits"], st["eager_runs"]) == (1, 1, 2, 2)
        # The guard cannot see what raised (tensor values): a call that does not raise
        # runs eagerly and drops that record; the next is recorded, then calls hit.
        for _ in range(3):
            assert_close(cap(good), emb(good) * 2)
    st = capture_stats(cap)
    assert (st["records"], st["misses"], st["hits"], st["graphs"]) == (1, 2, 4, 1)
    assert st["eager_runs"] == 3


def test_starred_generator_arguments_are_not_consumed():
    # CALL_FUNCTION_EX takes any iterable; the monitor once read it into a list first.
    def f(x):
        y = x.permute(*(d for d in (0, 2, 1)))
        a, b = (t for t in y.unbind(0))
        return a + b
    one_graph(run(f, X))


def test_deepcopy_inside_forward():
    import copy

    class Cfg:
        def __init__(self):
            self.scale = 2.0
            self.sub = {"k": [1, 2]}

    cfg = Cfg()

    def f(x):
        c = copy.deepcopy(cfg)
        return x * c.scale * len(c.sub["k"])
    stats = run(f, X)
    assert stats["stop_reasons"] == {} or all(
        not r.startswith("internal") for r in stats["stop_reasons"])


def test_values_made_from_constants_may_be_read():
    def f(x):
        mask = torch.ones(x.shape[0], dtype=torch.bool)
        if mask.sum() == mask.numel():  # transformers' fast_all(padding_mask)
            return x * 2
        return x
    one_graph(run(f, X))


def test_constant_written_from_an_input_is_no_constant():
    def f(x):
        t = torch.zeros(3)
        view = t[:2]
        t.add_(x[0, 0, :3])
        return x * (2 if view.sum().item() > 0 else 3)
    stats = run(f, X)
    assert stats["stop_reasons"] == {}
    neg = -X.abs()
    # the value was read from the graph, not a constant (two inputs whose sums differ)
    assert value_checked(f, X.abs() + 1, -X.abs() - 1)
    stats = run(f, neg)


def test_random_values_are_no_constants():
    def f(x):
        r = torch.rand(1)
        return x * 2 if r.item() > 2 else x  # never true, but read from the generator
    # checked after the graph (the generator rewound on a miss): another value every call,
    # so each hit misses, and after MAX_VALUE_MISSES the read stops capture
    stats = run(f, X, calls=6)
    assert stats["value_misses"] == 3, stats
    assert stats["stop_reasons"] == {"tensor value read: Tensor.item": 1}


def test_in_place_set_from_outside_is_replayed():
    warned = set()

    def f(x):
        warned.add("once")
        return x + 1
    stats = run(f, X)
    assert warned == {"once"} and stats["records"] <= 2


def test_lru_cached_helper():
    import functools

    @functools.lru_cache
    def version_ok(major):
        return major >= 2

    def f(x):
        return x * 2 if version_ok(2) else x
    one_graph(run(f, X))


def test_lru_cached_tensor_filled_before_capture():
    # transformers' DINOv3-ViT: patch coordinates from an lru_cache that an eager call had
    # filled; the cached tensor stopped capture as "of unknown origin".
    import functools

    @functools.lru_cache
    def coords(n, dtype=torch.float32):
        return torch.arange(n, dtype=dtype) / n

    def f(x):
        return x * coords(x.shape[-1], dtype=x.dtype)
    f(X)  # an eager call fills the cache
    one_graph(run(f, X))
    one_graph(run(f, X, backend=None))  # Inductor: the cached tensor is a graph input


def test_lru_cached_on_a_tensor_is_not_held():
    # lru_cache keys a tensor by identity: another tensor of the same shape misses it in
    # eager, so the record must not reuse the result cached for the first one.
    import functools

    @functools.lru_cache
    def doubled(t):
        return t * 2

    def f(x):
        return doubled(x) + 1
    a, b = torch.randn(3), torch.randn(3)
    doubled(a)  # cached before capture: a hit inside the monitor run
    cap = capture(f, backend="eager")
    with torch.no_grad():
        for x in (a, b, a, b):
            assert_close(cap(x), x * 2 + 1)


def test_monitor_run_frees_intermediates_as_eager_does():
    import weakref
    freed = []

    def f(x):
        y = x * 2
        ref = weakref.ref(y)
        z = y + 1
        del y
        freed.append(ref() is None)  # eager: the intermediate is gone here
        return z
    cap = capture(f, backend="eager")
    with torch.no_grad():
        f(X)
        cap(X)
    assert freed == [True, True]


def test_python_type_as_dtype():
    one_graph(run(lambda x: x + torch.zeros(4, dtype=int) + torch.ones(4, dtype=float), X))


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_custom_autograd_function_inlined_under_no_grad():
    one_graph(run(lambda x: Square.apply(x) + 1, X))


def test_custom_autograd_function_backward_under_grad():
    cap = capture(lambda x: Square.apply(x).sum(), backend="eager")
    for _ in range(2):
        x = X.clone().requires_grad_()
        cap(x).backward()
        assert_close(x.grad, 2 * X)
    # captured for training: the Function is one node, its own backward in the compiled one
    stats = capture_stats(cap)
    assert stats["training_graphs"] == 1 and stats["hits"] == 1 and stats["eager_runs"] == 0


def test_unresolvable_targets_become_named_shims():
    import torch.fx as fx
    from eagerc.capture.fx_targets import fx_target

    mw = (2.0).__mul__  # a method-wrapper: no __module__ for FX to write
    assert type(mw).__name__ == "method-wrapper"
    kind, target = fx_target(mw, "__mul__")
    assert kind == "call_function" and target.__name__.startswith("eagerc_")
    g = fx.Graph()
    a = g.placeholder("a")
    g.output(g.call_function(target, (a,)))
    assert fx.GraphModule(torch.nn.Module(), g)(3.0) == 6.0
    assert fx_target(torch.Tensor.__pow__, "pow") == ("call_method", "__pow__")


def test_logging_inside_forward():
    import logging
    log = logging.getLogger("eagerc.test.capture")

    def f(x):
        log.warning("flattening %s", tuple(x.shape))  # logging inspects frames
        return x.flatten() * 2
    one_graph(run(f, X))


def test_annotated_library_function_is_not_run_through():
    from eagerc.capture import annotations

    def warn_if_padding(ids):  # reads tensor values, only to warn
        if 0 in ids:
            pass

    def f(x, ids):
        warn_if_padding(ids)
        return x + 1
    key = (warn_if_padding.__module__, warn_if_padding.__qualname__)
    annotations._BY_NAME[key] = annotations.PURE_REF
    try:
        one_graph(run(f, X, torch.tensor([0, 1])))
    finally:
        del annotations._BY_NAME[key]


def test_ones_like_of_an_input_is_a_constant():
    def f(x):
        mask = torch.ones_like(x[..., 0], dtype=torch.bool)  # BERT's default attention mask
        return x * 2 if mask.all() else x
    one_graph(run(f, X))

    def g(x):
        mask = torch.ones_like(x).mul(x)  # values of x: no constant
        return x * 2 if mask.all() else x
    assert value_checked(g, X, X * 0)


def test_a_fault_while_trying_other_records_after_a_value_miss():
    def f(x):
        return x + 1 if x.sum() > 0 else x - 1

    cap = capture(f, backend="eager")
    pos, neg = torch.ones(3), -torch.ones(3)
    with torch.no_grad():
        for x in (pos, neg):
            cap(x)
        older = cap.cache.records[1]

        def broken(*a):
            raise RuntimeError("guard fault")
        older.guard = broken  # tried after the newest record's value check fails
        for x in (pos, neg, pos):
            assert_close(cap(x), f(x))
    assert capture_stats(cap)["stop_reasons"] == {"internal error in guard: RuntimeError": 1}
