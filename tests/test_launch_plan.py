"""Launch plans (eagerc/codegen/triton/launch_plan.py) read from real GPU wrappers, and the plan
launcher (eagerc/codegen/triton/plan_launcher/) that runs them, exercised without a GPU: the launcher is linked
with a stand-in for the CUDA driver (tests/data/plan_launcher/fake_cuda.c) that records every
launch, and its guard is compared with the C++ guard it replaces."""
import ctypes
import hashlib
import os
import random
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import sympy
import torch

from eagerc.codegen.cpp import glue_prelude
from eagerc.codegen.triton import launch_plan, plan_build
from eagerc.codegen.triton.cexpr import Compiler, Unsupported
from eagerc.compile.guard_source import guard_source
from torch.utils._sympy.functions import FloorDiv, Max, Min, Mod, PythonMod, ToFloat

DATA = Path(__file__).parent / "data"
WRAPPERS = DATA / "gpu_wrappers"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _wrapper(name: str) -> str:
    return (WRAPPERS / f"{name}.cpp").read_text()


@pytest.mark.parametrize("name", ["add_alpha", "cumsum", "embedding", "layer_norm", "sum_dim", "where"])
def test_every_triton_only_wrapper_has_a_plan(name):
    plan = launch_plan.plan_of(_wrapper(name))
    assert plan.startswith("eagerc-launch-plan 1\n")
    assert sum(line.startswith("launch ") for line in plan.splitlines()) == 1
    assert sum(line.startswith("check ") for line in plan.splitlines()) >= 5


@pytest.mark.parametrize("name", ["mm", "addmm"])
def test_cublas_externs_are_plan_steps_and_other_externs_are_not(name):
    plan = launch_plan.plan_of(_wrapper(name))
    assert f"extern aoti_torch_cuda_{name}_out " in plan and "launch " not in plan
    other = _wrapper(name).replace(f"aoti_torch_cuda_{name}_out(", "aoti_torch_cuda__scaled_mm_out(")
    with pytest.raises(Unsupported, match="aoti_torch_cuda__scaled_mm_out"):
        launch_plan.plan_of(other)


def test_the_launchers_externs_are_declared_as_torch_declares_them():
    from eagerc.codegen.triton import lean_gpu_prelude

    header = lean_gpu_prelude._extern_declarations()  # this torch's c_shim_cuda.h
    if not header:
        pytest.skip("this torch has no c_shim_cuda.h")
    ours = dict(re.findall(r"AOTITorchError (aoti_torch_cuda_\w+)\(([^;]*)\);",
                           (Path(plan_build.LAUNCHER_DIR) / "abi.h").read_text()))
    assert set(ours) == set(launch_plan.EXTERNS)

    def types(params: str) -> list:
        return [" ".join(p.split()[:-1]) for p in params.replace("\n", " ").split(",")]

    for name, kinds in launch_plan.EXTERNS.items():
        theirs = re.search(r"\((.*)\)", header[name]).group(1)
        assert types(ours[name]) == types(theirs), name
        c_types = {"h": ["AtenTensorHandle"], "d": ["double"], "i": ["int64_t"], "b": ["int32_t"],
                   "o": ["AtenTensorHandle*"], "a": ["const int64_t*", "int64_t"], "r": ["AtenTensorHandle*"]}
        assert types(theirs) == [t for kind in kinds for t in c_types[kind]], name


def test_a_zero_dim_buffer_is_planned(tmp_path, launcher):
    """Inductor declares a 0-dim buffer's sizes and strides as a null array (GPT-2 has one)."""
    code = _wrapper("sum_dim")
    code = code.replace("    const int64_t int_array_0[] = {s50, };\n    static constexpr int64_t int_array_1[] = {1L, };\n",
                        "    static constexpr int64_t *int_array_0=nullptr;\n")
    code = code.replace("eagerc_empty_strided(1, int_array_0, int_array_1,", "eagerc_empty_strided(0, int_array_0, int_array_0,")
    plan = launch_plan.plan_of(code)
    assert "alloc 1 float32 cuda 0 0\n" in plan
    lib = _link(tmp_path, launcher, _on_cpu(plan), [_cubin(tmp_path)])
    (out,) = _run(lib, [torch.randn(1, 7)], 1, 7, borrowed=True)
    assert out.shape == () and out.dtype == torch.float32


