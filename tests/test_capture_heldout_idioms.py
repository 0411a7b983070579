"""Idioms of the held-out corpus (tools/capture_heldout.py: model files from public
repositories) under capture: each case's results equal eager's on every call, and where
capture can serve the idiom from a graph, it does."""
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close


def _calls(fn, inputs, **kw):
    """Calls `fn` captured on each input under no_grad, comparing every result with
    eager's (values and shapes); returns the stats."""
    captured = capture(fn, backend="eager", **kw)
    with torch.no_grad():
        for x in inputs:
            got, want = captured(x), fn(x)
            assert got.shape == want.shape
            assert_close(got, want)
    return capture_stats(captured)


A = torch.tensor([1.0, -1.0, 2.0, 3.0])
B = torch.tensor([1.0, -1.0, -2.0, 3.0])


def _masked(x):  # a size taken from a boolean index, baked into a factory
    return torch.ones(x[x > 0].shape[0]) * 2


def _nonzero(x):
    idx = torch.nonzero(x > 0)
    return torch.zeros(idx.shape[0], 3) + idx


def _unique(x):  # vit-pytorch's ats_vit pads torch.unique's results
    u = torch.unique(x.clamp(min=0))
    return u.reshape(u.shape[0], 1) + 1


def test_value_shaped_results_are_checked_after_the_graph():
    """The result's shape of nonzero, unique, `x[mask]` depends on values: a record checks
    it after its graph (a record per shape), never serving another shape's call."""
    for fn in (_masked, _nonzero, _unique):
        stats = _calls(fn, [A, A, B, B, A])
        assert stats["records"] == 2 and stats["eager_runs"] == 0, (fn.__name__, stats)
        assert stats["stop_reasons"] == {}, stats


def test_value_shaped_result_with_random_ops_equals_eager():
    """A graph that also draws random numbers: under each seed the captured call returns
    eager's result (a record serves only calls whose draw gives its shape; a miss must not
    leave the generator moved)."""
    def f(x):
        keep = x[torch.rand(x.shape) > 0.5]
        return torch.ones(keep.shape[0]) * keep.sum()
    captured = capture(f, backend="eager")
    with torch.no_grad():
        for seed in (0, 0, 1, 2, 0, 3):
            torch.manual_seed(seed)
            got = captured(A)
            after = torch.rand(2)  # the generator is where eager leaves it
            torch.manual_seed(seed)
            want = f(A)
            assert got.shape == want.shape
            assert_close(got, want)
            assert_close(after, torch.rand(2))


class _Rotary(torch.nn.Module):
    """vit-pytorch's rvt / vit_nd_pope: a rotary embedding computed with CUDA autocast off
    (`@torch.amp.autocast("cuda", enabled=False)`), attention under an `sdpa_kernel`
    context that turns only the PrivateUse1 "overrideable" backend off (vivit): nothing
    that changes a CPU call's kernel."""

    @torch.amp.autocast("cuda", enabled=False)
    def freqs(self, x):
        return torch.arange(x.shape[-1], dtype=torch.float32).sin()

    def forward(self, x):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        x = x * self.freqs(x)
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION,
                          SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(x, x, x)


def test_settings_that_leave_the_kernels_are_no_stop():
    stats = _calls(_Rotary(), [torch.randn(2, 4, 8)] * 3)
    assert stats["records"] == 1 and stats["graphs"] == 1 and stats["eager_runs"] == 0, stats
    assert stats["stop_reasons"] == {}, stats


