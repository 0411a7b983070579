"""The long tail of real code under capture (issue 47): idioms of small research repositories
that stopped capture, re-recorded without a reason, or raised inside capture. Each case is
either captured whole (one graph, hits, no stops) and equal to eager, or stops with a reason
that names what stopped it."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from eagerc.capture import capture, capture_stats
from eagerc.testing import assert_close


def _calls(module, inputs, grad=False):
    """Calls `module` captured (backend "eager") on each input, comparing every result with
    eager's; returns the stats."""
    captured = capture(module, backend="eager")
    with torch.set_grad_enabled(grad):
        for x in inputs:
            got, want = captured(x), module(x)
            assert_close(got, want)
    return capture_stats(captured)


def _whole(stats, calls=2):
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["graphs"] == 1 and stats["hits"] == calls - 1, stats


X = torch.randn(2, 3)


def test_import_inside_forward_under_an_import_hook():
    """An environment that replaced builtins.__import__ with a Python hook before capture
    loaded (an import tracker): the hook calls the native __import__, which must still be
    known (it was annotated by identity only: "unannotated native call:
    builtins.__import__")."""
    code = textwrap.dedent("""
        import builtins
        class ImportTracker:
            def __init__(self):
                self.orig, self.names = builtins.__import__, []
                builtins.__import__ = self.hook
            def hook(self, name, globals=None, locals=None, fromlist=(), level=0):
                self.names.append(name)
                return self.orig(name, globals, locals, fromlist, level)
        tracker = ImportTracker()
        import torch
        from eagerc.capture import capture, capture_stats
        class Net(torch.nn.Module):
            def forward(self, x):
                import math
                act = getattr(__import__("torch.nn.functional", fromlist=["gelu"]), "gelu")
                return act(x) * math.pi
        x = torch.randn(2, 3)
        cap = capture(Net(), backend="eager")
        with torch.no_grad():
            a, b = cap(x), cap(x)
        torch.testing.assert_close(a, Net()(x))
        torch.testing.assert_close(b, Net()(x))
        st = capture_stats(cap)
        print(st["stop_reasons"], st["graphs"], st["hits"])
    """)
    env = dict(os.environ)
    env.setdefault("EAGERC_CACHE_DIR", "/tmp/eagerc-test-long-tail-cache")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "{} 1 1", out.stdout


class _Pair(torch.nn.Module):
    """A Sequential-like container passing (x, extras) along; extras start empty."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)])

    def forward(self, x):
        extras = tuple(e for e in [] if e is not None)
        for layer in self.layers:
            x = layer(x)
        return x, extras, (), ((),), [(), []], {}, (x,), ((x, ()),)


def test_empty_and_nested_tuples_in_the_mock():
    """New tuples of every size in the final state: the mock's source was `n19 = (,)` for
    an empty one (internal error in record: SyntaxError)."""
    module = _Pair()
    captured = capture(module, backend="eager")
    with torch.no_grad():
        for _ in range(3):
            got, want = captured(X), module(X)
            assert got[1:6] == ((), (), ((),), [(), []], {}) and type(got[4][0]) is tuple
            assert_close(got[0], want[0])
            assert_close(got[6][0], want[6][0])
            assert got[7][0][1] == () and len(got[7]) == 1 and len(got[6]) == 1
    _whole(capture_stats(captured), calls=3)


def test_script_module_children_run():
    """TorchScript children (torch.jit.script / trace) inside a call that stops: the call
    runs eagerly with its other children split off; ScriptModules are not split (their
    forward is compiled code: `type(child).forward` raised AttributeError through
    `_CachedForward`)."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.jit.script(torch.nn.Linear(3, 3))
            self.act = torch.jit.trace(torch.nn.GELU(), torch.randn(2, 3))
            self.out = torch.nn.Linear(3, 3)

        def forward(self, x):
            print("", end="")
            return self.out(self.act(self.lin(x)))
    stats = _calls(Net(), [X, X, X])
    assert stats["stop_reasons"] == {"impure call: builtins.print": 1}, stats
    assert stats["split"]["children"] == 1 and stats["split"]["hits"] >= 1, stats


