"""Background compilation, the default (eagerc/per_op/background.py, eagerc/compile_service/):
a miss is answered at once by a kernel that exists (the device's own in override mode;
ATen's CPU kernel on aliases on the eagerc device) while the compile service compiles its
kernel in processes of its own. The caller's process compiles nothing and never waits;
results are right at every moment; a finished kernel is loaded at the signature's next
call; a short script's misses reach the cache for the next process; a job the service
cannot finish is compiled in the caller's process."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import eagerc
from eagerc import _C
from eagerc.cache import service
from eagerc.per_op import background
from eagerc.testing import assert_close


@pytest.fixture
def compiles_here(monkeypatch):
    """Every compile run in this process (the compiler's entry point, counted)."""
    from eagerc.compile import op as op_compiler

    calls = []
    real = op_compiler.compile_op

    def counted(miss):
        calls.append(str(miss.op))
        return real(miss)

    monkeypatch.setattr(op_compiler, "compile_op", counted)
    return calls


@pytest.fixture(scope="module")
def file_cache(tmp_path_factory):
    """One kernel cache for the tests that use a compile service as it comes, so one service
    serves them (the service's folder follows the environment: starting one costs a
    process that imports the compiler, and its worker)."""
    return tmp_path_factory.mktemp("background-compile")


@pytest.fixture
def service_env(file_cache, monkeypatch):
    # The file's service; it goes away soon after the file's last test that uses it.
    monkeypatch.setenv("EAGERC_CACHE_DIR", str(file_cache))
    monkeypatch.setenv("EAGERC_COMPILE_SERVICE_IDLE_S", "15")
    monkeypatch.setenv("EAGERC_COMPILE", "background")
    service().reset()
    _C._clear_tables()
    eagerc.reset_stats()
    yield file_cache
    eagerc.wait_compiles(timeout=900)  # no job of this test's is left for the next one
    service().reset()
    _C._clear_tables()


@pytest.fixture
def own_service_env(fresh_cache, monkeypatch):
    # A service folder of the test's own (one it holds busy, or finds no service for).
    monkeypatch.setenv("EAGERC_COMPILE_SERVICE_IDLE_S", "15")
    monkeypatch.setenv("EAGERC_COMPILE", "background")
    return fresh_cache


def _enable_background_cpu():
    eagerc.enable("cpu", ops=["aten::_softmax", "aten::add.Tensor", "aten::mul.Tensor"],
                  compile="background")


@pytest.fixture
def background_cpu(service_env):
    _enable_background_cpu()
    yield
    eagerc.disable("cpu")
    background.set_mode("cpu", None)


@pytest.fixture
def background_cpu_own(own_service_env):
    _enable_background_cpu()
    yield
    eagerc.disable("cpu")
    background.set_mode("cpu", None)


def test_override_mode_answers_at_once_and_loads_the_service_kernel(background_cpu, compiles_here):
    # Results are compared after eagerc.disable: comparing runs served ops too.
    x, y = torch.randn(40, 50), torch.randn(40, 50)
    first = torch.softmax(x, -1)                       # served by the CPU's own kernel
    again = torch.softmax(x, -1)                       # its job still out: interim again
    sums = {alpha: torch.add(x, y, alpha=alpha) for alpha in (2.0, 3.5, -1.5)}
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["interim"] >= 1 and s["fallbacks"] == 0 and s["compiles"] == 0, s
    assert eagerc.wait_compiles(timeout=600)
    second = torch.softmax(x, -1)                      # the service's kernel, from the store
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["background_compiles"] == 1 and s["disk_loads"] == 1 and s["compiles"] == 0, s
    small = torch.randn(7, 50)
    before = _C._resolver_calls()
    third = torch.softmax(small, -1)                   # another size: a hit, no Python
    assert _C._resolver_calls() == before
    # Scalars are runtime inputs: one kernel serves every alpha.
    more = torch.add(x, y, alpha=7.0)
    s = eagerc.stats()["ops"]["aten::add.Tensor@CPU"]
    assert s["background_compiles"] == 1 and s["interim"] == 3, s
    assert compiles_here == []                         # the caller compiled nothing
    eagerc.disable("cpu")
    for got in (first, again, second):
        assert_close(got, torch.softmax(x, -1))
    assert_close(third, torch.softmax(small, -1))
    for alpha, got in {**sums, 7.0: more}.items():
        assert_close(got, torch.add(x, y, alpha=alpha))


def test_a_job_the_service_cannot_finish_compiles_here(background_cpu, compiles_here):
    # Another Inductor setting in this process than in the service's: the service's kernel
    # would sit under another namespace, so it says so, and the next miss compiles here.
    import torch._inductor.config as inductor_config

    x = torch.randn(30, 30)
    with inductor_config.patch(max_autotune_pointwise=not inductor_config.max_autotune_pointwise):
        first = torch.mul(x, x)
        assert eagerc.stats()["ops"]["aten::mul.Tensor@CPU"]["interim"] == 1
        assert eagerc.wait_compiles(timeout=600)
        second = torch.mul(x, x)
    s = eagerc.stats()["ops"]["aten::mul.Tensor@CPU"]
    assert s["compiles"] == 1 and s["background_compiles"] == 0, s
    assert compiles_here == ["aten.mul.Tensor"]
    eagerc.disable("cpu")
    for got in (first, second):
        assert_close(got, x * x)


def _eagerc_device() -> bool:
    return torch._C._get_privateuse1_backend_name() == "eagerc"


@pytest.mark.skipif(not _eagerc_device(), reason="the eagerc device is not registered")
def test_eagerc_device_first_run_is_right_and_compiles_nothing_here(service_env, compiles_here):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.GELU(), torch.nn.LayerNorm(24),
                              torch.nn.Linear(24, 5), torch.nn.Softmax(-1))
    x = torch.randn(6, 12)
    want = net(x)
    device_net = net.to("eagerc")
    with torch.no_grad():
        first = device_net(x.to("eagerc")).cpu()
    assert_close(first, want.detach())
    s = eagerc.stats()
    assert s["interim"] > 0 and s["compiles"] == 0, s
    assert eagerc.wait_compiles(timeout=900)
    # Kernels that call ATen (mm, addmm) run on aliases, whose own signatures a second
    # run meets first (queued then); from the third run on, everything is loaded.
    with torch.no_grad():
        second = device_net(x.to("eagerc")).cpu()
        assert eagerc.wait_compiles(timeout=900)
        device_net(x.to("eagerc"))
        settled = eagerc.stats()
        third = device_net(x.to("eagerc")).cpu()
    for got in (second, third):
        assert_close(got, want.detach())
    s = eagerc.stats()
    assert s["background_compiles"] > 0 and s["interim"] == settled["interim"], s
    assert compiles_here == [] and s["compiles"] == 0, s


