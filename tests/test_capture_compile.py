"""Captured graphs go through eagerc's compile/cache service (eagerc/graph_kernels.py): one
artifact per graph and input metadata in kernel_cache, loaded by later processes without
compiling; symbolic graphs check their shapes in C++."""
import copy
import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.testing import assert_close

from eagerc import _stats
from eagerc.capture import capture, capture_stats

W, B = torch.randn(16, 8), torch.randn(8)


def mlp(x, w, b):
    y = torch.relu(x @ w + b)
    return y.softmax(-1) * 2, y.sum()


def graph_counts():
    s = _stats.snapshot().get("capture-graph", {})
    return s.get("compiles", 0), s.get("disk_loads", 0)


def test_graph_compiled_once_then_loaded_from_disk(fresh_cache):
    cap = capture(mlp)
    with torch.no_grad():
        x = torch.randn(4, 16)
        assert_close(cap(x, W, B), mlp(x, W, B))
        x = torch.randn(4, 16)
        assert_close(cap(x, W, B), mlp(x, W, B))
    assert graph_counts() == (1, 0)
    assert capture_stats(cap)["graphs"] == 1
    assert capture_stats(cap)["graphs_from_disk"] == 0
    # Another capture of the same function in this process: same graph, same key.
    cap2 = capture(mlp)
    with torch.no_grad():
        assert_close(cap2(x, W, B), mlp(x, W, B))
    assert graph_counts() == (1, 1)
    assert capture_stats(cap2)["graphs_from_disk"] == 1


_FRESH = textwrap.dedent("""
    import sys, torch
    from eagerc import _stats
    from eagerc.capture import capture, capture_stats
    sys.path.insert(0, {tests!r})
    from test_capture_compile import mlp, W, B, with_constant
    with torch.no_grad():
        for fn, args in ((mlp, (torch.randn(4, 16), W, B)), (with_constant, (torch.randn(3, 2),))):
            cap = capture(fn)
            out = cap(*args)
            torch.testing.assert_close(out, fn(*args))
            print(capture_stats(cap)["graphs_from_disk"], end=" ")
    print(_stats.snapshot().get("capture-graph"))
""")


def with_constant(x):
    return x * torch.tensor([1.5, -2.0])  # a tensor constant: an extra input of the artifact


