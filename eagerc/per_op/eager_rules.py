"""Does eager accept this call? Asked on a miss, before anything is compiled.

A compiled kernel computes; it does not check what eager's kernel checks: dtypes it
supports (softmax of int8), casting rules for out= (a float result into an int64 out),
shapes that must match, devices that must agree. So before compiling a call, eagerc runs
eager's own kernel for it once, on copies of its tensors (an op may write arguments its
schema does not mark: native_batch_norm's running stats): the device's native kernel in
override mode, ATen's kernel of the memory's home (on copies there) for a device whose
memory has a home. If
eager raises, :class:`EagerRaises` carries its exception type and message to the holder,
which raises the same for the caller; nothing is compiled or remembered, since a user
error says nothing about the signature. A failure after eager accepted the call is the
compiler's, a property of the signature (eagerc/refusals.py).

Devices are checked separately (CPU copies cannot show them), with eager's rules:
operators checked by the dispatcher's generated device check want every tensor on one
device; TensorIterator operators let 0-dim CPU tensors in as scalars; the others (index
with CPU indices, ...) decide for themselves.
"""
from __future__ import annotations

import functools
import os

import torch

from eagerc import random_streams
from eagerc.aten_meta import callable_for
from eagerc.refusals import EagerRaises
from eagerc.compile.output_strides import fresh_output_layouts
from eagerc.compile.trace import split_call


def check_call(op, args, target) -> tuple:
    """Raise EagerRaises when eager's kernel raises for `op(*args)` on `target`'s device.
    Runs inside the miss (the holder's activity guard is set: ops run natively). Returns
    the sizes and strides of eager's fresh outputs (the compiled kernel returns the same
    strides: eagerc/compile/output_strides.py)."""
    if target.new_device:
        check_devices(op, args, target)
    home = _reference_device(op, target)
    try:
        result = _run_eager(op, args, home=home, served=target.device)
    except Exception as e:  # noqa: BLE001 - eager's exception is the answer
        if isinstance(e, NotImplementedError) and target.new_device and home is not None \
                and not _has_kernel(op, home):
            # No kernel for dense tensors anywhere (matmul_backward: NestedTensor kernels
            # only): eager's dispatcher names the device that has none, not the reference.
            raise EagerRaises("NotImplementedError", no_kernel_message(op.name(), target.device)) from e
        raise EagerRaises.from_exception(e) from e
    return fresh_output_layouts(op, result)


def no_kernel_message(op_name: str, device: str) -> str:
    """The dispatcher's NotImplementedError for an op with no kernel on `device` (its
    first sentences; csrc/fallback_ladder.cpp's check_cpu_has_kernel raises the same)."""
    return (f"Could not run '{op_name}' with arguments from the '{device}' backend. This could "
            "be because the operator doesn't exist for this backend, or was omitted during the "
            "selective/custom build process (if using custom build).")


def _has_kernel(op, device: str) -> bool:
    return torch._C._dispatch_has_computed_kernel_for_dispatch_key(
        op.name(), torch._C._dispatch_key_for_device(device))


def _reference_device(op, target):
    """Where eager's kernel for a call on `target` runs: the memory's home ("cpu" for host
    memory, "cuda" for GPU memory), None for the device itself. A home with no kernel for
    the op (CUDA has no histogram) would only say so; the device serves such an op all the
    same (a decomposition, the host round trip), so ATen's CPU kernel is eager's reference."""
    if not target.host_aliases:
        return None
    home = target.home
    if home != "cpu" and not _has_kernel(op, home):
        return "cpu"
    return home


# Arguments a home's kernel gets only contiguous, since the home's composite makes them so
# before it calls the kernel, while a PrivateUse1 device's composite hands them on in their
# suggested memory format: group_norm calls input.contiguous(input.suggest_memory_format())
# on CPU and PrivateUse1, input.contiguous() on CUDA, and CUDA's native_group_norm checks
# that X is contiguous (a channels-last X raised "Expected X.is_contiguous(memory_format)",
# which native CUDA never raises for a channels-last GroupNorm input).
_CONTIGUOUS_ON_HOME = {"cuda": {"aten::native_group_norm": (0,),
                                "aten::native_group_norm_backward": (0, 1)}}