def test_a_statement_the_plan_does_not_know_means_no_plan():
    code = _wrapper("add_alpha").replace("    arg1_1.reset();\n", "    arg1_1.reset();\n    launch_missiles();\n")
    with pytest.raises(Unsupported, match="launch_missiles"):
        launch_plan.plan_of(code)
    code = _wrapper("add_alpha").replace("uint32_t grid_1 = 1;", "uint32_t grid_1 = frobnicate(1);")
    with pytest.raises(Unsupported, match="frobnicate"):
        launch_plan.plan_of(code)


def test_a_float_scalar_read_from_a_named_input_is_planned():
    # As torch 2.11 reads a lifted float (add's alpha=0.5; seen on the H100).
    code = _wrapper("add_alpha").replace(
        "    int64_t arg2_1;\n    AOTI_TORCH_ERROR_CODE_CHECK(eagerc_item_int64(inputs[2], &arg2_1));\n    int64_t s70 = arg2_1;\n",
        "    auto arg2_1 = std::move(inputs[2]);\n    double zuf0_raw;\n"
        "    AOTI_TORCH_ERROR_CODE_CHECK(eagerc_item_float64(arg2_1, &zuf0_raw));\n    auto zuf0 = zuf0_raw;\n"
        "    double s70 = zuf0;\n")
    code = code.replace("    int64_t ks0,\n", "    double ks0,\n").replace("int64_t var_2 = ks0;", "double var_2 = ks0;")
    lines = launch_plan.plan_of(code).splitlines()
    assert "item_d 0 2" in lines and "setd 1 f:0" in lines and "setd 2 f:1" in lines
    assert any(line.startswith("launch ") and " f64:f:2 " in line for line in lines)


def test_a_plan_beyond_the_launchers_tables_is_not_made(monkeypatch):
    # add_alpha's plan has 4 slots; a launcher taking 3 could not load it (it is compiled).
    monkeypatch.setitem(launch_plan.LIMITS, "slots", 3)
    with pytest.raises(Unsupported, match="4 slots"):
        launch_plan.plan_of(_wrapper("add_alpha"))
    monkeypatch.setitem(launch_plan.LIMITS, "slots", 64)
    monkeypatch.setitem(launch_plan.LIMITS, "stack", 2)  # its grid needs a stack of 3
    with pytest.raises(Unsupported, match="stack"):
        launch_plan.plan_of(_wrapper("add_alpha"))


def test_the_limits_are_the_launchers():
    source = (Path(plan_build.LAUNCHER_DIR) / "plan.h").read_text()
    for name, cpp in (("slots", "kMaxSlots"), ("ints", "kMaxInts"), ("doubles", "kMaxDoubles"),
                      ("stack", "kMaxStack"), ("arguments", "kMaxArgs"), ("rank", "kMaxRank")):
        assert f"{cpp} = {launch_plan.LIMITS[name]}" in source, name


def test_add_alphas_plan_says_what_its_wrapper_does():
    lines = launch_plan.plan_of(_wrapper("add_alpha")).splitlines()
    assert "kernel 0 0 0 triton_poi_fused_0" in lines
    assert "item_i 0 2" in lines  # alpha, a lifted int scalar
    assert "alloc 3 float32 cuda 0 2 r:2 r:3 r:3 ci:1" in lines  # [s50, s60], contiguous
    assert "launch 0 4 0 r:4,ci:256,ci:1,-i,+i,ci:256,/i ci:1 ci:1 6 p:1 p:3 i64:r:1 i32:r:4 null null" in lines
    assert lines.index("reset 1") < lines.index("out 0 3")


# --- expressions: C++'s types and conversions -------------------------------------------

