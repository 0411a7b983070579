"""Every storage of an eagerc tensor on host memory comes from the device's allocator,
whichever path made it: a random factory (compiled on CPU aliases: its kernel takes the
CPU generator), a compiled kernel's output, ATen's CPU kernel on aliases (nonzero), and in
background mode a miss's interim CPU kernel. torch.accelerator.memory_allocated counts each
output's block and gives it back when the tensor dies (csrc/home_allocations.h)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc  # noqa: F401
from eagerc import _config

pytestmark = pytest.mark.skipif(_config.device_backing() != "cpu",
                                reason="host-memory statistics")

BLOCK = 64  # the allocator's alignment and its block header


def _block(nbytes: int) -> int:
    return -(-nbytes // BLOCK) * BLOCK + BLOCK


def _allocated() -> int:
    return torch.accelerator.memory_allocated()


@pytest.fixture(autouse=True)
def fresh_stats():
    torch.accelerator.empty_cache()
    yield
    torch.accelerator.empty_cache()


def _counts_its_block(make, nbytes: int) -> None:
    """`make()`'s result is one new storage of `nbytes`: counted, and given back on free."""
    before = _allocated()
    t = make()
    assert t.device.type == "eagerc"
    assert _allocated() - before == _block(nbytes)
    del t
    assert _allocated() == before


@pytest.mark.parametrize("factory", [torch.randn, torch.rand])
def test_random_factories_count_their_output(factory):
    for _ in range(2):  # the first call (a miss) and a hit
        _counts_its_block(lambda: factory(256, 300, device="eagerc"), 256 * 300 * 4)


def test_normal_with_a_size_counts_its_output_and_normal__allocates_nothing():
    _counts_its_block(lambda: torch.normal(0.0, 1.0, size=(128, 77), device="eagerc"), 128 * 77 * 4)
    e = torch.empty(128, 77, device="eagerc")
    before = _allocated()
    e.normal_()
    e.normal_()
    assert _allocated() == before
    assert e.std().item() == pytest.approx(1.0, abs=0.1)


def test_a_compiled_kernels_output_counts():
    x = torch.randn(300, 100, device="eagerc")
    for _ in range(2):
        _counts_its_block(lambda: x * 2 + 1, 300 * 100 * 4)


def test_a_cpu_kernel_on_aliases_counts_its_output():
    torch.manual_seed(0)
    mask = torch.randn(200, 50, device="eagerc") > 0
    found = int(mask.sum().item())
    before = eagerc.stats()["ops"].get("aten::nonzero@PrivateUse1", {}).get("aliased", 0)
    for _ in range(2):
        _counts_its_block(lambda: torch.nonzero(mask), found * 2 * 8)
    assert eagerc.stats()["ops"]["aten::nonzero@PrivateUse1"]["aliased"] == before + 2


@pytest.mark.slow
def test_background_modes_interim_and_aliased_outputs_count(tmp_path):
    # A fresh cache: each op's first call is a miss, served at once by the CPU kernel on
    # aliases (interim) while the compile service compiles it.
    script = textwrap.dedent("""
        import torch, eagerc
        def block(n): return -(-n // 64) * 64 + 64
        got = []
        x = torch.randn(64, 1000, device="eagerc")
        got.append(torch.accelerator.memory_allocated() == block(64 * 1000 * 4))
        for _ in range(2):
            before = torch.accelerator.memory_allocated()
            y = x.sin() + 1
            got.append(torch.accelerator.memory_allocated() - before == block(64 * 1000 * 4))
            del y
            got.append(torch.accelerator.memory_allocated() == before)
        s = eagerc.stats()
        print("interim", s["interim"])
        print("counted", all(got), got)
    """)
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "cache"), EAGERC_COMPILE="background",
               EAGERC_COMPILE_SERVICE_IDLE_S="15")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines() if ln.strip()}
    assert int(lines["interim"][0]) > 0, r.stdout
    assert lines["counted"][0] == "True", r.stdout