def _run_eager(op, args, home, served):
    """`home`: the device whose kernels address the served device's memory ("cpu" for
    host memory, "cuda" for GPU memory), whose ATen kernel is eager's reference there: the
    call runs on copies on it (devices were checked already). None: on the device itself."""
    # Every storage is copied, not only those the schema marks as written: some ops write
    # arguments their schema does not annotate (native_batch_norm and cudnn_batch_norm
    # update running_mean/var in place), and eager's run must leave the caller's tensors
    # as they were. One copy per storage keeps overlaps between arguments as they were.
    # Tensors of the served device are copied to `home`; any other (a CPU index, a 0-dim
    # CPU scalar) stays on its own device, as eager sees it.
    replicas = {key: _clone_storage(t, home if t.device.type == served else None)
                for key, t in _storages(args).items()}
    call = [_on_replica(v, replicas, home, served) for v in args]
    for i in _CONTIGUOUS_ON_HOME.get(home, {}).get(op._schema.name, ()):
        call[i] = call[i].contiguous()
    pos, kw = split_call(op, call)
    # An op neither the home nor the CPU has a kernel for (ATen's fused RNN cells: CUDA's
    # only) is served by eagerc's decomposition, which holds ATen's checks: it is eager's
    # reference there.
    from eagerc.compile.accelerator.decompositions import for_home_gaps

    run = (home and for_home_gaps(home).get(op)) or callable_for(op, call)
    if torch.Tag.nondeterministic_seeded in op.tags:
        with random_streams.kept():  # the caller's random streams are untouched
            return run(*pos, **kw)
    return run(*pos, **kw)


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        yield from (v for v in value if isinstance(v, torch.Tensor))


def _storage_key(t: torch.Tensor):
    return t.device, t.untyped_storage().data_ptr()


def _storages(args) -> dict:
    """The storages of the call's tensors: one tensor of each."""
    found = {}
    for value in args:
        for t in _tensors(value):
            found.setdefault(_storage_key(t), t)
    return found


def _clone_storage(t: torch.Tensor, home) -> torch.UntypedStorage:
    whole = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    return (whole.to(home, copy=True) if home else whole.clone()).untyped_storage()


def _on_replica(value, replicas, home, served):
    """`value` with every tensor rebuilt over its storage's copy (same sizes, strides and
    offset: overlaps between arguments stay as they were)."""
    def swap(t):
        storage = replicas[_storage_key(t)]  # every storage has its copy (_storages)
        return torch.empty(0, dtype=t.dtype, device=storage.device).set_(
            storage, t.storage_offset(), t.size(), t.stride())

    if isinstance(value, torch.Tensor):
        return swap(value)
    if isinstance(value, torch.device) and home and value.type == served:
        return torch.device(home)  # factories (arange, full) run eager's kernel there
    if isinstance(value, (list, tuple)):
        return type(value)(swap(v) if isinstance(v, torch.Tensor) else v for v in value)
    return value


# -- devices -----------------------------------------------------------------------------


def check_devices(op, args, target) -> None:
    """Eager's device rule for `op` on the served device; raises EagerRaises."""
    tensors = [(a.name, t, a.alias_info is not None and a.alias_info.is_write)
               for a, v in zip(op._schema.arguments, args) for t in _tensors(v)]
    if len({_device(t) for _, t, _ in tensors}) <= 1:
        return
    policy = _device_policy(op._schema.name.split("::")[-1], op._overloadname)
    if policy == "own":
        return
    if policy == "tensor_iterator":
        # TensorIterator: outputs first; a 0-dim CPU input is a scalar, not a device.
        tensors = ([x for x in tensors if x[2]]
                   + [x for x in tensors if not x[2] and not (x[1].dim() == 0 and x[1].is_cpu)])
    common = None
    for name, t, _ in tensors:
        if common is None:
            common = _device(t)
        elif _device(t) != common:
            message = ("Expected all tensors to be on the same device, but found at least two "
                       f"devices, {common} and {_device(t)}!")
            if policy == "exact":
                overload = "" if op._overloadname == "default" else f"_{op._overloadname}"
                method = f"wrapper_{target.dispatch_key}_{op._schema.name.split('::')[-1]}{overload}"
                message += f" (when checking argument for argument {name} in method {method})"
            raise EagerRaises("RuntimeError", message)


def _device(t: torch.Tensor) -> torch.device:
    """t's device with its index (a device tensor made without one is on index 0)."""
    d = t.device
    return d if d.type == "cpu" or d.index is not None else torch.device(d.type, 0)


@functools.lru_cache(maxsize=None)
def _device_policy(name: str, overload: str) -> str:
    """"exact" (the dispatcher's device check), "tensor_iterator" or "own", from
    native_functions.yaml as shipped in torchgen (read once, on the first mixed call)."""
    entry = _native_functions().get(name if overload == "default" else f"{name}.{overload}")
    if entry is None:
        return "own"  # not a native function (a custom op): its kernel decides
    if entry.get("device_check") != "NoCheck":
        return "exact"
    structured = entry
    delegate = entry.get("structured_delegate")
    if delegate:
        structured = _native_functions().get(delegate, {})
    return "tensor_iterator" if structured.get("structured_inherits") == "TensorIteratorBase" \
        else "own"


@functools.lru_cache(maxsize=1)
def _native_functions() -> dict:
    try:
        import torchgen
        import yaml
    except ImportError:
        return {}
    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native",
                        "native_functions.yaml")
    try:
        with open(path) as f:
            entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError:
        return {}
    return {e["func"].split("(")[0]: e for e in entries if isinstance(e, dict) and "func" in e}
