"""How eagerc has Inductor build a CPU kernel (eagerc/codegen/cpp/generator.py, codegen/cpp/wrapper_build.py): the
wrapper and the kernels as two translation units compiled side by side, then one link;
input size asserts left to eagerc's guard. Behaviour only (flags, order, results), no
seconds: tools/bench_cold.py --compile measures the time."""
from __future__ import annotations

import os
import shutil
import threading

import pytest
import torch

import eagerc
from eagerc.codegen import TRITON
from eagerc.codegen.cpp import generator as cpp
from eagerc.codegen.cpp import toolchain, wrapper_build
from eagerc.codegen.cpp.generator import drop_input_asserts
from eagerc.codegen.cpp.wrapper_build import routed_builds
from eagerc.testing import assert_close


class FakeBuilder:
    def __init__(self, path, log, built=False, fails=False, gate=None, extra=""):
        self.path, self.log, self.fails, self.gate, self.extra = path, log, fails, gate, extra
        path.parent.mkdir(parents=True, exist_ok=True)
        if built:
            path.write_text("old")

    def get_target_file_path(self):
        return str(self.path)

    def get_command_line(self):
        return f"g++ {self.path.name}" + self.extra

    def build(self):
        if self.gate is not None:
            self.gate.wait(timeout=60)  # both compiles run at once, or this times out
        if self.fails and (self.fails is True or self.fails in self.get_command_line()):
            raise RuntimeError(f"cannot build {self.path.name}")
        self.log.append(self.get_command_line())
        self.path.write_text("new")


def _worker():
    from torch._inductor import codecache

    return codecache._worker_compile_cpp


def test_wrapper_and_kernel_compile_together_then_link(tmp_path):
    log, gate = [], threading.Barrier(2)
    builders = [FakeBuilder(tmp_path / "w.o", log, gate=gate),
                FakeBuilder(tmp_path / "k.o", log, gate=gate),
                FakeBuilder(tmp_path / "lib.so", log)]
    original = _worker()
    with routed_builds(cpp.CPP):
        _worker()(str(tmp_path / "lock"), builders)
    assert _worker() is original  # Inductor's own worker is back
    assert sorted(log[:2]) == ["g++ k.o -w", "g++ w.o -w"]
    assert log[2] == wrapper_build._shared_cxx_runtime("g++ lib.so")


def test_links_name_the_processs_own_libstdcxx(tmp_path):
    # A link names the libstdc++ this process runs with, so a toolchain that links it
    # statically leaves no second copy of its locale code in a kernel's library (streaming
    # an integer crashed there). The library still builds, loads and formats integers.
    import ctypes
    import subprocess

    runtime = wrapper_build._process_cxx_runtime()
    if runtime is None or shutil.which("g++") is None:
        pytest.skip("no libstdc++ mapped in this process, or no g++")
    mapped = [l.split()[-1] for l in open("/proc/self/maps") if "libstdc++" in l]
    assert runtime in mapped
    source = tmp_path / "fmt.cpp"
    source.write_text('#include <sstream>\n#include <cstring>\nextern "C" void fmt(int n, char* out) '
                      '{ std::ostringstream s; s << "line " << n; std::strcpy(out, s.str().c_str()); }\n')
    line = wrapper_build._shared_cxx_runtime(f"g++ -x c++ -shared -fPIC {source} -o {tmp_path / 'fmt.so'}")
    assert line.endswith(f"-Wl,{runtime}")
    subprocess.run(line.split(), check=True, capture_output=True, timeout=120)
    out = ctypes.create_string_buffer(32)
    ctypes.CDLL(str(tmp_path / "fmt.so")).fmt(42, out)
    assert out.value == b"line 42"


@pytest.mark.parametrize("compile_only", ["g++ -c w.cpp -o w.o",
                                          "g++ -x c++-header h.h -o h.h.gch -fPIC"])
def test_compile_only_lines_name_no_libstdcxx(compile_only):
    # A precompiled header's line given the library read it as a header (minutes of g++
    # parsing a binary on the GPU machine, then a failed build).
    if wrapper_build._process_cxx_runtime() is None:
        pytest.skip("no libstdc++ mapped in this process")
    assert wrapper_build._shared_cxx_runtime(compile_only) == compile_only


