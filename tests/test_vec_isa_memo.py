"""Inductor's per-process CPU ISA probe is remembered across processes when it said yes
(eagerc/codegen/cpp/vec_isa_memo.py), and only then."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from eagerc.codegen.cpp.vec_isa_memo import memoized


class FakeISA:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    def build_arch_flags(self):
        return "-mfake"

    def build_macro(self):
        return ["CPU_CAPABILITY_FAKE"]


def test_a_yes_is_remembered_a_no_is_probed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGERC_PROBE_DIR", str(tmp_path))
    probes = []

    def probe(isa, code):
        probes.append((str(isa), code))
        return str(isa) == "good"

    check = memoized(probe)
    assert check(FakeISA("good"), "int x;") and check(FakeISA("good"), "int x;")
    assert not check(FakeISA("bad"), "int x;") and not check(FakeISA("bad"), "int x;")
    assert probes == [("good", "int x;"), ("bad", "int x;"), ("bad", "int x;")]
    # Another probe source, another ISA or another memo directory asks again.
    assert check(FakeISA("good"), "int y;")
    monkeypatch.setenv("EAGERC_PROBE_DIR", str(tmp_path / "other"))
    assert check(FakeISA("good"), "int x;")
    assert len(probes) == 5


@pytest.mark.slow
def test_second_process_does_not_probe(tmp_path):
    child = (
        "import eagerc.codegen.cpp.vec_isa_memo as m; m.install()\n"
        "from torch._inductor import cpu_vec_isa as c\n"
        "import subprocess\n"
        "calls = []\n"
        "orig = subprocess.run\n"
        "subprocess.run = lambda *a, **k: (calls.append(a), orig(*a, **k))[1]\n"
        "orig_cc = subprocess.check_call\n"  # torch 2.11 probes with check_call
        "subprocess.check_call = lambda *a, **k: (calls.append(a), orig_cc(*a, **k))[1]\n"
        "print(str(c.pick_vec_isa()) + '|' + str(len(calls)))\n")
    # Fresh Inductor cache directories: the memo, not Inductor's cache, answers.
    env = dict(os.environ, EAGERC_PROBE_DIR=str(tmp_path / "memo"))
    runs = [subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                           env=dict(env, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor{i}")),
                           timeout=300) for i in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    (isa1, probes1), (isa2, probes2) = (r.stdout.strip().split('|') for r in runs)
    assert isa1 == isa2
    if isa1:  # a machine with a usable vector ISA: probed by the first process only
        assert int(probes1) > 0 and int(probes2) == 0
