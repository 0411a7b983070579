"""torch.compile of graphs on the eagerc device, compiled for its memory's home.

On GPU memory (``EAGERC_BACKING=cuda``) a graph's tensors are on "eagerc" but its memory
is CUDA memory. Inductor's Triton path takes a graph's device type for the GPU's (it asks
torch.cuda about the device, names its Triton target by the type, guards with torch.cuda),
so Inductor cannot lower a graph on "eagerc" itself. eagerc's per-op compiler solves the
same problem by compiling on stand-ins of the home device and running on zero-copy
aliases; torch.compile takes the same road, one level up:

- ``compile_fx`` (Dynamo's "inductor" backend) is called with an inner compile that, for
  each graph AOTAutograd hands it (forward, backward, inference), re-traces the graph on
  fake tensors of the home device (device arguments rewritten) and compiles that with
  Inductor's own code generator for the home (Triton on CUDA memory);
- the result runs on home aliases of the call's tensors and gives its outputs back as
  device tensors over the same memory. Autograd, input mutations and aliasing stay with
  AOTAutograd's wrappers, which see only device tensors.

Graphs without an eagerc tensor pass through untouched. The hook is installed only when
the device's memory is GPU memory (eagerc.device.register), and then only once
``torch._inductor.compile_fx`` is imported, so ``import eagerc`` imports no Inductor.
:func:`install` installs it on host memory too (tests run the same path on CPU aliases).
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys

import torch

import _eagerc as _C
from eagerc.device.naming import NAME

_MODULE = "torch._inductor.compile_fx"
# Whether compile_fx, once wrapped, compiles device graphs for the home (uninstall: no).
_active = False


def _is_device_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == NAME


def _home_device(device: torch.device) -> torch.device:
    """The home of the device's memory: CUDA of the same index, or the CPU."""
    from eagerc import _config

    if _config.device_backing() == "cuda":
        return torch.device("cuda", device.index or 0)
    return torch.device("cpu")


def _retarget(value, device: torch.device, home: torch.device):
    """``value`` with every reference to ``device`` (a torch.device or its name) replaced by
    ``home``: the device arguments of factory and copy ops in a traced graph."""
    if isinstance(value, torch.device) and value.type == NAME:
        return home
    if isinstance(value, str) and (value == NAME or value.startswith(NAME + ":")):
        return str(home)
    if isinstance(value, (list, tuple)):
        return type(value)(_retarget(v, device, home) for v in value)
    if isinstance(value, dict):
        return {k: _retarget(v, device, home) for k, v in value.items()}
    return value


class _OnHome(torch.fx.Interpreter):
    """Runs a graph with its device arguments pointing at the home device."""

    def __init__(self, gm, device, home):
        super().__init__(gm)
        self.device, self.home = device, home

    def call_function(self, target, args, kwargs):
        return super().call_function(target, _retarget(args, self.device, self.home),
                                     _retarget(kwargs, self.device, self.home))


def _home_fake(x, home: torch.device, fake_mode):
    """A fake tensor of the home device with ``x``'s metadata (symbolic sizes kept)."""
    if not _is_device_tensor(x):
        return x
    with fake_mode:
        out = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=home)
        if x.storage_offset() != 0:
            out = out.as_strided(x.size(), x.stride(), x.storage_offset())
    return out.requires_grad_(x.requires_grad) if x.is_leaf else out


def _home_graph(gm, example_inputs, device, home):
    """``gm`` traced again on fake tensors of ``home``: every value, device argument and
    intermediate of the graph is the home's, so Inductor lowers it for the home."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode = detect_fake_mode(example_inputs)
    home_inputs = [_home_fake(x, home, fake_mode) for x in example_inputs]
    interpreter = _OnHome(gm, device, home)
    with fake_mode:
        traced = make_fx(lambda *args: interpreter.run(*args), tracing_mode="real",
                         _allow_non_fake_inputs=True)(*home_inputs)
    traced.meta.update(gm.meta)
    return traced, home_inputs


class _RunsOnHomeAliases:
    """A compiled home graph called with device tensors: inputs as home aliases, outputs
    as device tensors over the same memory. Everything else is the compiled graph's."""

    def __init__(self, compiled, device: torch.device):
        self._compiled = compiled
        self._device = str(device)
        # Called with the argument list (AOTAutograd's boxed convention), read from the
        # instance: a wrapper made with functools.wraps copies only its __dict__.
        self._boxed_call = True

    def __call__(self, inputs):
        home_inputs = [_C._home_alias(x) if _is_device_tensor(x) else x for x in inputs]
        inputs.clear()  # boxed: the caller's list no longer holds the inputs
        outputs = self._compiled(home_inputs)
        return type(outputs)(self._to_device(y) for y in outputs) if isinstance(
            outputs, (list, tuple)) else self._to_device(outputs)

    def _to_device(self, y):
        if isinstance(y, torch.Tensor) and y.device.type != NAME and y.device.type != "meta":
            return _C._device_alias(y, self._device)
        return y

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def _inner_compile(original):
    @functools.wraps(original)
    def compile_on_home(gm, example_inputs, **kwargs):
        devices = [x.device for x in example_inputs if _is_device_tensor(x)]
        if not devices:
            return original(gm, example_inputs, **kwargs)
        device = devices[0]
        home = _home_device(device)
        home_gm, home_inputs = _home_graph(gm, example_inputs, device, home)
        # CUDA graphs would record the aliases' addresses of the first call.
        from torch._inductor.utils import BoxedBool

        if "cudagraphs" in kwargs:
            kwargs["cudagraphs"] = BoxedBool(False)
        return _RunsOnHomeAliases(original(home_gm, home_inputs, **kwargs), device)

    return compile_on_home


def _wrap_compile_fx(module) -> None:
    original = module.compile_fx
    if getattr(original, "_eagerc_on_home", False):
        return

    @functools.wraps(original)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        if not _active or args or not any(_is_device_tensor(x) for x in example_inputs_):
            return original(model_, example_inputs_, *args, **kwargs)
        inner = kwargs.pop("inner_compile", module.compile_fx_inner)
        # AOTAutograd's own cache would store the home graph's compiled code under the
        # device graph's key, and a later process would call it without the aliases.
        with torch._functorch.config.patch(enable_autograd_cache=False):
            return original(model_, example_inputs_, inner_compile=_inner_compile(inner), **kwargs)

    compile_fx._eagerc_on_home = True
    module.compile_fx = compile_fx


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Wraps compile_fx when torch._inductor.compile_fx is first imported."""

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            _wrap_compile_fx(module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """torch.compile of graphs on the device compiles them for the memory's home."""
    global _active
    _active = True
    if _MODULE in sys.modules:
        _wrap_compile_fx(sys.modules[_MODULE])
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def uninstall() -> None:
    """torch.compile hands device graphs to Inductor as they are again (tests)."""
    global _active
    _active = False