def test_libtorch_cpu_is_linked_through_a_stub_of_its_soname(tmp_path):
    import subprocess

    log = []
    link = FakeBuilder(tmp_path / "lib.so", log, extra=" -ltorch -ltorch_cpu -lgomp")
    wrapper_build.link_through_stub(link, cpp.CPP)
    line = log[0].split()
    stub = line[line.index("-Wl,--push-state,--no-as-needed") + 1]
    assert line[line.index(stub) + 1] == "-Wl,--pop-state" and "-ltorch_cpu" not in line
    assert stub.endswith("/libtorch_cpu.so") and "-ltorch" in line and "-lgomp" in line
    if shutil.which("readelf"):
        dynamic = subprocess.run(["readelf", "-d", stub], capture_output=True, text=True).stdout
        assert "Library soname: [libtorch_cpu.so]" in dynamic

    # A linker that refuses it: the link as Inductor wrote it.
    log.clear()
    refused = FakeBuilder(tmp_path / "lib2.so", log, extra=" -ltorch_cpu", fails="push-state")
    wrapper_build.link_through_stub(refused, cpp.CPP)
    assert log == ["g++ lib2.so -ltorch_cpu"]

    # Which libraries go through stubs is the code generator's: a GPU wrapper's torch_cuda too.
    log.clear()
    wrapper_build.link_through_stub(FakeBuilder(tmp_path / "lib3.so", log, extra=" -ltorch_cuda"), cpp.CPP)
    assert "-ltorch_cuda" in log[0].split()
    log.clear()
    wrapper_build.link_through_stub(FakeBuilder(tmp_path / "lib4.so", log, extra=" -ltorch_cuda"), TRITON)
    assert "-ltorch_cuda" not in log[0].split() and "/libtorch_cuda.so" in log[0]


def test_link_stubs_live_in_inductors_cache_not_in_a_temporary_folder(tmp_path, monkeypatch):
    # A process that ends without atexit (a compile worker) left a folder per process
    # behind when stubs were made in a temporary folder of their own.
    import tempfile

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    monkeypatch.setattr(wrapper_build, "_stub_paths", {})
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    log = []
    wrapper_build.link_through_stub(FakeBuilder(tmp_path / "lib.so", log, extra=" -ltorch_cpu"), cpp.CPP)
    line = log[0].split()
    stub = line[line.index("-Wl,--push-state,--no-as-needed") + 1]
    assert stub.startswith(os.path.join(cache_dir(), "eagerc-link-stubs") + os.sep)
    assert os.path.isfile(stub) and not list((tmp_path / "tmp").iterdir())
    # The next process finds it made: the same path, no second build.
    monkeypatch.setattr(wrapper_build, "_stub_paths", {})
    made = os.stat(stub).st_mtime_ns
    log.clear()
    wrapper_build.link_through_stub(FakeBuilder(tmp_path / "lib2.so", log, extra=" -ltorch_cpu"), cpp.CPP)
    assert stub in log[0].split() and os.stat(stub).st_mtime_ns == made


def test_built_outputs_are_kept_and_errors_raise(tmp_path):
    log = []
    builders = [FakeBuilder(tmp_path / "w.o", log, built=True),
                FakeBuilder(tmp_path / "k.o", log),
                FakeBuilder(tmp_path / "lib.so", log)]
    with routed_builds(cpp.CPP):
        _worker()(str(tmp_path / "lock"), builders)
    assert (tmp_path / "w.o").read_text() == "old" and len(log) == 2

    failing = [FakeBuilder(tmp_path / "a" / "w.o", log),
               FakeBuilder(tmp_path / "a" / "k.o", log, fails=True),
               FakeBuilder(tmp_path / "a" / "lib.so", log)]
    with routed_builds(cpp.CPP), pytest.raises(RuntimeError, match="k.o"):
        _worker()(str(tmp_path / "lock2"), failing)
    assert not (tmp_path / "a" / "lib.so").exists()


def test_other_builds_go_to_inductor(tmp_path, monkeypatch):
    from torch._inductor import codecache

    seen = []
    monkeypatch.setattr(codecache, "_worker_compile_cpp",
                        lambda lock, builders: seen.append(len(builders)))
    with routed_builds(cpp.CPP):
        codecache._worker_compile_cpp(str(tmp_path / "lock"),
                                      [FakeBuilder(tmp_path / "one.so", [])])
    assert seen == [1]