class _Tagger(torch.nn.Module):
    """A sequence tagger: embeddings of token ids, a 2-layer LSTM, a GRU, a linear head."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 16)
        self.lstm = torch.nn.LSTM(16, 32, 2, batch_first=True)
        self.gru = torch.nn.GRU(32, 8, batch_first=True)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        h, _ = self.gru(torch.relu(h))
        return self.head(h)


def test_rnn_training_step_is_not_traced_step_by_step(monkeypatch):
    """A training record of a graph with whole-sequence RNN ops runs as recorded with eager
    autograd (as torch.compile leaves RNN modules to eager): AOTAutograd, which traced the
    LSTM's decomposition and backward time step by step (26-240 s records), is not called.
    Losses and every gradient equal eager's; one record, one training graph."""
    import torch._functorch.aot_autograd as aot
    traced = []
    real = aot.aot_module_simplified
    monkeypatch.setattr(aot, "aot_module_simplified",
                        lambda *a, **k: traced.append(1) or real(*a, **k))
    torch.manual_seed(0)
    model = _Tagger()
    ref = _Tagger()
    ref.load_state_dict(model.state_dict())
    captured = capture(model, backend="eager")
    for seed in range(3):
        ids = torch.randint(0, 20, (4, 7), generator=torch.Generator().manual_seed(seed))
        target = torch.randint(0, 5, (4, 7), generator=torch.Generator().manual_seed(seed))
        for m, f in ((model, captured), (ref, ref)):
            m.zero_grad()
            loss = torch.nn.functional.cross_entropy(f(ids).flatten(0, 1), target.flatten())
            loss.backward()
            if m is model:
                got = loss
        assert_close(got, loss)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            assert_close(p.grad, q.grad, msg=name)
    stats = capture_stats(captured)
    assert stats["graphs"] == 1 and stats["training_graphs"] == 1 and stats["hits"] == 2, stats
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert traced == []


class _LegacyInit(torch.nn.Module):
    """Pre-1.0 idioms still in research code: legacy constructors for buffers and index
    lists, `.type(torch.FloatTensor)` casts."""

    def forward(self, x):
        n, d = x.size()
        noise = torch.FloatTensor(x.size()).zero_()
        bias = torch.Tensor(d).fill_(0.5)
        idx = torch.LongTensor([i for i in range(n)][::-1])
        mask = torch.FloatTensor(n, d).fill_(1.0)
        y = (x + noise + bias)[idx] * mask
        return y.type(torch.FloatTensor) + (x > 0).type(torch.LongTensor)


def test_legacy_constructors_and_type_casts():
    """torch.FloatTensor(sizes), torch.Tensor(n), torch.LongTensor(list), x.type(tensortype)
    are recorded ("cannot put a tensortype into the operator graph" before)."""
    _whole(_calls(_LegacyInit(), [X, X, X]), calls=3)


class _Warmup(torch.nn.Module):
    """Module state that changes per call: a buffer cached on first use, a step counter
    deciding a warm-up branch (GAN and schedule code)."""

    def __init__(self):
        super().__init__()
        self.step = 0
        self.scale = None
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        if self.scale is None:
            self.scale = torch.ones(3) * 0.5
        self.step += 1
        if self.step < 3:  # warm-up
            return self.lin(x) * self.scale
        return self.lin(x)


