"""torch.distributed on the eagerc device, through the engines torch already has.

The device's memory is host memory (or, with ``EAGERC_BACKING=cuda``, a GPU's), so
gloo (or NCCL) can move its bytes as they are: every c10d collective that reaches the
device runs the process group's backend on zero-copy aliases of its tensors on the
memory's home device (CPU or CUDA). No collective is written here, and nothing is copied.

Two registrations make it so (``register``, called by ``eagerc.device.register``):

- the device-to-backend map: ``"gloo"`` lists the device among the devices it serves
  (and ``"nccl"`` does on GPU memory), and the device's default backend is the one of its
  memory, so ``init_process_group("gloo")``, ``"cpu:gloo,eagerc:gloo"`` and the default
  (``init_process_group()``: the accelerator's backend, to which eagerc adds the CPU's,
  ``_keep_default_backends``) all give the process group a backend for the device;
- the device's kernels of the ``c10d::`` ops (the ones ``ProcessGroup`` dispatches to,
  beneath ``dist.*``, DDP's reducer, FSDP2 and the functional collectives): each swaps
  the device's tensors for aliases on the memory's home and calls the same op again,
  which reaches the backend through the home device's entry of the process group.

    >>> import torch, torch.distributed as dist, eagerc
    >>> dist.Backend.default_device_backend_map["eagerc"]
    'gloo'
"""
from __future__ import annotations

import ctypes
import warnings

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_map

__all__ = ["home_alias", "register"]

_DEVICE = "eagerc"
# The backend that moves the bytes of each kind of memory.
_BACKEND_OF_MEMORY = {"cpu": "gloo", "cuda": "nccl"}
# The argument of a c10d collective that names its process group; an op without one is
# no collective, and keeps torch's kernel.
_GROUP_ARGUMENT = "process_group"

_library: torch.library.Library | None = None
_memory = "cpu"


def register(memory: str) -> bool:
    """Make torch.distributed serve the eagerc device whose memory is ``memory``.

    Idempotent; False where this torch has no distributed package.
    """
    global _library, _memory
    if _library is not None:
        return True
    if not dist.is_available():
        return False
    _memory = memory
    backend = _BACKEND_OF_MEMORY[memory]
    dist.Backend.default_device_backend_map.setdefault(_DEVICE, backend)
    _keep_default_backends()
    # gloo moves host memory, and GPU memory through its CUDA path; NCCL only GPU memory.
    serving = ["gloo"] + (["nccl"] if memory == "cuda" else [])
    for name in serving:
        devices = dist.Backend.backend_capability[name]
        if _DEVICE not in devices:
            devices.append(_DEVICE)
    _library = torch.library.Library("c10d", "IMPL")
    with warnings.catch_warnings():
        # These replace torch's PrivateUse1 kernels, which pass the device's own tensors
        # to the backend (gloo and NCCL refuse them); the dispatcher warns of each.
        warnings.filterwarnings("ignore", "(?s).*Overriding a previously registered kernel")
        for name in _device_ops():
            op = getattr(torch.ops.c10d, name).default
            _library.impl(name, _on_home_aliases(op), "PrivateUse1")
    return True


def _keep_default_backends() -> None:
    """Give ``init_process_group()`` (no backend named) the devices it served before.

    torch then serves torch's accelerator alone (``BackendConfig`` maps only
    ``torch._C._get_accelerator()``'s type), and a registered PrivateUse1 device is that
    accelerator: without this, CPU tensors of a default group (``"cpu:gloo"`` before
    ``import eagerc``) would raise "No backend type associated with device type cpu".
    The group keeps ``cpu:gloo`` (and ``cuda:nccl`` where CUDA is there) and adds the
    device's backend; where all are gloo, one gloo backend serves them all."""
    config = dist.distributed_c10d.BackendConfig
    if getattr(config.__init__, "_eagerc_keeps_defaults", False):
        return
    torch_init = config.__init__

    def __init__(self, backend) -> None:
        torch_init(self, backend)
        if str(backend) != dist.Backend.UNDEFINED or set(self.device_backend_map) != {_DEVICE}:
            return
        serving = {"cpu": dist.Backend.GLOO}
        if torch.cuda.is_available() and dist.is_nccl_available():
            serving["cuda"] = dist.Backend.NCCL
        self.device_backend_map = {**serving, **self.device_backend_map}

    __init__._eagerc_keeps_defaults = True
    __init__.__doc__ = torch_init.__doc__
    config.__init__ = __init__


