"""warm_cache under stress: several processes warming one model at once into one cache,
and a compile worker killed in the middle of a compile. Each kernel ends up stored
correctly, no entry is broken (kernel_cache verify), and the model then runs compiling
nothing, with eager's results."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

import eagerc
from eagerc.testing import assert_close

pytestmark = [pytest.mark.warm, pytest.mark.slow]

MODEL = textwrap.dedent("""
    import torch
    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.GELU(),
                                   torch.nn.LayerNorm(24), torch.nn.Linear(24, 5),
                                   torch.nn.Softmax(dim=-1))
""")

WARM = MODEL + textwrap.dedent("""
    import eagerc
    report = eagerc.warm_cache(model().to("eagerc"), torch.randn(4, 12).to("eagerc"), workers=1)
    assert report.failed == [], str(report)
    print("compiled", report.compiled)
""")

RUN = MODEL + textwrap.dedent("""
    import eagerc
    m = model()
    d = model().to("eagerc")
    x = torch.randn(6, 12)
    with torch.no_grad():
        err = (d(x.to("eagerc")).cpu() - m(x)).abs().max().item()
    print("compiles", eagerc.stats()["compiles"], "err", err)
""")


def _verify(cache) -> str:
    result = subprocess.run([sys.executable, "-m", "kernel_cache", "--dir", str(cache), "verify"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b0 broken evicted, 0 broken left in place", result.stdout), result.stdout
    return result.stdout


def test_processes_warming_one_model_at_once(tmp_path):
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", WARM], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    compiled = [int(out.split()[-1]) for out, _ in outs]
    assert sum(compiled) > 0
    _verify(tmp_path / "cache")
    run = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    _, compiles, _, err = run.stdout.split()
    assert int(compiles) == 0 and float(err) < 1e-5


def _worker_pids(parent: int) -> list:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ppid == parent and b"eagerc.warm.compile_worker" in cmd:
            pids.append(int(entry))
    return pids


def _has_compiler_child(pid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and name in ("g++", "c++", "cc1plus", "gcc"):
            return True
    return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the worker through /proc")
def test_worker_killed_mid_compile_leaves_no_broken_entry(fresh_cache):
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.SiLU(), torch.nn.Linear(20, 3))
    device_model = torch.nn.Sequential(*[torch.nn.Linear(10, 20), torch.nn.SiLU(),
                                         torch.nn.Linear(20, 3)]).to("eagerc")
    device_model.load_state_dict(model.state_dict())
    x = torch.randn(4, 10)
    killed = []

    def kill_first_compile():
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed:
            for pid in _worker_pids(os.getpid()):
                if _has_compiler_child(pid):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_first_compile, daemon=True)
    watcher.start()
    report = eagerc.warm_cache(device_model, x.to("eagerc"), workers=1)
    watcher.join()
    assert killed, "no compile was caught running"
    died = [f for f in report.failed if "worker died" in f[2]]
    assert len(died) == 1, str(report)
    assert len(report.failed) == 1  # a new worker took over the other calls
    _verify(fresh_cache)
    again = eagerc.warm_cache(device_model, x.to("eagerc"), workers=1)
    # The killed call's kernel is compiled now, unless a later call of the same
    # signature already did it: either way every call is served.
    assert again.failed == [], str(again)
    eagerc.reset_stats()
    with torch.no_grad():
        assert_close(device_model(x.to("eagerc")).cpu(), model(x))
    assert eagerc.stats()["compiles"] == 0