def test_expressions_keep_cpps_types():
    c = Compiler({"a": ("r:0", "i"), "x": ("f:0", "d")})
    assert c.compile("a * 2 + 1") == "r:0,ci:2,*i,ci:1,+i"
    assert c.compile("a / 2.0") == "r:0,i2d,cd:0x1.0000000000000p+1,/d"
    assert c.compile("(a < x) && !a") == "r:0,i2d,f:0,<d,r:0,!,&&"
    assert c.compile("x", "i") == "f:0,d2i"
    # As Inductor printed a size in ResNet-50's max pool (seen on the H100).
    assert (c.compile("c10::div_floor_integer(static_cast<int64_t>(1L + a), static_cast<int64_t>(2L))")
            == c.compile("eagerc_floordiv(int64_t(1 + a), int64_t(2))") == "ci:1,r:0,+i,ci:2,fd")
    with pytest.raises(Unsupported):
        c.compile("x % 2")  # not C++
    with pytest.raises(Unsupported):
        c.compile("a ? 1 : 2")


# --- the launcher, linked with a stand-in for CUDA ----------------------------------------

@pytest.fixture(scope="module")
def launcher():
    """The plan launcher built as a GPU build builds it, but linked with the stand-in CUDA.
    Both are built once per machine, as the launcher itself is (glue_prelude.built_once):
    the stand-in's object is named by its source's hash, so the launcher's key (its link
    words name the object) is the same in every run."""
    source = DATA / "plan_launcher" / "fake_cuda.c"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:24]
    fake = glue_prelude.built_once(f"eagerc_test_fake_cuda_{digest}.o", lambda partial: subprocess.run(
        ["gcc", "-c", "-fPIC", "-x", "c", str(source), "-o", partial], check=True, capture_output=True))
    assert fake is not None
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    path = plan_build.launcher_library(["g++", "-std=c++17", "-fPIC", "-I", sysconfig.get_paths()["include"]],
                                       [fake, f"-L{torch_lib}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{torch_lib}"])
    assert path is not None
    return Path(path).read_bytes()


def _link(tmp_path: Path, launcher: bytes, plan: str, cubins=()) -> ctypes.CDLL:
    """An artifact as plan_build.try_build writes it: the launcher, then the plan."""
    library = tmp_path / f"x{len(list(tmp_path.glob('*.so')))}.so"
    library.write_bytes(launcher + plan_build.payload(plan, list(cubins)))
    return ctypes.CDLL(str(library))


def _run(lib, inputs, num_outputs: int, args_per_launch: int, borrowed: bool = False, entry=None):
    """The entry on `inputs`: eagerc_entry steals the handles; eagerc_entry_borrowed (what
    csrc/artifact.cpp calls), or `entry` in its place, only reads them, and they are
    released here afterwards."""
    ctypes.c_int.in_dll(lib, "fake_args_per_launch").value = args_per_launch
    # AtenTensorHandles (new at::Tensor objects) travel through Python as capsules.
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype, api.PyCapsule_GetPointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_New.restype, api.PyCapsule_New.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    handles = [api.PyCapsule_GetPointer(c, None) for c in torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors(inputs)]
    ins = (ctypes.c_void_p * len(handles))(*handles)
    outs = (ctypes.c_void_p * num_outputs)()
    if borrowed:
        (entry or lib.eagerc_entry_borrowed)(ins, outs)
        assert list(ins) == handles  # read, not taken
        kept = torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs([api.PyCapsule_New(h, None, None) for h in ins])
        assert all(k.data_ptr() == t.data_ptr() for k, t in zip(kept, inputs))  # still the caller's tensors
    else:
        lib.eagerc_entry(ins, outs)
        assert all(h is None for h in ins)  # stolen, as the generated wrapper does
    return torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs([api.PyCapsule_New(h, None, None) for h in outs])


class _Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("args", ctypes.c_int64 * 16)]


def _cubin(tmp_path: Path) -> str:
    path = tmp_path / "k.cubin"
    path.write_bytes(b"FAKE-CUBIN-BYTES")
    return str(path)


def _on_cpu(plan: str) -> str:
    """The plan allocating host memory (this machine has no GPU; the steps are the same)."""
    return "\n".join(line.replace(" cuda ", " cpu ") if line.startswith("alloc ") else line
                     for line in plan.splitlines()) + "\n"