def test_settings_changed_stop():
    """A write that changes a setting (math attention only, CPU autocast on) stops: the
    ops after it run under settings a record would not reproduce."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def math_only(x):
        with sdpa_kernel([SDPBackend.MATH]):
            return torch.nn.functional.scaled_dot_product_attention(x, x, x)

    def cpu_autocast(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x @ x.transpose(-1, -2)
    for fn in (math_only, cpu_autocast):
        stats = _calls(fn, [torch.randn(2, 4, 8)] * 3)
        assert any(k.startswith("torch setting changed") for k in stats["stop_reasons"]), stats


def _chunked(x):
    """performer-pytorch's chunked attention, wwt's `zip(*packs)`: zip over a starred map /
    generator of tensor chunks."""
    out = []
    for a, b in zip(*map(lambda t: t.chunk(2, dim=-1), (x, x * 2))):
        out.append(a * b)
    firsts, lasts = zip(*((t[:1], t[1:]) for t in (x, x + 1)))
    return torch.cat(out, -1) + firsts[0].sum() + lasts[1].sum()


def test_zip_over_a_starred_iterable():
    stats = _calls(_chunked, [torch.randn(3, 4)] * 3)
    assert stats["records"] == 1 and stats["graphs"] == 1 and stats["eager_runs"] == 0, stats
    assert stats["stop_reasons"] == {}, stats


class _Attention(torch.nn.Module):
    """whisper's MultiHeadAttention: a class attribute (`use_sdpa`) read off the class,
    switched by a context manager of the library (`disable_sdpa()`)."""
    use_sdpa = True

    def forward(self, x):
        if _Attention.use_sdpa:
            return torch.nn.functional.scaled_dot_product_attention(x, x, x)
        return torch.softmax(x @ x.transpose(-1, -2) * 0.5, -1) @ x  # another scale


def test_class_attribute_flag_is_guarded():
    """Setting the flag on the class between calls gives the other path's result (the
    record made with the flag on must not serve the call with it off)."""
    m, x = _Attention(), torch.randn(2, 3, 4)
    captured = capture(m, backend="eager")
    try:
        with torch.no_grad():
            for flag in (True, True, False, False, True):
                _Attention.use_sdpa = flag
                assert_close(captured(x), m(x))
    finally:
        _Attention.use_sdpa = True
    stats = capture_stats(captured)
    assert stats["records"] == 2 and stats["hits"] == 3, stats


class _PatchDropout(torch.nn.Module):
    """vit-pytorch's PatchDropout in train mode: patches kept by `randn(...).topk(k)`."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        keep = torch.randn(x.shape[0], x.shape[1]).topk(3, dim=-1).indices
        return self.proj(x[torch.arange(x.shape[0])[:, None], keep])


def test_training_steps_with_random_patch_choice_equal_eager():
    """A captured training step draws what eager draws, step after step: the backward
    graph draws nothing (a dead copy of the forward's randn used to draw there)."""
    x = torch.randn(2, 6, 4)

    def steps(fn, module):
        torch.manual_seed(0)
        out = []
        for _ in range(4):
            loss = fn(x).pow(2).mean()
            loss.backward()
            out.append((loss.detach(), module.proj.weight.grad.clone()))
            module.proj.weight.grad = None
        return out
    torch.manual_seed(1)
    ref_module = _PatchDropout()
    torch.manual_seed(1)
    module = _PatchDropout()
    captured = capture(module, backend="eager")
    for (la, ga), (lb, gb) in zip(steps(ref_module, ref_module), steps(captured, module)):
        assert_close(lb, la)
        assert_close(gb, ga)
    stats = capture_stats(captured)
    assert stats["training_graphs"] == 1 and stats["hits"] == 3, stats


class _Flagged(torch.nn.Module):
    """A class-level switch read through the instance (`self.fused`), set on the class by
    library code between calls."""
    fused = True

    def forward(self, x):
        return x * 2 if self.fused else x - 1


def test_class_attribute_read_through_instance_is_guarded():
    m, x = _Flagged(), torch.randn(3)
    captured = capture(m, backend="eager")
    try:
        with torch.no_grad():
            for flag in (True, True, False, False):
                _Flagged.fused = flag
                assert_close(captured(x), m(x))
    finally:
        _Flagged.fused = True
    assert capture_stats(captured)["records"] == 2


class _Configured(torch.nn.Module):
    """A class-level config dict read through the instance, updated in place between
    calls."""
    cfg = {"scale": 2.0}

    def forward(self, x):
        return x * self.cfg["scale"]


def test_class_level_container_is_guarded():
    m, x = _Configured(), torch.randn(3)
    captured = capture(m, backend="eager")
    try:
        with torch.no_grad():
            for scale in (2.0, 2.0, 3.0, 3.0):
                _Configured.cfg["scale"] = scale
                assert_close(captured(x), m(x))
    finally:
        _Configured.cfg["scale"] = 2.0
    assert capture_stats(captured)["records"] == 2


