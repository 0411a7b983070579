"""Settings read from the environment, in one place."""
from __future__ import annotations

import os

# The last rung for a device with no native kernels (aliases off or impossible): an op that
# neither a compiled kernel, a decomposition nor a vendor extern serves runs through the host
# round trip (inputs copied to CPU, ATen's CPU kernel, results copied back), counted per op
# (host_round_trips in eagerc.stats()) with one warning per op. On by default; "0" opts out:
# such an op raises NotImplementedError naming it and the fix (docs/vendor.md).
CPU_FALLBACK_ENV = "EAGERC_CPU_FALLBACK"

# Where the eagerc device keeps its memory: "cpu" (host memory, the default) or "cuda"
# (GPU memory through PyTorch's CUDA caching allocator; its kernels are Triton kernels).
# Read once, when `import eagerc` registers the device.
BACKING_ENV = "EAGERC_BACKING"


def device_backing() -> str:
    value = os.environ.get(BACKING_ENV, "cpu").strip().lower() or "cpu"
    if value not in ("cpu", "cuda"):
        raise ValueError(f"{BACKING_ENV}={value!r}: expected 'cpu' (host memory) or 'cuda' "
                         "(GPU memory)")
    return value


# Whether `import eagerc` registers the eagerc device (PrivateUse1): never where another
# backend renamed PrivateUse1 already (vendor_device); else "1" yes, "0" no, unset: yes,
# except where torch sees a CUDA GPU and the device's memory is host memory. A
# registered PrivateUse1 backend becomes torch's accelerator (at::getAccelerator prefers
# it), and from then on the autograd engine asserts ("opt_ready_stream &&
# opt_parent_stream", pytorch/pytorch#161129) in every backward over CUDA tensors: on a GPU
# machine the host-memory device would break native CUDA training and override mode's.
DEVICE_ENV = "EAGERC_DEVICE"


def vendor_device() -> str | None:
    """The device another backend registered as PrivateUse1 before `import eagerc` (e.g.
    "mydevice", examples/mydevice, which `import torch` loads through its torch.backends
    entry point), or None. eagerc then leaves PrivateUse1 to it and serves that device
    instead of registering its own."""
    import torch

    name = torch._C._get_privateuse1_backend_name()
    return None if name in ("privateuseone", "privateuse1", "eagerc") else name


def register_device_at_import() -> bool:
    if vendor_device() is not None:
        return False  # PrivateUse1 is another backend's
    value = os.environ.get(DEVICE_ENV, "").strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    if value:
        raise ValueError(f"{DEVICE_ENV}={value!r}: expected 1 (register the eagerc device), "
                         "0 (do not) or nothing (register it unless torch sees a CUDA GPU)")
    if device_backing() == "cuda":
        return True
    import torch

    return not torch.cuda.is_available()


# "background" (the default): a miss is answered at once by a kernel that exists (the
# device's own in override mode, its memory home's on aliases, else the host round trip)
# while the compile service compiles its kernel in worker processes of its own
# (eagerc/per_op/background.py, eagerc/compile_service/); random ops are never answered in
# the interim (the CPU's kernel on aliases on host memory; compiled at their first call on
# GPU memory), so their numbers follow the seed. "now": a miss waits for its kernel's
# compile, in the caller's process. enable(device, compile=...) overrides it per device.
COMPILE_ENV = "EAGERC_COMPILE"
COMPILE_MODES = ("background", "now")


def compile_mode() -> str:
    value = os.environ.get(COMPILE_ENV, "background").strip().lower() or "background"
    if value not in COMPILE_MODES:
        raise ValueError(f"{COMPILE_ENV}={value!r}: expected 'background' (compile in the compile "
                         "service, answer misses at once) or 'now' (compile before answering)")
    return value


# The compile service's worker processes (default: half the cores this process may run
# on, at least one) and how long it stays with nothing to do before it exits (seconds).
COMPILE_WORKERS_ENV = "EAGERC_COMPILE_WORKERS"
SERVICE_IDLE_ENV = "EAGERC_COMPILE_SERVICE_IDLE_S"


