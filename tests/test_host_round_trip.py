"""The last two rungs for a device with no native kernels (aliases off, EAGERC_ALIAS_FALLBACK=0,
as on a vendor's accelerator): an op that cannot be compiled runs the vendor library's kernel
its code generator lists (Codegen.vendor_externs, counted as ``externs``), else the host round
trip (copied to CPU, ATen's CPU kernel, copied back; counted as ``host_round_trips``, one
warning per op), else, opted out with EAGERC_CPU_FALLBACK=0, raises. docs/vendor.md."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import eagerc  # noqa: F401  (registers the eagerc device)
from eagerc import _C, _config
from eagerc.testing import assert_close

DEV = "eagerc"


@pytest.fixture
def aliases_off():
    """The vendor's view on the eagerc device: no ATen kernel on aliases for what cannot compile."""
    _C._set_alias_fallback(False)
    _C._set_cpu_fallback(True)
    yield
    _C._set_cpu_fallback(_config.cpu_fallback_enabled())
    _C._set_alias_fallback(True)


def _counts(op: str) -> dict:
    entry = eagerc.stats()["ops"].get(f"{op}@PrivateUse1", {})
    return {k: entry.get(k, 0) for k in ("fallbacks", "aliased", "externs", "host_round_trips")}


def _moved(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def _complex():
    return torch.tensor([1 + 2j, 3 - 1j, -2 + 0.5j, 0.25j], dtype=torch.complex64)


def test_complex_results_come_back_from_the_host_round_trip(aliases_off):
    """linalg_eig: no lowering, complex outputs, in no C shim: the host round trip, whose
    complex results the device holds and which equal CPU eager's."""
    x = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
    before = _counts("aten::linalg_eig")
    values, vectors = torch.linalg.eig(x.to(DEV))
    assert values.device.type == DEV and vectors.device.type == DEV
    assert values.dtype == torch.complex64
    want = torch.linalg.eig(x)
    assert_close(values.cpu(), want.eigenvalues)
    assert_close(vectors.cpu(), want.eigenvectors)
    assert _moved(before, _counts("aten::linalg_eig")) == {"fallbacks": 1, "host_round_trips": 1}


def test_a_vendor_extern_runs_without_the_round_trip(aliases_off):
    """_fft_r2c (torch.fft.fft of a real tensor) has a C shim: the vendor library's kernel,
    counted as an extern, on the device's memory; no copy to the host."""
    x = torch.randn(8)
    before = _counts("aten::_fft_r2c")
    got = torch.fft.fft(x.to(DEV))
    assert got.device.type == DEV and got.dtype == torch.complex64
    assert_close(got.cpu(), torch.fft.fft(x))
    assert _moved(before, _counts("aten::_fft_r2c")) == {"fallbacks": 1, "externs": 1}


def test_in_place_and_out_forms_write_the_device_tensors(aliases_off):
    c = _complex()
    d = c.to(DEV)
    before = eagerc.stats()["host_round_trips"]
    assert d.sin_() is d
    assert_close(d.cpu(), c.sin())
    out = torch.empty(0, dtype=torch.complex64, device=DEV)
    assert torch.sin(c.to(DEV), out=out) is out  # resized and written
    assert_close(out.cpu(), c.sin())
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(1))
    values = torch.empty(0, dtype=torch.complex64, device=DEV)
    vectors = torch.empty(0, dtype=torch.complex64, device=DEV)
    result = torch.linalg.eig(x.to(DEV), out=(values, vectors))
    assert result[0] is values and result[1] is vectors
    assert_close(values.cpu(), torch.linalg.eig(x).eigenvalues)
    assert_close(vectors.cpu(), torch.linalg.eig(x).eigenvectors)
    assert eagerc.stats()["host_round_trips"] >= before + 3


def test_data_dependent_ops_take_the_rungs_instead_of_aliases(aliases_off):
    """nonzero (in the C shim) is an extern; _unique2 (in none) goes through the host."""
    x = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    before_nz, before_u = _counts("aten::nonzero"), _counts("aten::_unique2")
    assert torch.equal(torch.nonzero(x.to(DEV) > 0).cpu(), torch.nonzero(x > 0))
    got = torch.unique(x.to(DEV), return_counts=True)
    want = torch.unique(x, return_counts=True)
    assert all(g.device.type == DEV for g in got)
    assert_close(tuple(g.cpu() for g in got), want)
    assert _moved(before_nz, _counts("aten::nonzero")) == {"fallbacks": 1, "externs": 1}
    assert _moved(before_u, _counts("aten::_unique2")) == {"fallbacks": 1, "host_round_trips": 1}