def test_the_launcher_runs_add_alphas_plan(tmp_path, launcher):
    lib = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper("add_alpha"))), [_cubin(tmp_path)])
    x, other = torch.randn(37, 91), torch.randn(37, 91)
    (out,) = _run(lib, [x, other, torch.tensor(3)], 1, 6)
    assert out.shape == (37, 91) and out.stride() == (91, 1) and out.dtype == torch.float32
    assert ctypes.c_int.in_dll(lib, "fake_launch_count").value == 1
    if not torch.cuda.is_available():  # a CUDA torch's own guard shim preempts the stand-in's
        assert ctypes.c_int.in_dll(lib, "fake_guard_device").value == 0
    assert ctypes.c_int.in_dll(lib, "fake_context_queries").value == 1  # made current before a launch
    assert ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_loaded_image")), 16) == b"FAKE-CUBIN-BYTES"
    assert ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_function_name"))) == b"triton_poi_fused_0"
    launch = _Launch.in_dll(lib, "fake_launches")
    assert list(launch.grid) == [(37 * 91 + 255) // 256, 1, 1] and list(launch.block) == [128, 1, 1]
    assert launch.shared == 0 and launch.stream == 0x5EED
    assert launch.args[0] == other.data_ptr() and launch.args[1] == out.data_ptr()
    assert launch.args[2] == 3 and launch.args[3] == 37 * 91 and launch.args[4] == launch.args[5] == 0


@pytest.mark.parametrize("name, inputs, outputs, args", [("add_alpha", 3, 1, 6), ("layer_norm", 1, 3, 8),
                                                        ("addmm", 3, 1, 0)])
def test_the_borrowing_entry_gives_the_stealing_entrys_outputs(tmp_path, launcher, name, inputs, outputs, args):
    """eagerc_entry_borrowed (inputs read, never deleted) against eagerc_entry (inputs
    stolen) on the same plan: the same launches, the same output shapes and strides."""
    cubins = [] if name == "addmm" else [_cubin(tmp_path)]
    lib = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper(name))), cubins)
    values = [torch.randn(5, 64) if name == "layer_norm" else torch.randn(7, 7) for _ in range(inputs)]
    if name == "add_alpha":
        values[-1] = torch.tensor(3)
    results = {}
    for borrowed in (False, True):
        ctypes.c_int.in_dll(lib, "fake_launch_count").value = 0
        outs = _run(lib, values, outputs, args, borrowed=borrowed)
        launch = _Launch.in_dll(lib, "fake_launches")
        results[borrowed] = ([(o.shape, o.stride()) for o in outs], ctypes.c_int.in_dll(lib, "fake_launch_count").value,
                             list(launch.grid), [launch.args[i] for i in range(args) if i < 16 and
                                                 launch.args[i] not in {o.data_ptr() for o in outs}])
    assert results[True] == results[False]


def test_with_one_gpu_visible_no_device_guard_is_made(tmp_path, launcher):
    lib = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper("add_alpha"))), [_cubin(tmp_path)])
    ctypes.c_int.in_dll(lib, "fake_device_count").value = 1  # read at this library's first device step
    ctypes.c_int.in_dll(lib, "fake_guard_device").value = -1
    (out,) = _run(lib, [torch.randn(4, 4), torch.randn(4, 4), torch.tensor(2)], 1, 6, borrowed=True)
    assert out.shape == (4, 4)
    assert ctypes.c_int.in_dll(lib, "fake_guard_device").value == -1
    assert ctypes.c_int.in_dll(lib, "fake_launch_count").value >= 1


def test_the_launcher_makes_views_and_returns_every_output(tmp_path, launcher):
    lib = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper("layer_norm"))), [_cubin(tmp_path)])
    x = torch.randn(5, 64)
    out, mean, rstd = _run(lib, [x], 3, 8)
    assert out.shape == (5, 64) and mean.shape == (5, 1) and rstd.shape == (5, 1)
    assert rstd.stride() == (1, 1)  # the view of a [5, 1] buffer with strides (1, 5)
    launch = _Launch.in_dll(lib, "fake_launches")
    assert launch.args[0] == rstd.data_ptr() and launch.args[1] == x.data_ptr()
    assert launch.args[2] == mean.data_ptr() and launch.args[3] == out.data_ptr()
    assert launch.args[4] == 5 and launch.args[5] == 64
    assert list(launch.grid) == [1, 1, 1] and list(launch.block) == [64, 1, 1] and launch.shared == 32
    assert ctypes.c_int.in_dll(lib, "fake_shared_attribute").value == 32