def compile_workers() -> int:
    text = os.environ.get(COMPILE_WORKERS_ENV, "").strip()
    if not text:
        return max(1, usable_cores() // 2)
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{COMPILE_WORKERS_ENV}={text!r}: expected a number of processes, 1 or more")
    return int(text)


def usable_cores() -> int:
    """The cores this process may run on: its affinity (``taskset -c 0,1`` on a 16-core
    machine gives 2), not the machine's count, which would start 8 workers on 2 cores."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


def service_idle_seconds() -> float:
    return _seconds(SERVICE_IDLE_ENV, 120.0)


# Comparison switches for tools/bench_gpu.py's --ab (cold GPU compile, A against B):
# EAGERC_GLUE_PRELUDE picks the header a kernel's C++ glue is built on: "1" (default) the
# lean prelude where the wrapper fits it, else eagerc's own (eagerc/codegen/cpp/glue_prelude.py),
# "full" eagerc's own only, "0" Inductor's header. EAGERC_GPU_LAUNCHER="0" turns launch plans
# off, so every GPU wrapper is compiled by g++ (eagerc/codegen/triton/plan_build.py).
GLUE_PRELUDE_ENV = "EAGERC_GLUE_PRELUDE"
GPU_LAUNCHER_ENV = "EAGERC_GPU_LAUNCHER"


def glue_prelude() -> str:
    """"1", "full" or "0"; any other value counts as the default (read inside a compile,
    where an error would become the signature's refusal)."""
    value = os.environ.get(GLUE_PRELUDE_ENV, "1").strip()
    return value if value in ("0", "full") else "1"


def gpu_launcher_enabled() -> bool:
    return os.environ.get(GPU_LAUNCHER_ENV, "1").strip() != "0"


# A launch plan runs mm and addmm (float32, 2-D, a row bias) as one cuBLASLt call with
# descriptors and algorithm kept per problem (eagerc/codegen/triton/plan_launcher/lt_matmul.cpp);
# "0" leaves them to ATen's structured kernels through AOTI's shim (A/B timing). Read by the
# artifact loader, csrc/matmul_precision.cpp, when it loads a plan's library.
GPU_CUBLASLT_ENV = "EAGERC_GPU_CUBLASLT"


# The remote tier's Redis URL (kernel_cache reads it when it opens the store); eagerc only
# asks whether one is set (a Ray cluster without it keeps kernels on the host compiling them).
REMOTE_CACHE_ENV = "EAGERC_REMOTE_CACHE"


def remote_cache_set() -> bool:
    return bool(os.environ.get(REMOTE_CACHE_ENV, "").strip())


def inductor_cache_dir() -> str | None:
    """TORCHINDUCTOR_CACHE_DIR as set (None: Inductor's default), for messages."""
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR") or None


# Where the C++ compiler's ISA probe verdicts are kept (eagerc/codegen/cpp/vec_isa_memo.py):
# EAGERC_PROBE_DIR, else $XDG_CACHE_HOME/eagerc-probes (~/.cache/eagerc-probes).
PROBE_DIR_ENV = "EAGERC_PROBE_DIR"


def probe_directory() -> str:
    explicit = os.environ.get(PROBE_DIR_ENV)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "eagerc-probes")


# Other tools' variables that change the code eagerc builds (Inductor's TORCHINDUCTOR_*,
# the C++ compiler's CXX and flags): read here, digested into the cache namespace by
# eagerc/compile/settings.py.
def variable(name: str) -> str:
    return os.environ.get(name, "")


def variables(prefix: str) -> list:
    """(name, value) of every variable whose name starts with `prefix`."""
    return [(k, v) for k, v in os.environ.items() if k.startswith(prefix)]


# Capture: segment replay of a stopped call's torch ops costs Python work per call; on
# small tensors a stopped call runs slower replayed than eagerly (docs/capture.md), so it
# can be turned off. The monitor uses sys.monitoring on Python 3.12+, settrace before;
# "settrace" forces the older path (for comparison).
CAPTURE_SEGMENTS_ENV = "EAGERC_CAPTURE_SEGMENTS"
CAPTURE_TRACER_ENV = "EAGERC_CAPTURE_TRACER"


def capture_segments_enabled() -> bool:
    return os.environ.get(CAPTURE_SEGMENTS_ENV, "1").strip() not in ("0", "false", "False", "no")


def capture_forces_settrace() -> bool:
    return os.environ.get(CAPTURE_TRACER_ENV, "") == "settrace"


def cpu_fallback_enabled() -> bool:
    return os.environ.get(CPU_FALLBACK_ENV, "1").strip() not in ("0", "false", "False", "no")


# On a device whose memory has a home (host memory: the CPU), an op that cannot be
# compiled runs the home's ATen kernel on zero-copy aliases (default); "0" raises instead,
# showing what a device without such a home would need a hand-written kernel for.
ALIAS_FALLBACK_ENV = "EAGERC_ALIAS_FALLBACK"


def alias_fallback_enabled() -> bool:
    return os.environ.get(ALIAS_FALLBACK_ENV, "1") not in ("", "0", "false", "False")


# A process that misses a key another process is compiling waits for it (then loads its
# kernel) while the holder makes progress: its pid alive and its heartbeat fresh. A holder
# whose heartbeat is older than EAGERC_LOCK_STALL_S seconds (stopped by SIGSTOP or a
# debugger) is given up on, and the waiter compiles the key itself; a live holder is waited
# for at most EAGERC_LOCK_WAIT_S (a hung compiler). See eagerc/compile/lock.py.
LOCK_STALL_ENV = "EAGERC_LOCK_STALL_S"
LOCK_WAIT_ENV = "EAGERC_LOCK_WAIT_S"


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"{name}={text!r}: expected a positive number of seconds "
                         f"(default {default:g})")
    return value


