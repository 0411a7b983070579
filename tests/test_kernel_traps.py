"""Calls a compiled kernel cannot survive never reach it.

Inductor's C++ integer truncating division is a plain `a / b`: a zero divisor killed the
process with SIGFPE once a kernel existed for the signature (in that process, or any later
one loading it from disk). Its floor division and modulo raise "ZeroDivisionError" with
the generated header's path. The holder sends an integer division whose divisor holds a
zero to eager's kernel (csrc/kernel_holder.cpp), which raises eager's
`RuntimeError: ZeroDivisionError`. Each case runs in a subprocess (a trap kills only it):
the zero divisor before a kernel exists, a valid call (compiles), the zero again (a hit
would run the kernel), then the same with the kernel loaded from disk: in the default run
by the same process once it forgot its tables and open stores (one interpreter start, not
two), in the slow sweep of every form by a second process.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from subprocess_passes import RUN_PASSES

_SCRIPT = textwrap.dedent("""
    import json, sys, torch, eagerc
    mode, names, dtypes = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    passes = int(sys.argv[4])
    device = "cpu" if mode == "override" else "eagerc"
    CALLS = {
        "div trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        "div floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
        "floor_divide": torch.floor_divide,
        "//": lambda a, b: a // b,
        "remainder": torch.remainder,
        "%": lambda a, b: a % b,
        "fmod": torch.fmod,
        "div_ trunc": lambda a, b: a.clone().div_(b, rounding_mode="trunc"),
        "remainder out=": lambda a, b: torch.remainder(a, b, out=torch.empty_like(a)),
        "fmod strided divisor": lambda a, b: torch.fmod(a, b.repeat(2)[::2]),
        "number % tensor": lambda a, b: torch.remainder(7, b),
        "// by 0 (wrapped number)": lambda a, b: a // (b[0] * 0).item(),
    }
    def outcome(fn, a, b):
        try:
            return ["ok", fn(a, b).cpu().tolist()]
        except Exception as e:
            return [type(e).__name__, str(e)]
    def run_all():
        results = {}
        for name in names:
            for dt in dtypes:
                dtype = getattr(torch, dt)
                a = torch.tensor([7, -7, 3, 9], dtype=dtype)
                b = torch.tensor([2, 3, 1, 4], dtype=dtype)
                z = torch.tensor([2, 0, 1, 4], dtype=dtype)
                fn = CALLS[name]
                want = [outcome(fn, a, z), outcome(fn, a, b)]  # CPU eager (override mode not yet served)
                if mode == "override":
                    eagerc.enable("cpu")
                on = lambda t: t.to(device)
                got = [outcome(fn, on(a), on(z)), outcome(fn, on(a), on(b)), outcome(fn, on(a), on(z)),
                       outcome(fn, on(a), on(b))]
                if mode == "override":
                    eagerc.disable()
                results[f"{name} {dt}"] = {"want": want, "got": got}
        return results
""") + RUN_PASSES


def _run(tmp_path, mode, names, dtypes, passes=1):
    """The script's runs: [{"results", "compiles", "disk_loads"}] per pass."""
    env_cache = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, mode, ",".join(names), ",".join(dtypes),
                           str(passes)],
                          capture_output=True, text=True, timeout=900,
                          env={**__import__("os").environ, "EAGERC_CACHE_DIR": env_cache})
    assert proc.returncode == 0, f"process died ({proc.returncode}):\n{proc.stderr[-3000:]}"
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _assert_like_eager(results):
    for case, r in results.items():
        zero_want, ok_want = r["want"]
        for i, got in enumerate(r["got"]):
            want = zero_want if i % 2 == 0 else ok_want
            assert got == want, f"{case}, call {i}: {got} != eager's {want}"
            assert ".cpp" not in str(got) and ".h:" not in str(got), case


def _check(tmp_path, mode, names, dtypes, second_process=False):
    """The calls with new kernels, then with the same kernels loaded from disk (by a second
    process, or by the first once it forgot its tables)."""
    if second_process:
        runs = _run(tmp_path, mode, names, dtypes) + _run(tmp_path, mode, names, dtypes)
    else:
        runs = _run(tmp_path, mode, names, dtypes, passes=2)
    first, second = runs
    assert first["compiles"] > 0, first
    assert second["compiles"] == 0 and second["disk_loads"] > 0, second
    _assert_like_eager(first["results"])
    _assert_like_eager(second["results"])


@pytest.mark.parametrize("mode", ["override", "device"])
def test_integer_division_by_zero_survives(tmp_path, mode):
    _check(tmp_path, mode, ["div trunc", "remainder"], ["int64"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["override", "device"])
def test_integer_division_by_zero_every_form(tmp_path, mode):
    names = ["div trunc", "div floor", "floor_divide", "//", "remainder", "%", "fmod",
             "div_ trunc", "remainder out=", "fmod strided divisor", "number % tensor",
             "// by 0 (wrapped number)"]
    _check(tmp_path, mode, names, ["int64", "int32", "int16", "int8", "uint8"], second_process=True)