def test_the_launcher_calls_cublas_externs(tmp_path, launcher):
    lib = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper("addmm"))))
    a = torch.randn(7, 7)
    (out,) = _run(lib, [torch.randn(7, 7), torch.randn(7, 7), a], 1, 0)
    assert out.shape == (7, 7) and out.stride() == (7, 1)
    assert ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_extern"))) == b"addmm_out"
    assert list((ctypes.c_double * 2).in_dll(lib, "fake_extern_scalars")) == [1.0, 1.0]
    handles = list((ctypes.c_void_p * 4).in_dll(lib, "fake_extern_handles"))
    assert all(handles) and handles[1] == handles[2] == handles[3] != handles[0]  # addmm(a, a, a) into a buffer
    assert ctypes.c_int.in_dll(lib, "fake_launch_count").value == 0
    assert ctypes.c_int.in_dll(lib, "fake_context_queries").value == 0  # no launch needs a context


def test_a_grid_of_zero_launches_nothing(tmp_path, launcher):
    lib = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper("sum_dim"))), [_cubin(tmp_path)])
    (out,) = _run(lib, [torch.randn(0, 7)], 1, 7)
    assert out.shape == (0,)
    assert ctypes.c_int.in_dll(lib, "fake_launch_count").value == 0


def test_a_guard_compares_with_constants_first():
    """A variant that does not apply fails at its first terms (the holder tries an op's
    variants in turn); the other terms keep their order (a division stays after the range
    check before it)."""
    s0, s1 = sympy.symbols("s0 s1", integer=True)
    checks = [sympy.Ge(s1, 2), sympy.Eq(FloorDiv(s0, s1), 2), (4, sympy.Integer(64)), sympy.Eq(s0, 7), (3, s0 * s1)]
    source = guard_source({"s0": ("i", 0), "s1": ("i", 1)}, checks)
    terms = [line.strip() for line in source.splitlines() if line.strip().startswith("if (!")]
    assert terms == ["if (!(I[4] == int64_t(64LL))) return 0;", "if (!(s0 == int64_t(7LL))) return 0;",
                     "if (!(s1 >= int64_t(2LL))) return 0;",
                     "if (!(eagerc_floordiv(s0, s1) == int64_t(2LL))) return 0;",
                     "if (!(I[3] == (s0 * s1))) return 0;"]


def test_a_plans_guard_keeps_the_values_that_last_passed_and_only_those(tmp_path, launcher):
    """The launcher remembers the last arrays that passed (per thread): the same values
    pass again without evaluating, and any other value is evaluated anew, so a call that
    fails is never answered by the memory of one that passed."""
    plan = "eagerc-launch-plan 1\ninputs 0\nslots 0\nints 0\ndoubles 0\n" \
           "check I:0,ci:64,==i\ncheck I:1,I:0,>i\ncheck F:0,cd:0.5,<d\ncheck ci:3,I:2,==i\n"
    lib = _link(tmp_path, launcher, plan)

    def guard(i0, i1, f0, i2=3):
        return lib.eagerc_guard((ctypes.c_int64 * 3)(i0, i1, i2), (ctypes.c_double * 1)(f0))

    assert [guard(64, 65, 0.25), guard(64, 65, 0.25)] == [1, 1]
    assert guard(64, 63, 0.25) == 0  # another size: evaluated, fails
    assert guard(64, 65, 0.75) == 0  # another scalar
    assert guard(63, 65, 0.25) == 0
    assert [guard(64, 65, 0.25), guard(64, 100, 0.0)] == [1, 1]
    assert guard(64, 64, 0.0) == 0
    assert [guard(64, 100, 0.0, 4), guard(64, 100, 0.0)] == [0, 1]  # a constant term, written either way round