def test_opting_out_raises_naming_the_op_and_the_fix(aliases_off):
    _C._set_cpu_fallback(False)
    with pytest.raises(NotImplementedError) as info:
        torch.linalg.eig(torch.randn(3, 3).to(DEV))
    message = str(info.value)
    assert "aten::linalg_eig" in message and "a complex output" in message
    assert "EAGERC_CPU_FALLBACK=0" in message and "torch.library.impl" in message


def test_the_round_trip_is_the_default_setting(monkeypatch):
    monkeypatch.delenv("EAGERC_CPU_FALLBACK", raising=False)
    assert _config.cpu_fallback_enabled()
    for off in ("0", "false", "no"):
        monkeypatch.setenv("EAGERC_CPU_FALLBACK", off)
        assert not _config.cpu_fallback_enabled()
    monkeypatch.setenv("EAGERC_CPU_FALLBACK", "1")
    assert _config.cpu_fallback_enabled()


def test_code_generators_list_their_vendor_externs_from_the_c_shims():
    from eagerc.codegen import CPP, TRITON

    cuda, cpu = TRITON.vendor_externs(), CPP.vendor_externs()
    # cuFFT and cuSOLVER through c_shim_cuda.h; overloads named as the dispatcher names them.
    assert {"aten::_fft_c2c", "aten::_fft_r2c", "aten::triangular_solve", "aten::cholesky_solve",
            "aten::geqrf", "aten::addmm.out", "aten::scatter_reduce.two_out"} <= cuda
    assert {"aten::_fft_r2c", "aten::nonzero"} <= cpu
    assert "aten::_efficient_attention_forward" in cuda and "aten::_efficient_attention_forward" not in cpu
    assert "aten::linalg_eig" not in cuda  # no shim: the host round trip's
    assert all(op.startswith("aten::") for op in cuda | cpu)


def test_coverage_names_the_rung():
    from eagerc.coverage.classify import WORKING, served_by, served_status

    host = served_status({"fallbacks": 1, "host_round_trips": 1,
                          "fallback_reasons": {"a complex output (torch.complex64)": 1}}, [])
    assert host[0] == "host" and "round trip" in host[1] and "complex output" in host[1]
    extern = served_status({"fallbacks": 1, "externs": 1, "fallback_reasons": {"a complex output": 1}}, [])
    assert extern[0] == "extern" and "vendor library" in extern[1]
    refused = served_status({"fallbacks": 1, "fallback_reasons": {"no lowering": 1}}, [])
    assert refused == ("compile_error", "no lowering")  # opted out: it raised
    assert "host" in WORKING and "compile_error" not in WORKING
    assert served_by("host", "aten::linalg_eig") == "host"
    assert served_by("extern", "aten::_fft_r2c") == "extern"


def test_one_warning_per_op_not_per_call():
    """In a fresh process (the warning is once per op per process)."""
    code = textwrap.dedent("""
        import warnings, torch, eagerc
        eagerc._C._set_alias_fallback(False)
        c = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                r = torch.sin(c.to("eagerc"))
            torch.cos(c.to("eagerc"))
        msgs = [str(w.message) for w in caught if "host round trip" in str(w.message)]
        torch.testing.assert_close(r.cpu(), torch.sin(c))
        assert len(msgs) == 2, msgs
        assert "aten::sin " in msgs[0] and "aten::cos " in msgs[1], msgs
        assert "host_round_trips" in msgs[0] and "EAGERC_CPU_FALLBACK=0" in msgs[0], msgs[0]
        s = eagerc.stats()
        assert s["ops"]["aten::sin@PrivateUse1"]["host_round_trips"] == 3, s["ops"]
        assert s["host_round_trips"] == 4, s
        print("OK")
        """)
    env = dict(os.environ, EAGERC_COMPILE="now")
    env.pop("EAGERC_CPU_FALLBACK", None)  # the default
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.mark.slow
def test_the_vendor_coverage_report_names_each_rung(tmp_path):
    """python -m eagerc.coverage --vendor on real samples: a compiled kernel, a listed extern
    and the host round trip, each named per op, all working, only the first two without the host."""
    import json

    ops = "aten::abs,aten::nonzero,aten::linalg_eig"
    proc = subprocess.run([sys.executable, "-m", "eagerc.coverage", "--device", "eagerc", "--vendor", "--ops", ops,
                           "--opinfo-only", "--samples", "1", "--workers", "1", "--quiet",
                           "--out", str(tmp_path / "cov")], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "cov" / "report.json").read_text())
    got = {op: (e["results"]["float32"]["status"], e["results"]["float32"]["served_by"])
           for op, e in report["ops"].items()}
    assert got == {"aten::abs": ("pass", "compiled"), "aten::nonzero": ("extern", "extern"),
                   "aten::linalg_eig": ("host", "host")}, got
    summary = report["summary"]["float32"]
    assert summary["working"] == 3 and summary["working_without_host"] == 2
    assert "as a vendor sees it: 2/3 work without the host" in proc.stdout