@pytest.mark.slow
def test_fresh_process_loads_graphs_without_compiling(fresh_cache):
    with torch.no_grad():
        for fn, args in ((mlp, (torch.randn(4, 16), W, B)), (with_constant, (torch.randn(3, 2),))):
            cap = capture(fn)
            assert_close(cap(*args), fn(*args))
    assert graph_counts() == (2, 0)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))
    out = subprocess.run([sys.executable, "-c", _FRESH.format(tests=os.path.dirname(__file__))],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loads = out.stdout.split()
    assert loads[:2] == ["1", "1"], out.stdout
    assert "'compiles'" not in out.stdout or "'compiles': 0" in out.stdout, out.stdout


def test_broken_graph_artifact_is_rebuilt(fresh_cache, caplog):
    with torch.no_grad():
        x = torch.randn(5, 16)
        capture(mlp)(x, W, B)
        for root, _, files in os.walk(fresh_cache):
            for f in files:
                if f.endswith(".so"):
                    # A new file in its place: this process still maps the old one, and
                    # truncating a loaded library in place would crash it (SIGBUS).
                    path = os.path.join(root, f)
                    with open(path + ".tmp", "wb") as fh:
                        fh.write(b"not a library")
                    os.replace(path + ".tmp", path)
        cap = capture(mlp)
        with caplog.at_level(logging.WARNING):
            assert_close(cap(x, W, B), mlp(x, W, B))
    assert graph_counts() == (2, 0)  # compiled again, never loaded the broken file
    assert capture_stats(cap)["graphs_from_disk"] == 0


def test_symbolic_graph_checks_shapes_in_cpp(fresh_cache):
    cap = capture(mlp, dynamic=True)
    with torch.no_grad():
        for n in (4, 9, 33):
            x = torch.randn(n, 16)
            assert_close(cap(x, W, B), mlp(x, W, B))
        assert (capture_stats(cap)["records"], capture_stats(cap)["hits"]) == (1, 2)
        assert graph_counts() == (1, 0)
        # A size the graph was not compiled for (0/1 are specialized) misses, never runs it.
        x = torch.randn(1, 16)
        assert_close(cap(x, W, B), mlp(x, W, B))
        assert capture_stats(cap)["records"] == 2
        # A broadcast the graph assumed (x's columns == w's rows) is checked as well.
        w2, x2 = torch.randn(12, 8), torch.randn(6, 12)
        assert_close(cap(x2, w2, B), mlp(x2, w2, B))
        assert capture_stats(cap)["records"] == 2  # symbolic in those dims too: a hit
        assert capture_stats(cap)["hits"] == 3


def add_into(x, y):
    x.add_(y)
    return x * 2


def test_input_updated_in_place_by_compiled_graph(fresh_cache):
    cap = capture(add_into)
    with torch.no_grad():
        for _ in range(2):
            x, y = torch.randn(3, 4), torch.randn(3, 4)
            x_ref = x.clone()
            out = cap(x, y)
            ref = add_into(x_ref, y)
            assert_close(out, ref)
            assert_close(x, x_ref)
    assert graph_counts() == (1, 0)


def view_and_sum(x):
    return x.t(), x + 1


def test_output_view_of_input_keeps_aliasing(fresh_cache):
    cap = capture(view_and_sum)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(3, 4)
            v, s = cap(x)
            assert_close(s, x + 1)
            v.mul_(0)  # the view of x written through: x sees it, as in eager
            assert torch.count_nonzero(x) == 0
    # eagerc's compile/cache layer: the kernel returns x + 1, the view of x is made after it
    # (capture/graph_outputs.py)
    assert graph_counts() == (1, 0)


def on_device_program(x, w):
    return torch.relu(x @ w) + torch.ones(w.shape[1], device=x.device), (x * 2).sum(0)


def test_graph_on_the_eagerc_device(fresh_cache):
    import eagerc  # noqa: F401  (registers the eagerc device)

    cap = capture(on_device_program)
    with torch.no_grad():
        for _ in range(2):
            x, w = torch.randn(4, 8), torch.randn(8, 3)
            out = cap(x.to("eagerc"), w.to("eagerc"))
            ref = on_device_program(x, w)
            assert all(o.device.type == "eagerc" for o in out)
            assert_close([o.cpu() for o in out], list(ref))
    assert capture_stats(cap)["hits"] == 1
    assert graph_counts() == (1, 0)  # CPU target, run on zero-copy CPU aliases


def test_graph_nothing_can_compile_runs_as_recorded(fresh_cache, monkeypatch, caplog):
    import torch._inductor.compile_fx as inductor

    from eagerc import graph_kernels
    from eagerc.refusals import CompileError

    def refuse(*a, **k):
        raise CompileError("refused for the test")

    def broken(*a, **k):
        raise RuntimeError("no codegen for this device")

    monkeypatch.setattr(graph_kernels, "load_or_compile", refuse)
    monkeypatch.setattr(inductor, "compile_fx", broken)
    cap = capture(mlp)
    with torch.no_grad(), caplog.at_level(logging.WARNING):
        for _ in range(2):
            x = torch.randn(3, 16)
            assert_close(cap(x, W, B), mlp(x, W, B))
    assert "runs as recorded" in caplog.text
    assert capture_stats(cap)["hits"] == 1


def write_then_read(x, y):
    x.add_(1)  # result unused: the write into x is the point
    return y * 2


def writes_by_keyword(x, y):
    torch.nn.functional.relu(x, inplace=True)
    torch.add(y, 1, out=y)
    return x.sum()


def _fresh_args(fn, aliased):
    if fn is writes_by_keyword:
        return torch.randn(4), torch.zeros(3)
    if aliased:  # y is a view of x: the write into x must show in what y reads
        base = torch.zeros(4)
        return base, base[:2]
    return torch.zeros(4), torch.zeros(2)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn, aliased", [(write_then_read, False), (write_then_read, True),
                                         (writes_by_keyword, False)],
                         ids=["unused-inplace", "aliased-inputs", "out-and-inplace-kw"])
def test_writes_into_inputs_are_replayed(fresh_cache, backend, fn, aliased):
    cap = capture(fn, backend=backend)
    with torch.no_grad():
        for _ in range(3):
            args = _fresh_args(fn, aliased)
            ref_args = tuple(a.clone() for a in args)
            if aliased:
                ref_args = (ref_args[0], ref_args[0][:2])
            assert_close(cap(*args), fn(*ref_args))
            for got, want in zip(args, ref_args):
                assert_close(got, want)
    assert capture_stats(cap)["hits"] == 2


@pytest.mark.slow  # two training captures' graphs compiled: 65 s on a busy 2-core machine
def test_training_graphs_go_through_the_cache_and_load_from_disk(fresh_cache):
    """AOTAutograd's forward saves views of parameters (a transposed weight) and its
    backward returns None for inputs that need no gradient: both graphs still go through
    eagerc's compile/cache layer (outputs rebuilt after the kernel); a second capture of
    the same model loads both from disk, gradients equal eager's. The convolution's saved
    output comes back from the forward kernel in another layout than the trace said (here
    channels-last on this CPU): a backward kernel for that layout is compiled too, and
    cached like the others."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 3))
    x = torch.randn(2, 3, 8, 8)
    ref = copy.deepcopy(model)
    ref(x).pow(2).mean().backward()
    first = None
    for _ in range(2):
        model.zero_grad()
        cap = capture(model)
        for _ in range(2):
            model.zero_grad()
            cap(x).pow(2).mean().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert_close(p.grad, q.grad)
        counts = graph_counts()
        if first is None:  # forward, backward (and the backward for the saved layout)
            first = counts
            assert counts[0] in (2, 3) and counts[1] == 0, counts
        else:  # a new capture of the same model: every graph from disk
            assert counts == (first[0], first[0]), counts