def test_a_re_record_names_what_changed():
    """Each call's state differs (a cache filled on first use, a counter deciding a
    warm-up branch): a call records again, and each re-record says why: the failing
    check, the value the call has now and the line where the program read it."""
    import copy
    module = _Warmup()
    ref = copy.deepcopy(module)
    captured = capture(module, backend="eager")
    with torch.no_grad():
        for _ in range(4):
            assert_close(captured(X), ref(X))
    stats = capture_stats(captured)
    assert stats["stop_reasons"] == {} and stats["graphs"] == 4, stats
    here = os.path.basename(__file__)
    lines = open(__file__).read().splitlines()
    read_scale = f"{here}:{lines.index('        if self.scale is None:') + 1}"
    read_step = f"{here}:{lines.index('        self.step += 1') + 1}"
    assert stats["guard_failures"] == {
        f"self.scale is not None (now a Tensor; read at {read_scale})": 1,
        f"type(self.step) is not int or self.step != 1 (now 2; read at {read_step})": 1,
        f"type(self.step) is not int or self.step != 2 (now 3; read at {read_step})": 1,
    }, stats


def test_stops_name_the_line():
    """Stops say where the program stopped (`stop_sites`: reason -> file:line -> count)."""
    class Logger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x)
            print(end="")  # a progress print
            return y
    stats = _calls(Logger(), [X, X])
    here = os.path.basename(__file__)
    line = open(__file__).read().splitlines().index('            print(end="")  # a progress print') + 1
    assert stats["stop_sites"] == {"impure call: builtins.print": {f"{here}:{line}": 1}}, stats


class _PairFeatures(torch.nn.Module):
    """Pairwise feature products over index combinations, a thread-safe lazy cache, tagged
    outputs (`out.volatile = False` from pre-0.4 code, `out.info = ...`)."""

    def __init__(self):
        super().__init__()
        import threading
        self._lock = threading.RLock()

    def forward(self, x):
        import itertools
        import threading
        with self._lock, threading.Lock():
            pairs = list(itertools.combinations(range(x.shape[1]), 2))
        skip = list(itertools.dropwhile(lambda i: i < 1, range(3)))
        feats = [x[:, i] * x[:, j] for i, j in pairs]
        out = torch.stack(feats, 1) * len(skip)
        out.volatile = False
        out.info = "pairs"
        return out


def test_itertools_locks_and_tensor_flags_are_captured():
    """itertools.combinations / dropwhile, threading locks made or taken inside the call,
    `Tensor.volatile` writes (no effect in torch) and plain tensor attributes: one graph."""
    import warnings
    module = _PairFeatures()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _whole(_calls(module, [X, X, X]), calls=3)
        out = capture(module, backend="eager")(X)
    assert out.info == "pairs"


def _stops(module, line_text):
    """Calls `module` captured twice (equal to eager); (stop_reasons, the stop's site,
    the line of `line_text` in this file)."""
    stats = _calls(module, [X, X])
    lines = open(__file__).read().splitlines()
    line = f"{os.path.basename(__file__)}:{lines.index(line_text) + 1}"
    (reason, sites), = stats["stop_sites"].items()
    assert stats["stop_reasons"] == {reason: 1} and stats["graphs"] == 0, stats
    return reason, sites, line


