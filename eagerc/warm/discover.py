"""Which (op, arguments) a model sends to a device, found without running a kernel.

The model runs on fake tensors (torch._subclasses.FakeTensorMode: shapes, strides and
dtypes, no data), and a dispatch mode records every ATen call that reaches the device's
dispatch key with at least one of the device's tensors. Dispatch modes see calls after
autograd, as a backend does; an op the device does not implement itself decomposes again
when the call is replayed on real tensors (eagerc/warm/replay_call.py), so the replay reaches
exactly the kernels a real run reaches.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from eagerc.aten_meta import qualified_name


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A tensor by its metadata: what a signature reads (and what a replay allocates)."""

    size: tuple
    stride: tuple
    storage_offset: int
    dtype: torch.dtype
    device: str

    def describe(self) -> str:
        return f"{str(self.dtype).replace('torch.', '')}{list(self.size)}"


@dataclasses.dataclass(frozen=True)
class CallSpec:
    """One ATen call: the op's qualified overload name and its arguments, tensors as
    TensorSpecs (other values as they were: ints, floats, lists, dtypes, None)."""

    op: str
    args: tuple
    kwargs: tuple  # sorted (name, value) pairs: hashable

    def describe(self) -> str:
        def show(v):
            return v.describe() if isinstance(v, TensorSpec) else repr(v)

        parts = [show(a) if not isinstance(a, (list, tuple)) else
                 "[" + ", ".join(show(x) for x in a) + "]" for a in self.args]
        parts += [f"{k}={show(v)}" for k, v in self.kwargs]
        return f"{self.op}({', '.join(parts)})"


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


# The autograd engine sums the gradients a tensor used twice receives (a tied weight, a
# module called twice) in place, add_, when the buffer it holds is referenced nowhere
# else, and out of place otherwise; under fake tensors the references differ, so a backward
# that adds out of place also warms the in-place add it may take for real.
_ACCUMULATES = {"aten::add.Tensor": "add_"}


class _Recorder(TorchDispatchMode):
    def __init__(self, device_type: str, calls: dict):
        super().__init__()
        self.device_type = device_type
        self.calls = calls
        self.in_backward = False

    def _record(self, name: str, args, kwargs) -> None:
        def spec(v):
            if isinstance(v, torch.Tensor):
                return TensorSpec(tuple(v.shape), tuple(v.stride()), v.storage_offset(),
                                  v.dtype, str(v.device))
            return v

        call = CallSpec(name, _hashable(tree_map(spec, list(args))),
                        _hashable({k: tree_map(spec, v) for k, v in kwargs.items()}))
        try:
            hash(call)
        except TypeError:
            return  # an argument with no value identity (an object): not warmable
        self.calls.setdefault(call, None)

    def _on_device(self, value) -> bool:
        # A tensor of the device, or a factory call's device= argument.
        if isinstance(value, torch.Tensor):
            return value.device.type == self.device_type
        return isinstance(value, torch.device) and value.type == self.device_type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if func.namespace == "aten" and any(self._on_device(v) for v in flat):
            name = qualified_name(func)
            self._record(name, args, kwargs)
            if self.in_backward and name in _ACCUMULATES and _same_layout(args[:2]):
                self._record(f"aten::{_ACCUMULATES[name]}.Tensor", args, kwargs)
        return func(*args, **kwargs)


def _same_layout(tensors) -> bool:
    a, b = tensors
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.stride() == b.stride() and a.dtype == b.dtype)


def _first_floating(value) -> torch.Tensor | None:
    flat, _ = tree_flatten(value.to_tuple() if hasattr(value, "to_tuple") else value)
    return next((t for t in flat if isinstance(t, torch.Tensor) and t.is_floating_point()), None)


def discover(model: torch.nn.Module, example_inputs: tuple, device: torch.device,
             train: bool, optimizer: Any) -> tuple[list[CallSpec], str | None]:
    """The calls `model(*example_inputs)` on `device` sends there: forward with and
    without grad mode (the two reach different kernels), and with `train` a backward
    of a scalar loss and a step of `optimizer(params)` (default SGD). Returns (calls, why discovery stopped or
    None): a model fake tensors cannot run keeps what was found until then."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functional_call

    calls: dict = {}
    mode = FakeTensorMode(allow_non_fake_inputs=False)

    def fake(t):
        if not isinstance(t, torch.Tensor):
            return t
        f = mode.from_tensor(t)
        if f.device != device:
            with mode:
                f = f.to(device).detach().requires_grad_(t.requires_grad)
        return f

    # Tied and shared tensors (a T5 or GPT-2 LM head tied to the embedding, one buffer in
    # two modules) get one fake each, whatever the names they go by: functional_call
    # refuses different values for names that are tied, and the real run shares them too.
    state = {**dict(model.named_parameters(remove_duplicate=False)),
             **dict(model.named_buffers(remove_duplicate=False))}
    fakes: dict[int, torch.Tensor] = {}  # id of the real tensor -> its one fake

    def one_fake(t):
        if id(t) not in fakes:
            fakes[id(t)] = fake(t)
        return fakes[id(t)]

    fake_state = {name: one_fake(t) for name, t in state.items()}
    fake_inputs = tree_map(fake, tuple(example_inputs))
    recorder = _Recorder(device.type, calls)
    stopped = None
    stage = "the forward without grad"
    try:
        with mode, recorder:
            with torch.no_grad():
                functional_call(model, fake_state, fake_inputs)
            stage = "the forward with grad"
            output = functional_call(model, fake_state, fake_inputs)
            if train:
                loss = _first_floating(output)
                if loss is None or not loss.requires_grad:
                    raise NoLoss("train=True: the model's output has no floating tensor that "
                                 "requires grad to run backward from")
                stage = "the backward"
                recorder.in_backward = True
                loss.float().sum().backward()
                recorder.in_backward = False
                params = [p for p in fakes.values() if p.requires_grad and p.grad is not None]
                stage = "the optimizer step"
                with _optimizers_see_fakes_as_tensors():
                    opt = (optimizer or _sgd)(params)
                    opt.step()
                    opt.zero_grad()
    except NoLoss as e:
        raise ValueError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - what fake tensors cannot run is reported
        stopped = f"in {stage}, {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return list(calls), stopped


@contextlib.contextmanager
def _optimizers_see_fakes_as_tensors():
    """torch.optim picks its foreach (multi-tensor) path only for parameters whose type
    is exactly Tensor or Parameter; a fake parameter would take the per-tensor path and
    warm other kernels than the real step runs."""
    from torch._subclasses.fake_tensor import FakeTensor

    import torch.optim.optimizer as optimizer_module

    supported = getattr(optimizer_module, "_foreach_supported_types", None)
    if not isinstance(supported, list) or FakeTensor in supported:
        yield
        return
    supported.append(FakeTensor)
    try:
        yield
    finally:
        supported.remove(FakeTensor)


class NoLoss(Exception):
    pass


def _sgd(params):
    return torch.optim.SGD(params, lr=1e-3)