def test_the_plans_guard_answers_as_the_cpp_guard(tmp_path, launcher):
    """Differential: guards.py's C++ for terms of every kind, compiled by g++, against the
    launcher's evaluation of the same text, on random sizes (negative, zero, large)."""
    s0, s1, s2 = sympy.symbols("s0 s1 s2", integer=True)
    f0 = sympy.Symbol("f0")
    checks = [(3, s0 * s1), sympy.Eq(FloorDiv(s0, s1), 2), sympy.Ne(PythonMod(s0, s2), 1),
              sympy.Lt(Mod(s0 + 7, s1), 3), sympy.Le(Max(s0, s1), 9), sympy.Ge(Min(s0, s2) - s1, -4),
              sympy.Gt(ToFloat(s0) / 3, f0), sympy.Or(sympy.Eq(s0, 1), sympy.Gt(s1, s2)),
              sympy.Not(sympy.Eq(s2 * 2, s0 + 1)), sympy.Le(s0 * s1, 2147483647)]
    bindings = {"s0": ("i", 0), "s1": ("i", 1), "s2": ("i", 2), "f0": ("f", 0)}
    source = guard_source(bindings, checks)
    (tmp_path / "guard.cpp").write_text(source)
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", str(tmp_path / "guard.cpp"), "-o", str(tmp_path / "guard.so")],
                   check=True, capture_output=True)
    compiled = ctypes.CDLL(str(tmp_path / "guard.so"))
    code = "\n" + source  # the plan reads the guard as it appears in a wrapper
    plan = "eagerc-launch-plan 1\ninputs 0\nslots 0\nints 0\ndoubles 0\n" + "".join(
        f"check {c}\n" for c in launch_plan._guard_checks(launch_plan._GUARD_BODY.search(code).group("body")))
    planned = _link(tmp_path, launcher, plan)
    rng = random.Random(0)
    answers = set()
    for _ in range(3000):
        ints = [rng.choice([rng.randint(-9, 9), rng.randint(1, 4), rng.randint(-2 ** 40, 2 ** 40)]) for _ in range(4)]
        floats = [rng.uniform(-5, 5)]
        ints[1] = ints[1] or 5  # the divisors: C++'s guard divides by them (a size >= 2 in use)
        ints[2] = ints[2] or -3
        if rng.random() < 0.5:  # often on the equality checks' path
            ints[3] = ints[0] * ints[1]
        I, F = (ctypes.c_int64 * 4)(*ints), (ctypes.c_double * 1)(*floats)
        want = compiled.eagerc_guard(I, F)
        assert planned.eagerc_guard(I, F) == want, (ints, floats)
        answers.add(want)
    assert answers == {0, 1}


@pytest.mark.parametrize("name, calls", [("where", []), ("mm", ["aoti_torch_cuda_mm_out"])])
def test_an_artifact_built_from_a_plan_is_the_launcher_and_its_plan(tmp_path, name, calls):
    """plan_build.try_build on a real wrapper: the library a GPU build would load. The
    coverage report's externs are its plan's, not every extern the launcher can call."""
    from eagerc.coverage import classify

    code = _wrapper(name).replace("CUBIN_PATH_0", _cubin(tmp_path))
    code += "\nPyMODINIT_FUNC PyInit_inductor_entry_cpp(void) { return nullptr; }\n"
    source = tmp_path / "w.cpp"
    source.write_text(code)
    target = tmp_path / "w.so"

    class Builder:
        def get_target_file_path(self):
            return str(target)

    command = (f"g++ -std=c++17 -fPIC -I {sysconfig.get_paths()['include']} {source} -shared -o {target} "
               f"-L{os.path.join(os.path.dirname(torch.__file__), 'lib')} -lc10")
    before = plan_build.counts["plan"]
    assert plan_build.try_build(Builder(), command)
    assert plan_build.counts["plan"] == before + 1
    data = target.read_bytes()
    assert plan_build.is_plan_artifact(data) and plan_build.appended_plan(data) == launch_plan.plan_of(code)
    assert b"aoti_torch_cuda_bmm_out" in data  # the launcher's own table of externs
    assert classify.externs([target]) == calls
    if name == "where":
        assert b"FAKE-CUBIN-BYTES" in data and b"triton_poi_fused_0" in data
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(target)], capture_output=True, text=True).stdout
    for name in ("eagerc_entry", "eagerc_entry_borrowed", "eagerc_guard", "eagerc_set_allocator",
                 "eagerc_load_error", "PyInit_inductor_entry_cpp"):
        assert f" T {name}\n" in symbols
    headers = subprocess.run(["readelf", "-lW", str(target)], capture_output=True, text=True).stdout
    assert "GNU_STACK" in headers and "RWE" not in headers.split("GNU_STACK")[1].splitlines()[0]