def lock_stall_seconds() -> float:
    return _seconds(LOCK_STALL_ENV, 10.0)


def lock_wait_seconds() -> float:
    return _seconds(LOCK_WAIT_ENV, 120.0)

# out= forms whose eager kernel does more than resize the out and copy the functional's
# result: on a device with a memory home they run the home's kernel on aliases.
# binary_cross_entropy.out (CPU's and CUDA's) writes the elementwise loss into a squeezed
# view of `out` and then reduces `out` as it was given: an out not shaped like the input
# reduces its own old elements (an empty one's mean is NaN). Found by TorchCTS level 3.
EAGER_OUT_FORMS = ["aten::binary_cross_entropy.out"]

# Ops that are the device runtime itself: allocation, copies, metadata, scalar reads.
# Compiled kernels call these (e.g. to allocate outputs), so they always stay native.
RUNTIME_OPS = (
    "aten::empty.memory_format", "aten::empty_strided", "aten::empty.out", "aten::empty_like",
    "aten::_empty_affine_quantized", "aten::_empty_per_channel_affine_quantized",
    "aten::resize_", "aten::resize_as_", "aten::set_", "aten::set_.source_Storage",
    "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor",
    "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::_local_scalar_dense",
    "aten::item", "aten::as_strided", "aten::view", "aten::_reshape_alias",
    "aten::_pin_memory", "aten::is_pinned", "aten::record_stream", "aten::_to_copy",
    "aten::_has_compatible_shallow_copy_type", "aten::_nnz", "aten::equal", "aten::is_set_to",
    "aten::_make_per_tensor_quantized_tensor", "aten::_make_per_channel_quantized_tensor",
    "aten::_assert_async", "aten::_assert_async.msg", "aten::_functional_assert_async.msg",
    "aten::_print", "aten::_unsafe_set_version_counter",
    # Views by meaning whose schemas carry no alias annotation: compiling them would
    # turn a view into a copy.
    "aten::_unsafe_view", "aten::lift", "aten::lift_fresh",
)

# Ops whose value scalars choose the computation (pow by 2 or 3 is a multiply, not a
# generic pow), and ops whose kernel is an extern call that cannot take a symbolic float
# (ATen's CPU flash attention and its `scale`: a lifted scale fails to trace, and finding
# that out cost one failed trace per signature, and extra runs under background
# compilation): their scalars are specialized, one kernel per value.
SPECIALIZE_SCALARS = (
    "aten::pow.Tensor_Scalar", "aten::pow_.Scalar", "aten::pow.Tensor_Scalar_out",
    "aten::pow.Scalar", "aten::pow.Scalar_out", "aten::float_power.Tensor_Scalar",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
)