def test_file_writes_stop_with_the_line(tmp_path):
    class Dump(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.log = open(tmp_path / "log.txt", "w")

        def forward(self, x):
            self.log.write(f"{x.shape}\n")
            return x + 1
    module = Dump()
    reason, sites, line = _stops(module, '            self.log.write(f"{x.shape}\\n")')
    module.log.close()
    assert reason == "impure call: type.TextIOWrapper.write" and sites == {line: 1}
    assert (tmp_path / "log.txt").read_text().count("torch.Size([2, 3])") == 4


def test_host_random_numbers_are_drawn_by_the_mock():
    """random.random / random.uniform / numpy.random / a numpy Generator's draws feeding
    tensor ops: graph inputs the mock draws again with the same arguments, so each call
    gets new numbers and the streams advance exactly as in eager (one graph, hits). A draw
    Python branches on stops, naming the stream's class and the line."""
    import random

    import numpy as np

    class Jitter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rng = np.random.default_rng(0)

        def forward(self, x):
            scale = float(np.random.uniform(0.5, 1.5))
            np.random.rand()  # a draw whose value is unused still advances the stream
            noise = random.gauss(0.0, 0.1) + x * 0
            return x * scale + noise * random.random() + self.rng.normal(0.0, 1.0)

    class Augment(torch.nn.Module):
        def forward(self, x):
            if random.random() < 0.5:  # flip half of the time
                x = x.flip(0)
            return x

    def run(module, calls=4):
        random.seed(0)
        np.random.seed(0)
        captured = capture(module(), backend="eager")
        with torch.no_grad():
            got = [captured(X) for _ in range(calls)]
        after = random.random(), np.random.rand()
        random.seed(0)
        np.random.seed(0)
        eager = module()
        want = [eager(X) for _ in range(calls)]
        assert (random.random(), np.random.rand()) == after
        for g, w in zip(got, want):
            assert_close(g, w)
        assert not all(torch.equal(got[0], g) for g in got[1:])
        return capture_stats(captured)
    _whole(run(Jitter), calls=4)
    stats = run(Augment)
    lines = open(__file__).read().splitlines()
    line = f"{os.path.basename(__file__)}:" \
        f"{lines.index('            if random.random() < 0.5:  # flip half of the time') + 1}"
    assert stats["stop_sites"] == {
        "host random number used by Python code: Random.Random.random": {line: 1}}, stats


class _NumpyTables(torch.nn.Module):
    """numpy arrays a module holds: a permutation as an index (pytorch-flows' Reverse), a
    table through numpy (`np.tile(self.table, ...)`), a weight through torch.from_numpy and
    torch.tensor."""

    def __init__(self):
        super().__init__()
        import numpy as np
        self.perm = np.array(np.arange(0, 3)[::-1])
        self.table = np.arange(6, dtype=np.float32).reshape(3, 2)
        self.w = np.full((3, 2), 0.5)

    def forward(self, x):
        import numpy as np
        t = np.tile(self.table, (1, 1)).transpose(1, 0)
        y = x[:, self.perm] + torch.from_numpy(np.ascontiguousarray(t))[0]
        return y @ torch.from_numpy(self.w).float() + torch.tensor(self.table[1]).sum()


def test_outside_numpy_arrays_are_guarded_by_value_and_folded():
    """Outside ndarrays are guarded by dtype, shape and contents, and folded into the graph
    as torch converts them: one graph, hits, equal to eager; a changed element makes the
    next call record again (the failure names the array), never a stale constant."""
    module = _NumpyTables()
    stats = _calls(module, [X, X * 2, X + 1])
    _whole(stats, calls=3)
    module.perm[0], module.perm[2] = module.perm[2], module.perm[0]
    module.table[0, 0] = 7.0
    stats = _calls(module, [X, X * 2])
    assert stats["graphs"] == 1 and stats["hits"] == 1, stats
    captured = capture(module, backend="eager")
    assert_close(captured(X), module(X))
    module.w[1, 1] = -1.0
    assert_close(captured(X), module(X))
    assert_close(captured(X), module(X))
    stats = capture_stats(captured)
    assert stats["graphs"] == 2 and stats["hits"] == 1 and stats["stop_reasons"] == {}, stats
    assert stats["guard_failures"] == {
        "array_differs(self.w, its values when recorded)": 1}, stats


def test_large_outside_numpy_array_stops_with_the_line():
    """An outside array larger than guards.ARRAY_VALUE_LIMIT is guarded by type only: numpy
    on it stops, naming the call and the line."""
    import numpy as np

    class Big(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = np.zeros((300, 300), dtype=np.float32)

        def forward(self, x):
            t = np.tile(self.table[:2, :3], (1, 1))
            return x + torch.from_numpy(np.ascontiguousarray(t))
    reason, sites, line = _stops(Big(), "            t = np.tile(self.table[:2, :3], (1, 1))")
    assert reason.startswith("numpy call on an array from outside") and sites == {line: 1}


def test_new_parameter_made_in_forward():
    """`nn.Parameter(t)` made inside forward is an alias of t's value in the graph; one
    stored on the module is made again by the mock on every call, a new Parameter as in
    eager (MUSEAttention's `self.dy_paras = nn.Parameter(self.softmax(self.dy_paras))`).
    The first store adds a parameter, which the next call's guard sees (a second record)."""
    class Scale(torch.nn.Module):
        def forward(self, x):
            w = torch.nn.Parameter(torch.ones(x.shape[1]) * 2)
            return x * w

    class Store(torch.nn.Module):
        def forward(self, x):
            self.w = torch.nn.Parameter(torch.ones(x.shape[1]))
            return x * self.w
    _whole(_calls(Scale(), [X, X]))
    captured = capture(Scale(), backend="eager")  # under grad mode: a leaf, see below
    assert all(captured(X).requires_grad for _ in range(2))
    assert list(capture_stats(captured)["stop_reasons"]) == [
        "new Parameter requiring grad made under grad mode (a leaf of autograd inside the "
        "graph)"]
    stats = _calls(Store(), [X, X, X])
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["graphs"] == 2 and stats["hits"] == 1, stats
    (why,) = stats["guard_failures"]
    assert why.startswith("type(self._parameters) is not dict or len(self._parameters) != 0 "
                          "(now a dict of length 1; read at "), why


class _Reweighted(torch.nn.Module):
    """MUSEAttention's mixing weights: a new Parameter from the old one on every call."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.mix = torch.nn.Parameter(torch.ones(2))

    def forward(self, x):
        self.mix = torch.nn.Parameter(torch.softmax(self.mix * 3, -1))
        return self.mix[0] * self.lin(x) + self.mix[1] * x


def test_parameter_stored_in_forward_is_new_each_call():
    """Each hit stores a new leaf Parameter (requires grad, registered), with eager's value."""
    import copy
    torch.manual_seed(0)
    model = _Reweighted()
    ref = copy.deepcopy(model)
    captured = capture(model, backend="eager")
    made = []
    with torch.no_grad():
        for step in range(4):
            x = X * (step + 1)
            assert_close(captured(x), ref(x))
            p = model.mix
            assert type(p) is torch.nn.Parameter and p.requires_grad and p.is_leaf
            assert model._parameters["mix"] is p and all(p is not q for q in made)
            assert_close(p, ref.mix)
            made.append(p)
    stats = capture_stats(captured)
    assert stats["graphs"] == 1 and stats["hits"] == 3 and stats["stop_reasons"] == {}, stats


def test_parameter_made_under_grad_mode_stops_with_the_line():
    """Under grad mode a new Parameter is a leaf that autograd reaches from the ops using it
    (its .grad is filled by backward), which one graph cannot make: a stop naming the line.
    The calls run eagerly, gradients as eager's."""
    import copy
    torch.manual_seed(0)
    model = _Reweighted()
    ref = copy.deepcopy(model)
    captured = capture(model, backend="eager")
    for step in range(3):
        for m, f in ((model, captured), (ref, ref)):
            f(X * (step + 1)).pow(2).sum().backward()
        assert_close(model.mix.grad, ref.mix.grad)
        assert_close(model.lin.weight.grad, ref.lin.weight.grad)
    stats = capture_stats(captured)
    reason = "new Parameter requiring grad made under grad mode (a leaf of autograd inside " \
             "the graph)"
    lines = open(__file__).read().splitlines()
    line = lines.index("        self.mix = torch.nn.Parameter(torch.softmax(self.mix * 3, -1))")
    assert stats["stop_reasons"] == {reason: 1}, stats
    assert stats["stop_sites"] == {reason: {f"{os.path.basename(__file__)}:{line + 1}": 1}}


class _StateOnFirstUse(torch.nn.Module):
    """State research code changes per call without it reaching the graph: a call counter,
    a flag set on first use, a dict cache of position tables and a list of buffers filled
    on the first call."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.num_calls = 0
        self.initialized = False
        self._pos_cache = {}
        self._bufs = []

    def forward(self, x):
        self.num_calls += 1
        if not self.initialized:
            self.initialized = True
        n = x.shape[1]
        if n not in self._pos_cache:
            self._pos_cache[n] = torch.arange(n, dtype=torch.float32)
        if not self._bufs:
            self._bufs.append(torch.ones(n))
        return self.lin(x) + self._pos_cache[n] * self._bufs[0]


def test_state_set_on_first_use_records_twice_then_hits():
    """The counter is replayed by the mock (guarded by type only); the flag and the
    caches change once: the second call records again, later calls hit."""
    import copy
    module = _StateOnFirstUse()
    ref = copy.deepcopy(module)
    stats = _calls(module, [X] * 5)
    for _ in range(5):
        ref(X)
    assert stats["stop_reasons"] == {} and stats["eager_runs"] == 0, stats
    assert stats["graphs"] == 2 and stats["hits"] == 3, stats
    assert module.num_calls == 10 and module.initialized, module.num_calls
    assert list(module._pos_cache) == [3] and len(module._bufs) == 1
    assert module._pos_cache[3] is not None and ref.num_calls == 5


class _Alternate(torch.nn.Module):
    """A step counter deciding a branch on every call (a GAN's `if step % k == 0`)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.step = 0

    def forward(self, x):
        self.step += 1  # the step counter, first read here
        if self.step % 3 == 0:
            return self.lin(x) * 2
        return self.lin(x)


def test_a_value_that_changes_every_call_stops_re_recording():
    """Each call has another step, and the branch reads it: after MAX_RERECORDS re-records
    caused by it the function runs eagerly (its children still captured), with a stop
    naming the value and the line; results stay eager's."""
    import copy

    from eagerc.capture.captured import MAX_RERECORDS
    module = _Alternate()
    ref = copy.deepcopy(module)
    captured = capture(module, backend="eager")
    calls = MAX_RERECORDS + 6
    with torch.no_grad():
        for _ in range(calls):
            assert_close(captured(X), ref(X))
    assert module.step == ref.step == calls
    stats = capture_stats(captured)
    here = os.path.basename(__file__)
    lines = open(__file__).read().splitlines()
    line = f"{here}:{lines.index('        self.step += 1  # the step counter, first read here') + 1}"
    assert stats["graphs"] == MAX_RERECORDS + 1, stats
    assert stats["eager_runs"] == calls - MAX_RERECORDS - 1, stats
    (reason, sites), = stats["stop_sites"].items()
    assert reason.startswith(f"re-recorded {MAX_RERECORDS} times: self.step changes every "
                             "call (read at "), reason
    assert reason.endswith(f"(read at {line})") and sites == {line: 1}, stats
    assert stats["stop_reasons"] == {reason: 1}, stats
    assert len(stats["guard_failures"]) == MAX_RERECORDS, stats
    assert stats["split"]["children"] == 1, stats


def test_dir_and_tensor_flags():
    """`dir(self)` (registries that look up layers by name) reads the instance dict, whose
    keys the guard then checks; a flag set on a tensor made in forward and one set on the
    input tensor are set again by the mock."""
    class ByName(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer_a = torch.nn.Linear(3, 3)
            self.scale = 2.0

        def forward(self, x):
            names = sorted(n for n in dir(self) if n.startswith("layer_"))
            y = getattr(self, names[0])(x) * self.scale
            y.is_feature = True
            x.seen_by_model = True
            return y
    module = ByName()
    _whole(_calls(module, [X, X, X]), calls=3)
    captured = capture(module, backend="eager")
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3)
            y = captured(x)
            assert x.seen_by_model is True and y.is_feature is True
        module.layer_b = torch.nn.Linear(3, 3)  # the name list may change: recorded again
        assert_close(captured(X), module(X))
    stats = capture_stats(captured)
    assert stats["graphs"] == 2 and stats["hits"] == 1 and stats["stop_reasons"] == {}, stats


class _SpatialShift(torch.nn.Module):
    """S2-MLP's spatial shift (External-Attention-pytorch's S2Attention): slices of a view
    assigned from overlapping slices of the same tensor. Eager's copy reads rows it has
    already written (TensorIterator cannot prove the strided overlap, so it does not
    refuse it); a functional graph reads every row first."""

    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Linear(4, 12)

    def forward(self, x):
        x = self.mlp(x.permute(0, 2, 3, 1))
        v = x[:, :, :, :4]
        b, w, h, c = v.size()
        v[:, 1:, :, :c // 2] = v[:, :w - 1, :, :c // 2]
        v[:, :, :h - 1, c // 2:] = v[:, :, 1:, c // 2:]
        return torch.stack([v, x[:, :, :, 4:8], x[:, :, :, 8:]], 1).sum(1)


def test_a_write_from_an_overlapping_view_runs_as_recorded():
    """A graph writing into memory it reads through another view runs as recorded (eager's
    loop order): training steps' losses and gradients, and inference results, equal
    eager's under both backends (AOTAutograd's functional graph gave other gradients)."""
    import copy
    x = torch.randn(2, 4, 3, 3)
    for backend in ("eager", None):
        torch.manual_seed(0)
        model = _SpatialShift()
        ref = copy.deepcopy(model)
        captured = capture(model, backend=backend)
        for step in range(3):
            for m, f in ((model, captured), (ref, ref)):
                m.zero_grad()
                loss = f(x * (step + 1)).pow(2).mean()
                loss.backward()
                if m is model:
                    got = loss
            assert_close(got, loss)
            for (name, p), q in zip(model.named_parameters(), ref.parameters()):
                assert_close(p.grad, q.grad, msg=name)
        stats = capture_stats(captured)
        assert stats["graphs"] == 1 and stats["training_graphs"] == 1, stats
        assert stats["hits"] == 2 and stats["stop_reasons"] == {}, stats
        with torch.no_grad():
            _whole(_calls(model, [x, x * 2], grad=False))


def test_numpy_array_written_after_from_numpy_stops():
    """torch.from_numpy shares the array's memory: a folded array written during the call
    (after the tensor was made) stops capture instead of serving its stale values."""
    import numpy as np

    def shared(x):
        arr = np.zeros(3, dtype=np.float32)
        t = torch.from_numpy(arr)
        y = (t + x).sin()
        arr[0] = 5.0
        return (t + 1) * y
    x = torch.randn(3)
    captured = capture(shared, backend="eager")
    for _ in range(3):
        assert_close(captured(x), shared(x))
    stats = capture_stats(captured)
    assert stats["stop_reasons"] == {
        "numpy array sharing memory with a tensor written during the call": 1}, stats


@torch.jit.script
def _fused_gate(a, b, n: int):
    t = a + b
    return torch.tanh(t[:, :n]) * torch.sigmoid(t[:, n:])


@torch.jit.script
def _scaled_in_place(a):
    return a.mul_(2.0)


class _ScriptGate(torch.nn.Module):
    """vits' WaveNet block: a torch.jit.script function called from forward."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x):
        return _fused_gate(self.lin(x), self.lin(x * 2), 2)


def test_torchscript_function_is_one_graph_node():
    _torchscript_function_is_one_graph_node()


def test_torchscript_function_under_a_python_call_wrapper():
    """A program that replaced ScriptFunction.__call__ with a Python wrapper calling the
    native one (torch.testing._internal.common_utils' profiling wrapper): the monitor follows
    the wrapper and the native call it makes is still the TorchScript function's node (it
    stopped as "unannotated native call: torch._C.__call__")."""
    cls = torch._C.ScriptFunction
    native = cls.__call__

    def wrapper(*args, **kwargs):
        return native(*args, **kwargs)
    cls.__call__ = wrapper
    try:
        _torchscript_function_is_one_graph_node()
        _whole(_calls(_ScriptedActivation(), [X, X * 2]))
    finally:
        cls.__call__ = native


@torch.jit.script
def _swish_forward(x):
    return x.mul(torch.sigmoid(x))


class _SwishFn(torch.autograd.Function):
    """timm 0.9's SwishJitAutoFn: a TorchScript function inside an autograd Function."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _swish_forward(x)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s * (1 + x * (1 - s)))


class _ScriptedActivation(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return _SwishFn.apply(self.lin(x))


def test_script_module_child_under_a_python_call_wrapper():
    """A ScriptModule child whose ScriptMethod.__call__ a Python wrapper replaced stops as
    when called directly, naming its method (not "torch._C.__call__"); results as eager."""
    class Child(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x) * 2

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.child = torch.jit.script(Child())

        def forward(self, x):
            return self.child(x) + 1
    cls = torch._C.ScriptMethod
    native = cls.__call__

    def wrapper(*args, **kwargs):
        return native(*args, **kwargs)
    direct = _calls(Net(), [X, X])["stop_reasons"]
    cls.__call__ = wrapper
    try:
        wrapped = _calls(Net(), [X, X])["stop_reasons"]
    finally:
        cls.__call__ = native
    assert wrapped == direct and len(direct) == 1, (wrapped, direct)
    (reason,) = direct
    assert reason.startswith("unannotated native call: ") and reason.endswith("Child.forward")


@pytest.mark.slow
def test_torchscript_function_after_the_linalg_tests_imports():
    """In one process, what tests/test_accelerator_linalg.py imports first (OpInfo's op_db:
    common_utils wraps ScriptFunction.__call__ on import), then the TorchScript capture."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, 'tests')\n"
         "from torch.testing._internal.common_methods_invocations import op_db\n"
         "import torch\n"
         "assert type(torch._C.ScriptFunction.__call__).__name__ == 'function'\n"
         "import test_capture_long_tail as t\n"
         "t._torchscript_function_is_one_graph_node()\n"
         "print('OK')"], capture_output=True, text=True, timeout=600,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert "OK" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]


def _torchscript_function_is_one_graph_node():
    """A pure TorchScript function is one node of the graph (its interpreter's ops never
    reach the op recorder): whole-graph, equal to eager, gradients too; one writing into
    its input still stops."""
    import copy
    torch.manual_seed(0)
    model = _ScriptGate()
    _whole(_calls(model, [X, X * 2, X + 1]), calls=3)
    ref = copy.deepcopy(model)
    captured = capture(model, backend="eager")
    for step in range(3):
        for m, f in ((model, captured), (ref, ref)):
            m.zero_grad()
            f(X * step).pow(2).sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert_close(p.grad, q.grad)
    stats = capture_stats(captured)
    assert stats["training_graphs"] == 1 and stats["hits"] == 2, stats

    def writes(x):
        return _scaled_in_place(x * 1) + 1
    stats = _calls(writes, [X, X])
    assert list(stats["stop_reasons"]) == [
        "torch native not seen by the op recorder: torch.jit.torch.jit.ScriptFunction"], stats


def test_numpy_array_arguments_are_not_folded():
    """An ndarray the caller passes (an RL policy's observation) is new every call: guarded
    by type, not folded; torch.from_numpy of it stops once (then the eager record's hits),
    instead of a record per observation."""
    import numpy as np

    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, obs):
            return self.lin(torch.from_numpy(obs).float())
    rng = np.random.default_rng(0)
    stats = _calls(Policy(), [rng.standard_normal(4) for _ in range(5)])
    assert stats["records"] == 1 and stats["graphs"] == 0 and stats["hits"] == 4, stats
    assert stats["stop_reasons"] == {
        "a numpy array not guarded by value (a call's argument, a larger array)": 1}, stats