def test_each_artifact_runs_its_own_plan_and_a_broken_one_says_so(tmp_path, launcher):
    lib_load_error = lambda lib: ctypes.CFUNCTYPE(ctypes.c_char_p)(("eagerc_load_error", lib))()  # noqa: E731
    a = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper("sum_dim"))), [_cubin(tmp_path)])
    b = _link(tmp_path, launcher, _on_cpu(launch_plan.plan_of(_wrapper("layer_norm"))), [_cubin(tmp_path)])
    assert lib_load_error(a) is None and lib_load_error(b) is None
    (total,) = _run(a, [torch.randn(6, 64)], 1, 7)
    out, mean, rstd = _run(b, [torch.randn(6, 64)], 3, 8)
    assert total.shape == (6,) and out.shape == (6, 64)
    assert bytes(ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(a, "fake_function_name")))) == b"triton_red_fused_0"
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(launcher + plan_build.payload("eagerc-launch-plan 1\n", [])[:-3])
    assert b"no plan appended" in lib_load_error(ctypes.CDLL(str(truncated)))
    garbled = tmp_path / "garbled.so"
    garbled.write_bytes(launcher + plan_build.payload("eagerc-launch-plan 1\nlaunch 0 zz\n", []))
    assert b"unreadable launch plan" in lib_load_error(ctypes.CDLL(str(garbled)))


def test_floor_division_is_c10s(tmp_path, launcher):
    """The plan's floor division against c10::div_floor_integer itself (Inductor prints it
    in sizes and grids), on random signs and magnitudes."""
    (tmp_path / "c10.cpp").write_text('#include <c10/util/generic_math.h>\n'
                                      'extern "C" int64_t floor_div(int64_t a, int64_t b) { return c10::div_floor_integer(a, b); }\n')
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-I", include, str(tmp_path / "c10.cpp"),
                    "-o", str(tmp_path / "c10.so")], check=True, capture_output=True)
    c10 = ctypes.CDLL(str(tmp_path / "c10.so"))
    c10.floor_div.restype, c10.floor_div.argtypes = ctypes.c_int64, [ctypes.c_int64, ctypes.c_int64]
    compiled = Compiler({}, {"I": lambda i: (f"I:{i}", "i")}).compile("c10::div_floor_integer(I[0], I[1]) == I[2]")
    plan = _link(tmp_path, launcher, f"eagerc-launch-plan 1\ninputs 0\nslots 0\nints 0\ndoubles 0\ncheck {compiled}\n")
    rng = random.Random(1)
    for _ in range(2000):
        a = rng.choice([rng.randint(-50, 50), rng.randint(-2 ** 50, 2 ** 50)])
        b = rng.choice([rng.randint(1, 9), -rng.randint(1, 9), rng.randint(1, 2 ** 20)])
        ints = (ctypes.c_int64 * 3)(a, b, c10.floor_div(a, b))
        assert plan.eagerc_guard(ints, None) == 1, (a, b)
        ints[2] += 1
        assert plan.eagerc_guard(ints, None) == 0