def test_without_a_service_misses_compile_here(background_cpu_own, compiles_here, monkeypatch):
    from eagerc.compile_service import client

    monkeypatch.setattr(client.Client, "_start", lambda self, folder: False)
    x = torch.randn(20, 10)
    got = torch.softmax(x, 0)
    s = eagerc.stats()["ops"]["aten::_softmax@CPU"]
    assert s["interim"] == 0 and s["compiles"] == 1, s
    eagerc.disable("cpu")
    assert_close(got, torch.softmax(x, 0))



@pytest.fixture
def busy_service(own_service_env, monkeypatch):
    """The folder of a compile service that takes no job: its lock is held here, so the
    service counts as alive and every job stays queued (a busy service, without compiles
    on this machine's cores)."""
    import fcntl

    from eagerc.compile_service import spool
    from eagerc.compile_service.client import folder_for

    # Pinned: Inductor sets it when first asked, which would name another service's folder.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR",
                       os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(own_service_env.parent / "inductor"))
    folder = folder_for(os.environ)
    spool.make_folders(folder)
    lock = os.open(os.path.join(folder, spool.LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    yield folder
    os.close(lock)


def test_a_pending_signatures_calls_are_one_look_up_until_its_job_finishes(
        busy_service, background_cpu_own, compiles_here, monkeypatch):
    from eagerc.compile_service import client, spool
    from eagerc.per_op import resolver

    counts = {"named": 0, "submitted": 0, "misses built": 0, "listings": 0}

    def counted(what, real):
        def call(*args, **kwargs):
            counts[what] += 1
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(background, "job_for", counted("named", background.job_for))
    monkeypatch.setattr(client.Client, "submit", counted("submitted", client.Client.submit))
    monkeypatch.setattr(resolver, "_start", counted("misses built", resolver._start))
    monkeypatch.setattr(spool, "finished_ids", counted("listings", spool.finished_ids))
    x, y = torch.randn(30, 20), torch.randn(30, 20)
    expected = torch.from_numpy(x.numpy() + y.numpy())  # not through the served op
    earlier = dict(background.jobs()._queued)  # jobs of this worker's earlier tests
    start = time.monotonic()
    results = [torch.add(x, y) for _ in range(300)]
    seconds = time.monotonic() - start
    s = eagerc.stats()["ops"]["aten::add.Tensor@CPU"]
    assert s["interim"] == 300 and s["compiles"] == 0, s
    # The first call's miss named, described and queued the job; the other 299 looked it
    # up by their request and found it waiting, nothing built, keyed or queued again.
    assert counts["named"] == counts["submitted"] == counts["misses built"] == 1, counts
    # The service's finished jobs: listed at most every POLL_S, not per call.
    assert counts["listings"] <= 2 + seconds / client.POLL_S, (counts, seconds)
    (job_folder, job_id, _), = [v for k, v in background.jobs()._queued.items() if earlier.get(k) != v]
    assert client.client().flush(10)  # the job's file is written by the client's thread
    assert job_folder == busy_service and os.path.exists(spool.job_path(busy_service, spool.QUEUED, job_id))

    # The job ends (the service could not compile it): a call soon after learns it and
    # compiles the signature here; the calls after it are hits.
    spool.finish(busy_service, job_id, False, "the replay did not reach the signature")
    deadline = time.monotonic() + 10 * client.POLL_S + 5
    while not compiles_here and time.monotonic() < deadline:
        results.append(torch.add(x, y))
        time.sleep(client.POLL_S / 4)
    assert compiles_here == ["aten.add.Tensor"]
    resolved = _C._resolver_calls()
    results.append(torch.add(x, y))
    assert _C._resolver_calls() == resolved
    eagerc.disable("cpu")
    for got in results:
        assert_close(got, expected)


def test_a_pending_signature_compiles_now_where_the_mode_says_so(
        busy_service, background_cpu_own, compiles_here):
    x = torch.randn(12, 7, dtype=torch.float64)
    expected = torch.from_numpy(x.numpy() * x.numpy())
    first = torch.mul(x, x)
    assert eagerc.stats()["ops"]["aten::mul.Tensor@CPU"]["interim"] == 1
    with background.compiling_now("cpu"):  # its job still queued
        second = torch.mul(x, x)
    assert compiles_here == ["aten.mul.Tensor"]
    eagerc.disable("cpu")
    for got in (first, second):
        assert_close(got, expected)


@pytest.mark.slow
@pytest.mark.skipif(not _eagerc_device(), reason="the eagerc device is not registered")
def test_a_device_with_no_home_answers_by_the_host_round_trip(tmp_path):
    # Aliases off: the eagerc device as a vendor's device without a home sees it.
    script = textwrap.dedent("""
        import torch, eagerc
        x = torch.randn(8, 33)
        d = x.to("eagerc")
        first = [torch.softmax(d, 1).cpu(), (d * 3 + 1).cpu()]
        s = eagerc.stats()
        print("first", s["interim"], s["host_round_trips"], s["fallbacks"], s["compiles"])
        assert eagerc.wait_compiles(timeout=900)
        again = [torch.softmax(d, 1).cpu(), (d * 3 + 1).cpu()]
        s = eagerc.stats()
        print("again", s["background_compiles"], s["compiles"])
        want = [torch.softmax(x, 1), x * 3 + 1]
        print(all(torch.allclose(a, b, atol=1e-6) for a, b in zip(first + again, want + want)))
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"), EAGERC_COMPILE="background",
               EAGERC_ALIAS_FALLBACK="0", EAGERC_COMPILE_SERVICE_IDLE_S="15")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines() if ln.strip()}
    interim, round_trips, fallbacks, compiles = map(int, lines["first"])
    assert interim == 3 and round_trips == 0 and fallbacks == 0 and compiles == 0, r.stdout
    background_compiles, compiles = map(int, lines["again"])
    assert background_compiles == 3 and compiles == 0, r.stdout
    assert lines["True"] == [], r.stdout


def _service_idle(cache: str, timeout: float) -> bool:
    """Whether the service folders under `cache` have nothing queued or running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = glob.glob(os.path.join(cache, "compile-service", "*", "queued", "*.job")) + \
            glob.glob(os.path.join(cache, "compile-service", "*", "running", "*.job"))
        if not busy:
            return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
def test_a_short_scripts_misses_reach_the_cache_for_the_next_run(tmp_path):
    # The script exits right after its calls; the service compiles on, and the next
    # process (compiling now) finds every kernel stored.
    script = textwrap.dedent("""
        import sys, torch, eagerc
        x = torch.randn(64, 64)
        eagerc.enable("cpu", ops=["aten::exp", "aten::tanh", "aten::sigmoid", "aten::sum.dim_IntList"])
        outs = [torch.exp(x), torch.tanh(x), torch.sigmoid(x), x.sum(0)]
        s = eagerc.stats()
        print(s["interim"], s["compiles"])
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"), EAGERC_COMPILE="background",
               EAGERC_COMPILE_SERVICE_IDLE_S="15")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-2:] == ["4", "0"], r.stdout     # all interim, none compiled there
    assert _service_idle(str(tmp_path / "cache"), 900)
    again = textwrap.dedent("""
        import torch, eagerc
        x = torch.randn(64, 64)
        with eagerc.enabled("cpu"):
            got = [torch.exp(x), torch.tanh(x), torch.sigmoid(x), x.sum(0)]
        want = [torch.exp(x), torch.tanh(x), torch.sigmoid(x), x.sum(0)]
        s = eagerc.stats()
        print(all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want)), s["compiles"], s["disk_loads"])
    """)
    r = subprocess.run([sys.executable, "-c", again], env=dict(env, EAGERC_COMPILE="now"),
                       capture_output=True, text=True, timeout=600)
    logs = "".join(open(p).read() for p in glob.glob(str(tmp_path / "cache" / "compile-service" / "*" /
                                                          "service.log")))
    assert r.returncode == 0 and r.stdout.split()[-3:] == ["True", "0", "4"], (r.stdout, logs,
                                                                               r.stderr[-3000:])


def test_mode_from_the_environment(monkeypatch):
    monkeypatch.delenv("EAGERC_COMPILE", raising=False)
    assert background.is_background("some-device")          # the default
    monkeypatch.setenv("EAGERC_COMPILE", "now")
    assert not background.is_background("some-device")
    monkeypatch.setenv("EAGERC_COMPILE", "later")
    with pytest.raises(ValueError, match="EAGERC_COMPILE='later'"):
        background.is_background("some-device")
    with pytest.raises(ValueError, match="compile='soon'"):
        eagerc.enable("cpu", ops=["aten::abs"], compile="soon")