class _KmeansInit(torch.nn.Module):
    """vector-quantize-pytorch's codebook: `if not self.initted:` on a one-element buffer
    that the first training call flips (`self.initted.data.copy_(...)`); a counter buffer
    read with `.item()`."""

    def __init__(self):
        super().__init__()
        self.register_buffer("initted", torch.tensor(False))
        self.register_buffer("steps", torch.tensor(0))
        self.codebook = torch.nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        if not self.initted:
            self.codebook.data.copy_(x[:4])
            self.initted.data.copy_(torch.tensor(True))
        scale = 1.0 / (1 + self.steps.item())
        return torch.cdist(x, self.codebook) * scale


def test_small_buffer_values_are_guarded():
    """The read of a small outside tensor's value is guarded: the first call (initializing)
    and the later ones are records of their own, each call equal to eager's, and a buffer
    changed between calls is seen."""
    x = torch.randn(6, 3)
    torch.manual_seed(0)
    ref = _KmeansInit()
    torch.manual_seed(0)
    m = _KmeansInit()
    captured = capture(m, backend="eager")
    with torch.no_grad():
        for step in range(5):
            if step == 3:
                ref.steps.fill_(2)
                m.steps.fill_(2)
            assert_close(captured(x), ref(x))
    stats = capture_stats(captured)
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["records"] == 3 and stats["hits"] == 2, stats


def test_argument_value_read_still_stops():
    """A small tensor argument's value (a timestep) is not guarded by value: it changes from
    call to call, and a record per value would make most calls monitor runs."""
    def f(x, t):
        return x * 2 if t.item() > 5 else x - 1
    captured = capture(f, backend="eager")
    x = torch.randn(3)
    with torch.no_grad():
        for t in (1, 9, 2, 8):
            assert_close(captured(x, torch.tensor(t)), f(x, torch.tensor(t)))
    assert "tensor value read: Tensor.item" in capture_stats(captured)["stop_reasons"]


class _Registry:
    """A counter and a marker kept on a class (`RemovableHandle.next_id += 1` in
    torch.utils.hooks when hooks are registered)."""
    next_id = 0
    last = None


def _register(x):
    _Registry.next_id += 1
    _Registry.last = "used"
    return x * 2


def test_class_attribute_writes_are_replayed():
    """Writes of a class's attributes are replayed by the mock (the counter recomputed from
    its value at call time): one record, and the class ends as eager leaves it."""
    _Registry.next_id, _Registry.last = 0, None
    stats = _calls(_register, [torch.randn(3)] * 4)
    assert _Registry.next_id == 8 and _Registry.last == "used"  # 4 captured + 4 eager calls
    assert stats["records"] == 1 and stats["hits"] == 3 and stats["stop_reasons"] == {}, stats


class _AttentionRecorder(torch.nn.Module):
    """vit-pytorch's Recorder: on its first call it registers a forward hook (a bound
    method) on a child, which then appends the child's outputs to a list every call."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Softmax(-1))
        self.recordings, self.hooks, self.registered = [], [], False

    def _hook(self, module, inputs, output):
        self.recordings.append(output.clone().detach())

    def forward(self, x):
        self.recordings.clear()
        if not self.registered:
            self.hooks.append(self.net[1].register_forward_hook(self._hook))
            self.registered = True
        out = self.net(x)
        return out, torch.stack(self.recordings, dim=1)


def test_hook_registered_in_first_forward():
    """The first call (hook registration: a new bound method, a RemovableHandle, the
    class-level id counter) is one record, the later calls another; every result equal to
    eager's and one hook left, as in eager."""
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    ref = _AttentionRecorder()
    torch.manual_seed(0)
    m = _AttentionRecorder()
    captured = capture(m, backend="eager")
    with torch.no_grad():
        for _ in range(4):
            got, want = captured(x), ref(x)
            assert_close(got[0], want[0])
            assert_close(got[1], want[1])
    assert len(m.net[1]._forward_hooks) == 1 and len(m.hooks) == 1
    stats = capture_stats(captured)
    assert stats["records"] == 2 and stats["stop_reasons"] == {} and stats["eager_runs"] == 0