def test_one_library_runs_another_artifacts_plan(tmp_path, launcher):
    """eagerc_open_plan: an artifact's plan run by another artifact's copy of the launcher
    (what csrc/artifact.cpp does unless EAGERC_GPU_SHARED_LAUNCHER=0) launches the same
    kernel with the same arguments, and guards as the artifact's own library does, each
    opened plan with a memory of its own."""
    plan = _on_cpu(launch_plan.plan_of(_wrapper("add_alpha")))
    own = _link(tmp_path, launcher, plan, [_cubin(tmp_path)])
    other_path = tmp_path / "other.so"
    other_path.write_bytes(launcher + plan_build.payload(plan, [_cubin(tmp_path)]))
    host = _link(tmp_path, launcher, "eagerc-launch-plan 1\ninputs 0\nslots 0\nints 0\ndoubles 0\n")
    host.eagerc_open_plan.restype = ctypes.c_void_p
    error = ctypes.c_char_p()
    opened = host.eagerc_open_plan(str(other_path).encode(), ctypes.byref(error))
    assert opened and error.value is None
    x, other = torch.randn(37, 91), torch.randn(37, 91)
    (expected,) = _run(own, [x, other, torch.tensor(3)], 1, 6, borrowed=True)
    (got,) = _run(host, [x, other, torch.tensor(3)], 1, 6, borrowed=True,
                  entry=lambda ins, outs: host.eagerc_plan_entry_borrowed(ctypes.c_void_p(opened), ins, outs))
    assert got.shape == expected.shape and got.stride() == expected.stride()
    assert ctypes.c_int.in_dll(host, "fake_launch_count").value == 1
    launch, own_launch = _Launch.in_dll(host, "fake_launches"), _Launch.in_dll(own, "fake_launches")
    assert list(launch.grid) == list(own_launch.grid) and list(launch.block) == list(own_launch.block)
    assert launch.args[0] == other.data_ptr() and launch.args[1] == got.data_ptr() and launch.args[2] == 3
    assert ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(host, "fake_function_name"))) == b"triton_poi_fused_0"
    # The guard, through the opened plan and through the artifact's own library.
    for sizes in ([37, 91, 91, 1, 0], [37, 91, 92, 1, 0], [1, 1, 1, 1, 1], [5, 7, 7, 1, 0]):
        ints, floats = (ctypes.c_int64 * 128)(*sizes), (ctypes.c_double * 128)()
        assert host.eagerc_plan_guard(ctypes.c_void_p(opened), ints, floats) == own.eagerc_guard(ints, floats)
    # A file without a plan: an error, no plan.
    broken = tmp_path / "broken.so"
    broken.write_bytes(launcher)
    assert not host.eagerc_open_plan(str(broken).encode(), ctypes.byref(error))
    assert b"launch plan not found" in error.value


def test_with_shared_launchers_the_loader_runs_later_plans_in_the_first_library(tmp_path, launcher):
    """By default the first plan artifact loaded is dlopened, and later artifacts built from
    the same launcher library open their plans in it (no library of their own;
    EAGERC_GPU_SHARED_LAUNCHER=0 loads each as its own); an artifact of another launcher,
    or without a plan, is loaded as before, and a broken plan fails to load (the cache then
    rebuilds it)."""
    import sys

    plan = _on_cpu(launch_plan.plan_of(_wrapper("add_alpha")))
    paths = []
    for name, image in (("a", launcher), ("b", launcher), ("c", launcher + b"\0" * 64)):
        paths.append(tmp_path / f"{name}.so")
        paths[-1].write_bytes(image + plan_build.payload(plan, [_cubin(tmp_path)]))
    broken = tmp_path / "broken.so"
    broken.write_bytes(launcher + plan_build.payload("eagerc-launch-plan 1\nnot a step\n", []))
    code = f"""
import torch
from eagerc import _C
a, b, c = (_C._load_artifact(n, p, 1) for n, p in zip("abc", {[str(p) for p in paths]!r}))
print(a.shares_launcher, b.shares_launcher, c.shares_launcher)
try:
    _C._load_artifact("broken", {str(broken)!r}, 1)
except Exception as e:
    print("broken:", "is broken" in str(e))
"""
    for flag, want in ((None, "False True False"), ("0", "False False False")):
        env = dict(os.environ)
        env.pop("EAGERC_GPU_SHARED_LAUNCHER", None)
        if flag:
            env["EAGERC_GPU_SHARED_LAUNCHER"] = flag
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        lines = done.stdout.split("\n")
        assert lines[0] == want and lines[1] == "broken: True", done.stdout