def _device_ops() -> list[str]:
    """The c10d ops torch gives a kernel for a PrivateUse1 device (each takes a group)."""
    names = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("c10d::"):
            continue
        if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"):
            continue
        name = qualified.split("::", 1)[1]
        schema = getattr(torch.ops.c10d, name).default._schema
        if any(a.name == _GROUP_ARGUMENT for a in schema.arguments):
            names.append(name)
    return names


def _on_home_aliases(op):
    """A device kernel for c10d op ``op``: the same op on home aliases of the device's
    tensors; the tensors it returns are the device's own again."""
    group_index = next(i for i, a in enumerate(op._schema.arguments) if a.name == _GROUP_ARGUMENT)

    def kernel(*args, **kwargs):
        originals: dict[int, torch.Tensor] = {}
        aliases: list[torch.Tensor] = []

        def to_home(x):
            if isinstance(x, torch.Tensor) and x.device.type == _DEVICE:
                alias = home_alias(x)
                originals[id(alias)] = x
                aliases.append(alias)  # keeps each id() unique while the call runs
                return alias
            return x

        home = torch.device(_memory, 0) if _memory == "cuda" else torch.device(_memory)
        args, kwargs = tree_map(to_home, (args, kwargs))
        if aliases:
            home = aliases[0].device
        group = args[group_index] if group_index < len(args) else kwargs[_GROUP_ARGUMENT]
        _serve_home_device(group, home)
        result = op(*args, **kwargs)
        return tree_map(lambda y: originals.get(id(y), y), result)

    kernel.__name__ = f"{op._schema.name.split('::')[1]}_on_home_aliases"
    return kernel


def _serve_home_device(script_group, home: torch.device) -> None:
    """Let ``home`` reach the group's backend for the device: a group made for the device
    alone (``"eagerc:gloo"``) has no entry for it.
    Where the group has neither, torch's own "No backend type associated with device type
    eagerc" is raised."""
    group = dist.ProcessGroup.unbox(script_group)
    try:
        group._get_backend(home)
        return
    except RuntimeError:
        pass
    backend = group._get_backend(torch.device(_DEVICE))
    kind = dist.Backend.backend_type_map.get(backend.name(), dist.ProcessGroup.BackendType.CUSTOM)
    group._register_backend(home, kind, backend)


def home_alias(t: torch.Tensor) -> torch.Tensor:
    """A tensor on the home of ``t``'s memory (CPU, or CUDA on GPU memory) over the same
    bytes: same sizes, strides, offset and dtype; writes through it are seen in ``t``. It
    holds a reference to ``t``'s storage, so it stays valid while it lives.

        >>> import torch, eagerc
        >>> from eagerc.device.distributed import home_alias
        >>> t = torch.zeros(3, device="eagerc"); home_alias(t).fill_(2.0).device
        device(type='cpu')
        >>> t.tolist()
        [2.0, 2.0, 2.0]
    """
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    if _memory == "cuda":
        with torch.cuda.device(t.device.index or 0):
            raw = torch.as_tensor(_CudaBytes(storage), device="cuda")
    elif nbytes == 0:
        raw = torch.empty(0, dtype=torch.uint8)
    else:
        buffer = (ctypes.c_char * nbytes).from_address(storage.data_ptr())
        buffer.storage = storage  # the alias (through frombuffer) keeps the storage alive
        raw = torch.frombuffer(buffer, dtype=torch.uint8)
    whole = nbytes - nbytes % t.element_size()  # a storage's tail shorter than an element
    alias = raw[:whole].view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())
    if t.is_conj():
        alias = alias.conj()
    if t.is_neg():
        alias = torch._neg_view(alias)
    return alias


class _CudaBytes:
    """The bytes of a GPU-memory storage, as CUDA's array interface describes them."""

    def __init__(self, storage):
        self.storage = storage  # kept alive by the tensor torch.as_tensor makes over it
        nbytes = storage.nbytes()
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "version": 2, "strides": None,
            "data": (storage.data_ptr() if nbytes else 0, False),
        }