def test_only_input_asserts_are_dropped():
    code = ("void f() {\n"
            '    assert_size_stride(arg0_1, {s0, s1}, {s1, 1L}, "input");\n'
            "    assert_size_stride(arg1_1, {s0}, {1L});\n"
            '    assert_size_stride(buf2, {s0, s1}, {s1, 1L}, "aten.sort.default");\n'
            "}\n")
    out = drop_input_asserts(code, {"arg0_1", "arg1_1"})
    assert "arg0_1" not in out and "arg1_1" not in out
    assert 'assert_size_stride(buf2, {s0, s1}, {s1, 1L}, "aten.sort.default");' in out


def test_the_build_recipe_is_in_the_cache_namespace():
    from eagerc import kernel_key, targets

    assert toolchain.cxx_compiler() == cpp.CPP.compiler_settings()["cxx"]
    key = kernel_key.CacheKey("op", targets.for_device("cpu"), "aten::abs", b"")
    assert {"codegen.cxx", "codegen.build_recipe"} <= set(key.namespace_components())


def test_a_real_kernel_keeps_its_optimization_level(fresh_cache, tmp_path, monkeypatch):
    from torch._inductor import codecache, cpp_builder

    # An empty Inductor cache and in-process table: this compile really runs g++ (g++ for
    # both units: where clang is installed it builds them from the same command lines,
    # tests/test_clang_units.py).
    from eagerc.codegen.cpp import clang_units

    monkeypatch.setattr(clang_units, "_compiler", "")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(codecache.CppWrapperCodeCache, "cache", {})
    commands = []
    build = cpp_builder.CppBuilder.build

    def recording_build(self):
        commands.append(self.get_command_line().split())
        return build(self)

    monkeypatch.setattr(cpp_builder.CppBuilder, "build", recording_build)
    x = torch.randn(7, 9)
    with eagerc.enabled("cpu", ops=["aten::sigmoid"]):
        y = torch.sigmoid(x)
    assert_close(y, torch.sigmoid(x))
    compiles = [c for c in commands if "-c" in c and "-E" not in c and "-x" not in c]
    # (Inductor's CPU ISA probes, run again for a new cache directory, link sources.)
    links = [c for c in commands if "-shared" in c and any(f.endswith(".o") for f in c)]
    assert len(compiles) == 2 and len(links) == 1
    assert sorted(next(f for f in c if f in ("-O1", "-O3")) for c in compiles) == ["-O1", "-O3"]
    assert all("-w" in c for c in compiles)
    kernel = next(c for c in compiles if "-O3" in c)
    assert any(f.startswith("-march") for f in kernel)  # the kernel keeps Inductor's flags
    assert "-Wl,--push-state,--no-as-needed" in links[0]  # libtorch_cpu through the stub


def test_the_guard_still_checks_input_strides(fresh_cache):
    # The wrapper no longer asserts input sizes and strides itself: the guard must send
    # other layouts elsewhere (another variant or a miss), never into this kernel.
    base = torch.randn(12, 10)
    with eagerc.enabled("cpu", ops=["aten::exp"]):
        for x in (base, base.t(), base[:, ::2], base[3:], base[:, 1:].t()):
            assert_close(torch.exp(x), x.clone().exp_())


def test_a_kernel_from_disk_imports_no_compiler(fresh_cache):
    # A process whose kernels are all on disk loads them without Inductor or sympy (each
    # costs about half a second to a second to import). The kernel is compiled here (this
    # process has Inductor imported already), then a new process loads it.
    import os
    import subprocess
    import sys

    env = {**os.environ, "EAGERC_CACHE_DIR": str(fresh_cache)}
    code = ("import sys, torch, eagerc\n"
            "with eagerc.enabled('cpu', ops=['aten::abs']):\n"
            "    torch.abs(torch.randn(8, 8))\n"
            "s = eagerc.stats()\n"
            "print(s['compiles'], s['disk_loads'], 'sympy' in sys.modules, 'torch._inductor' in sys.modules)\n")
    with eagerc.enabled("cpu", ops=["aten::abs"]):
        torch.abs(torch.randn(8, 8))
    s = eagerc.stats()
    assert (s["compiles"], s["disk_loads"]) == (1, 0), s
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["0", "1", "False", "False"]
