"""The monitor run (paper §5): run the program for real, watching every bytecode instruction.

`sys.monitoring` (3.12+) or `sys.settrace` with `frame.f_trace_opcodes` (3.11; tracer.py)
calls us before each instruction of every watched Python frame; `frames.peek` reads the
instruction's inputs from the value stack, and the next event of the same frame sees its
output on top of the stack. The instructions that read or write state
(attribute, subscript, global and closure access, calls) update the RefGraph; calls of native
functions are checked against the annotation tables; torch calls reach the OpRecorder.

When capture must stop (an unannotated native, an impure call, a read of tensor values) the
monitor records the reason and stops watching: the program finishes normally, so the call's
result is correct, and the record made from it runs the function eagerly.
"""
import functools
import os
import types
import weakref

import torch

from . import active_monitor, annotations, lazy_modules, numpy_ops, script_calls, torch_settings
from .gc_pause import seat_gc_callbacks
from .instructions import SKIP, FrameWatch, analyze
from .object_facts import (builtin_base, keeps_references, module_dict, plain_values, qualname,
                           attr_source)
from .op_recorder import OpRecorder
from .guards import snapshot
from .refgraph import RefGraph, Relation
from .replayed_updates import Replays
from .state_opcodes import hashable_key
from .tracer import make_tracer
from .symbolic import bake_all

_MUTABLE = (list, dict, set, bytearray)
_IMMUTABLE_VALUES = (int, float, complex, str, bytes, tuple, frozenset, type(None))


LIFT_STOP = "lifted scalar used outside torch ops"


# Values on a class that the guard checks when the program reads them off the class (or
# through an instance): flags, numbers, and plain containers whose items it then reads.
_CLASS_FLAGS = (bool, int, float, str, type(None), dict, list, tuple, set, frozenset)
_NOT_FOUND = object()
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


class Monitor:
    """One monitor run of `fn(*args, **kwargs)`; see the module docstring."""

    def __init__(self, fn, args, kwargs, lift=False, symbolic=False):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        # §6.2.1 for sizes: the record will be compiled with symbolic sizes, so sizes read by
        # Python code become SymbolicInts (symbolic.py); the monitor bakes every use of one
        # that the graph cannot recompute.
        self.symbolic = symbolic
        self._arg_reach = (0, frozenset())
        # §6.2.1: float arguments become graph inputs instead of guarded constants. Any use
        # outside a torch op (Python arithmetic, a branch, a native call) would bake the value
        # into the record, so it stops capture with a reason and the caller stops lifting.
        self.lifted = {id(v): v for v in list(args) + list(kwargs.values())
                       if lift and type(v) is float}
        self.graph = RefGraph()
        self.graph.on_external = self._on_external
        self.graph.site_of = self.site
        self.frame = None  # the watched frame of the last instruction handled (site())
        self.stop_site = None  # site() when capture stopped
        self.recorder = OpRecorder(self, symbolic)
        self.stopped = None  # the reason capture stopped, or None
        self.sdp_flags = torch_settings.sdp_flags()  # (torch_settings.py)
        # node_id of a small outside tensor -> [(read, value)] Python read of its value,
        # checked by the guard (speculate.outside_value)
        self.value_guards = {}
        # Tensor values Python reads are checked after the graph instead of stopping the
        # run (speculate.py); monitor_run.py decides per run.
        self.speculate = False
        self.suspend = 0  # >0 while our own code (the op recorder) runs
        # >0 while an annotated Python function (or an import) runs: its torch calls run
        # unrecorded (a tensor it makes that the program uses later stops capture)
        self.opaque = 0
        self.snapshots = {}  # node_id -> snapshot(obj) taken when first reached
        self.absent = {}  # node_id -> names that must stay absent (globals / instance dict)
        self.stride_nodes = set()  # node_ids of tensors whose strides the program read
        self.lazy = set()  # node_ids of namespace dicts (globals, __dict__): read per key
        self._consts = {}  # id(obj) -> node of constant roots (globals dicts, cells)
        self._new_funcs = {}  # id -> function made by the run (its cells are new)
        self._infos = {}
        self.started = self.finished = False
        self.result = None
        self.replays = Replays()  # counters and appends the mock recomputes (replayed_updates.py)
        # Host random draws (`random.random()`, `np.random.rand()`, a Generator's
        # `normal`): [(bound method, arguments, result)] in the run's order, drawn again by
        # the mock with the same arguments (the stream advances as in eager); id of a float
        # drawn -> its method. The floats are graph inputs, as lifted ones.
        self.draws = []
        self.drawn = {}
        # id(tensor) -> (weak reference, "file:line") of tensor subclasses the run made with
        # torch.Tensor._make_subclass (`self.w = nn.Parameter(x)` in forward): the mock
        # makes them again from the graph's value (mock.py)
        self.subclassed = {}

    # -- running --------------------------------------------------------------------------
    def prepare(self):
        """Read the called object and the arguments (before the program runs)."""
        lazy_modules.initialize(self.fn, self.args, self.kwargs)  # as its pre-hook would
        g = self.graph
        self.grad_mode = torch.is_grad_enabled()
        fn_node = g.read(g.root, Relation("fn"), self.fn)
        if isinstance(self.fn, types.MethodType):  # capture(module.forward): self is state
            g.read(fn_node, Relation("attr", "__self__"), self.fn.__self__)
        for i, a in enumerate(self.args):
            g.read(g.root, Relation("args", i), a)
        for k, v in self.kwargs.items():
            g.read(g.root, Relation("kw", k), v)

    def run(self):
        """Run the program once. `started`/`finished` tell the caller whether an exception
        came before the program ran, from the program, or after it returned `result`."""
        seat_gc_callbacks()
        outer = active_monitor.replace(self)  # garbage collections pause it (gc_pause.py)
        try:
            with self.recorder, make_tracer(self._call_event, self.stop):
                self.started = True
                self.result = self.fn(*self.args, **self.kwargs)
                self.finished = True
                if torch_settings.sdp_flags() != self.sdp_flags:  # not replayed by a mock
                    self.stop("torch setting changed: SDPA backends")
                return self.result
        finally:
            active_monitor.replace(outer)
            if not self.finished and self.stop_site is None:
                self.stop_site = self.site()  # where the program raised
            self.frame = None  # (a finished frame keeps its locals alive)

    def stop(self, reason, site=None):
        """Stop capture for `reason`, at `site` ("file:line") or the instruction being run."""
        if self.stopped is None:
            self.stopped = reason
            self.stop_site = site or self.site()

    def site(self, program=False):
        """`file:line` of the program's instruction being run (its last watched frame), or
        None before the program's first instruction. `program`: of the innermost frame
        outside torch (nn.Parameter's __new__ runs watched: its caller's line names the
        program's statement)."""
        frame = self.frame
        while program and frame is not None and frame.f_back is not None and \
                frame.f_code.co_filename.startswith(_TORCH_DIR):
            frame = frame.f_back
        if frame is None:
            return None
        return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"

    def _call_event(self, frame, event, arg):
        if self.suspend or self.stopped is not None:
            return None
        info = self._infos.get(frame.f_code)
        if info is None:
            info = self._infos[frame.f_code] = analyze(frame.f_code)
        if info is SKIP:
            return None
        frame.f_trace_lines = False
        frame.f_trace_opcodes = True
        return FrameWatch(self, info).safe_trace

    # -- RefGraph helpers -----------------------------------------------------------------
    def _on_external(self, node, holder=None, rel=None):
        if id(node.obj) in self.lifted:
            self.snapshots[node.node_id] = ("type", float)
        else:
            snap = snapshot(node.obj)
            if snap[0] == "array" and holder is not None and (
                    rel.kind in ("args", "kw") and holder.node_id == 0 or
                    self.from_args(holder)):
                # an array the caller passes (an observation): new values every call, no
                # constant of a record; by type (numpy on it, folding it: a stop)
                snap = ("type", type(node.obj))
            self.snapshots[node.node_id] = snap

    def check_lifted(self, values):
        """Stop when a lifted scalar is used by Python code rather than by a torch op."""
        if any(isinstance(v, torch.Tensor) for v in values):
            return  # an operator on a tensor: the op recorder takes the scalar
        for v in values:
            if type(v) is float and id(v) in self.lifted:
                draw = self.drawn.get(id(v))
                self.stop(LIFT_STOP if draw is None else
                          f"host random number used by Python code: {qualname(draw)}")
                return

    def from_args(self, node):
        """Whether `node` is reachable from the call's arguments (version-0 references)."""
        g = self.graph
        if self._arg_reach[0] != len(g.sn):
            queue = [n for r, n in g.root.versions[0].refs.items() if r.kind in ("args", "kw")]
            seen = {n.node_id for n in queue}
            while queue:
                for child in queue.pop().versions[0].refs.values():
                    if child.node_id not in seen:
                        seen.add(child.node_id)
                        queue.append(child)
            self._arg_reach = (len(g.sn), seen)
        return node.node_id in self._arg_reach[1]

    def holder(self, obj):
        """The node of `obj` when it is state from outside the run, else None."""
        node = self.graph.get_node_by_var(obj)
        return node if node is not None and not node.new else None

    external_node = holder

    def const_node(self, obj):
        """A node for an object the guard can hold on to directly (globals dict, cell)."""
        node = self._consts.get(id(obj))
        if node is None:
            node = self.graph.read(self.graph.root, Relation("const", id(obj)), obj,
                                   expand=False)
            self._consts[id(obj)] = node
            if isinstance(obj, dict):
                self.lazy.add(node.node_id)
        return node

    def note_stride_read(self, tensor):
        node = self.holder(tensor)
        if node is not None:
            self.stride_nodes.add(node.node_id)

    def note_tensor_write(self, tensor):
        node = self.holder(tensor)
        if node is not None:
            self.graph.bump(node)

    def add_absent(self, node, name):
        self.absent.setdefault(node.node_id, set()).add(name)

    def read_attr(self, obj, name, result):
        """`result = obj.name` happened; add the reference if it is state of `obj`."""
        holder = self.holder(obj)
        if holder is None or isinstance(obj, torch.Tensor):
            return
        if module_dict(obj) is not None:  # one node for `mod.x` and the global `x`
            self.graph.read(self.const_node(obj.__dict__), Relation("global", name), result)
            return
        source = attr_source(obj, name, result)
        if source == "class" and isinstance(obj, type) and type(result) in _CLASS_FLAGS and \
                any(k.__dict__.get(name, _NOT_FOUND) is result for k in obj.__mro__):
            # A flag, number or container on a class (whisper's `MultiHeadAttention.use_sdpa`,
            # set by its disable_sdpa()): state like an instance attribute, so it is guarded.
            self.graph.read(holder, Relation("attr", name), result)
            return
        if source == "attr":
            # An instance __dict__ is a namespace: its keys are read one by one.
            lazy = name == "__dict__" and isinstance(result, dict)
            node = self.graph.read(holder, Relation("attr", name), result, expand=not lazy)
            if lazy:
                self.lazy.add(node.node_id)
        elif source == "class" and hasattr(obj, "__dict__") and not isinstance(obj, type):
            self.add_absent(holder, name)
            if type(result) in _CLASS_FLAGS:  # `self.use_flash`, `self.cfg[k]` on the class
                cls = self.graph.read(holder, Relation("attr", "__class__"), type(obj))
                self.graph.read(cls, Relation("attr", name), result)

    def write_attr(self, obj, name, value, delete=False):
        holder = self.holder(obj)
        if holder is None:
            return
        setter = type(obj).__delattr__ if delete else type(obj).__setattr__
        if isinstance(setter, types.FunctionType):
            return  # a Python __setattr__ runs under the monitor and does the real write
        if delete and setter is object.__delattr__:
            setter = object.__setattr__
        if setter in (type.__setattr__, type.__delattr__) and isinstance(obj, type) and \
                obj.__flags__ & _HEAPTYPE:  # a class statement's class: as an object's
            setter = object.__setattr__
        if setter is not object.__setattr__ and not isinstance(obj, types.ModuleType):
            self.stop(f"attribute write through native __setattr__ of {type(obj).__name__}")
            return
        if module_dict(obj) is not None:
            # `warnings.filters = ...` and the module's own code reading the global `filters`
            # are one reference: its globals dict's item (else a read after the write looks
            # like an outside read, and the guard checks the run's value against the old one)
            self.graph.write(self.const_node(obj.__dict__), Relation("global", name), value,
                             delete=delete)
            return
        self.graph.write(holder, Relation("attr", name), value, delete=delete)

    def write_item(self, container, key, value, delete=False):
        holder = self.holder(container)
        if holder is None or isinstance(container, torch.Tensor):
            return
        if type(container).__setitem__ is not getattr(builtin_base(container), "__setitem__", None):
            return  # a Python __setitem__ runs under the monitor
        if isinstance(container, dict):
            self.graph.write(holder, Relation("item", key), value, delete=delete)
        else:
            self.rewrite(holder)

    def read_key(self, container, key, present):
        """The program looked `key` up in a namespace dict (a lazily expanded node)."""
        node = self.graph.get_node_by_var(container)
        if node is None or node.node_id not in self.lazy:
            return
        if present:
            self.graph.read(node, Relation("item", key), dict.__getitem__(container, key))
        else:
            self.add_absent(node, key)

    def expand_lazy(self, node):
        """A namespace dict used as a whole (iterated, copied): guard all of it."""
        self.lazy.discard(node.node_id)
        for k, v in list(dict.items(node.obj)):
            self.graph.read(node, Relation("item", k), v)

    def rewrite(self, node):
        self.graph.bump(node)
        node.rewrite = True

    # -- calls ----------------------------------------------------------------------------
    def before_call(self, fn, args, kw_values=()):
        """Apply `fn`'s annotation; returns a post-call action or None."""
        same = torch_settings.unchanged(fn, args, kw_values)
        if same is not None or any(fn is f for f in torch_settings.BALANCED):
            if same is False and not torch_settings.is_sdp_setter(fn):
                self.stop(f"torch setting changed: {qualname(fn)}")
            return None
        script = script_calls.native_call(fn, args)
        if script is not None:  # a Python wrapper of TorchScript's __call__ calls the native
            fn, args = script
            if type(fn) is not torch.jit.ScriptFunction:  # a ScriptMethod: as called directly
                self.stop(f"unannotated native call: {qualname(fn)}")
                return None
            return self._torch_call(fn, args, kw_values)
        stream = annotations.draw_stream(fn, args)
        if stream is not None:
            if self.lifted:
                self.check_lifted(args)
            return self._draw(fn, stream, args, kw_values)
        ann = annotations.lookup(fn)
        if ann is None:
            self.stop(f"unannotated native call: {qualname(fn)}")
            return None
        if ann is annotations.FOLLOW:
            return None
        if self.lifted and not ann.as_op and not (fn is float and len(args) == 1):
            self.check_lifted(args)  # (float() of a float is that float)
        if self.symbolic and not ann.as_op and not keeps_references(fn):
            bake_all(args)  # a native computes with the value: it leaves the graph
            bake_all(kw_values)
        if not ann.pure:
            self.stop(f"impure call: {qualname(fn)}")
            return None
        if ann.numbers_only:
            bad = self._not_a_number(list(args) + list(kw_values))
            if bad is not None:
                self.stop(f"numpy call on {bad}: {qualname(fn)}")
            else:  # arrays of tensor data: traced through numpy's protocols (numpy_ops.py)
                bad = numpy_ops.native_on_traced(fn, list(args) + list(kw_values))
                if bad is not None:
                    self.stop(bad)
            return None
        for pos in ann.inplace:
            if pos < len(args) and not isinstance(args[pos], _IMMUTABLE_VALUES):
                # (operator.iadd on an int makes a new int: nothing is updated in place)
                node = self.holder(args[pos])
                if node is not None:
                    if not isinstance(args[pos], _MUTABLE):
                        self.stop(f"in-place update of a {type(args[pos]).__name__} "
                                  f"from outside by {qualname(fn)}")
                    self.rewrite(node)
        if ann.relation is not None:
            if kw_values and ann.relation == "variable":
                self.stop("torch.autograd.Variable with keywords")
                return None
            if ann.relation == "weakref":
                args = [fn]  # calling the weak reference itself
            return self._relation_call(ann.relation, args)
        for a in args:
            node = self.graph.get_node_by_var(a) if isinstance(a, dict) else None
            if node is not None and node.node_id in self.lazy:
                name = getattr(fn, "__name__", "")
                if name in ("get", "__getitem__", "__contains__", "pop", "setdefault") and \
                        a is args[0] and len(args) > 1 and hashable_key(args[1]):
                    self.read_key(a, args[1], args[1] in a)
                else:
                    self.expand_lazy(node)
        if ann.as_op:
            return self._torch_call(fn, args, kw_values)
        calls = self.recorder.calls
        if ann.value_read and any(isinstance(a, torch.Tensor) for a in args):
            return lambda out: self._check_value_read(fn, calls)
        if type(fn) is functools._lru_cache_wrapper and plain_values(list(args)) and \
                plain_values(list(kw_values)):
            return self._cached_result
        return None

    def _torch_call(self, fn, args, kw_values):
        """A call of torch's (annotated as an operator): the op recorder records what it
        runs; else a post-call check that it did."""
        traced = numpy_ops.from_numpy_call(self, fn, args)  # torch.from_numpy(array)
        if traced is None:
            traced = script_calls.script_call(self, fn, args, kw_values)
        if traced is not None:
            return traced
        calls = self.recorder.calls
        return lambda out: self._check_torch_call(fn, calls, out)

    def _draw(self, fn, stream, args, kw_values):
        """A host random draw (annotations.DRAW). The mock calls `fn` with the same
        arguments (constants of the record) before its graph; a float result is a graph
        input like a lifted float (Python code using it stops: check_lifted). The stream's
        object is guarded by identity."""
        if args and args[0] is stream:  # (the method's object comes first)
            args = args[1:]
        fn = getattr(stream, fn.__name__)  # the bound method, called by the mock
        if kw_values or not plain_values(list(args)) or \
                any(id(a) in self.lifted for a in args):
            self.stop(f"host random numbers with computed or keyword arguments: "
                      f"{qualname(fn)}")
            return None
        holder = self.holder(stream)
        if holder is not None:
            self.snapshots[holder.node_id] = ("is", stream)

        def after(out):
            if type(out) is not float:
                self.stop(f"host random numbers as a {type(out).__name__}: {qualname(fn)}")
                return
            self.draws.append((fn, tuple(args), out))
            self.drawn[id(out)] = fn
            self.lifted[id(out)] = out
        return after

    def _cached_result(self, out):
        """After an `lru_cache` call on plain values (numbers, strings, dtypes, devices):
        a tensor it returned from its cache (made before this run, so no op made it) is
        what every call with these arguments gets, the same object while it is cached
        (an equal one, the function being pure, once evicted). The guard holds it as a
        constant root, and the graph takes it as an input (transformers' DINOv3-ViT caches
        its patch coordinates: with the cache filled by an earlier eager call, capture
        stopped at "tensor of unknown origin"). On a cache miss the function's body ran
        watched and its ops are in the graph."""
        for t in out if type(out) in (tuple, list) else (out,):
            if isinstance(t, torch.Tensor) and id(t) not in self.recorder.nodes and \
                    self.graph.get_node_by_var(t) is None:
                self.const_node(t)

    def _not_a_number(self, values, depth=3):
        """What in `values` numpy must not compute with (a tensor, an array from outside
        the run, whose contents no guard checks), or None."""
        for v in values:
            if isinstance(v, torch.Tensor):
                return "a tensor"
            if type(v).__module__ == "numpy" and getattr(v, "ndim", 0) and \
                    self.unguarded_array(v):
                return "an array from outside"  # (one guarded by value is a constant)
            if depth and isinstance(v, (list, tuple)):
                bad = self._not_a_number(v, depth - 1)
                if bad is not None:
                    return bad
        return None

    def unguarded_array(self, arr):
        """Whether ndarray `arr` is (a view of) an array from outside whose contents no
        guard checks (guards.snapshot guards small ones by value)."""
        for _ in range(16):
            holder = self.holder(arr)
            if holder is not None and self.snapshots.get(holder.node_id, ("",))[0] != "array":
                return True
            arr = getattr(arr, "base", None)
            if arr is None or type(arr).__module__ != "numpy":
                return False
        return True

    def _check_torch_call(self, fn, calls, out):
        if self.recorder.calls == calls:
            self.stop(f"torch native not seen by the op recorder: {qualname(fn)}")

    def _check_value_read(self, fn, calls):
        if self.recorder.calls == calls:
            self.stop(f"native call reads tensor values: {qualname(fn)}")

    def _relation_call(self, relation, args):
        if relation in ("getattr", "hasattr") and len(args) >= 2 and isinstance(args[1], str):
            obj, name = args[0], args[1]

            def after(out):
                holder = self.holder(obj)
                if relation == "getattr":
                    self.read_attr(obj, name, out)
                    d = getattr(obj, "__dict__", None)
                    if holder is not None and isinstance(d, dict) and name not in d and \
                            not any(name in k.__dict__ for k in type(obj).__mro__):
                        self.add_absent(holder, name)  # getattr(obj, name, default)
                    return
                if holder is None or isinstance(obj, torch.Tensor):
                    return
                d = getattr(obj, "__dict__", None)
                if isinstance(d, dict) and name in d:
                    self.graph.read(holder, Relation("attr", name), d[name])
                elif not out and isinstance(d, dict):
                    self.add_absent(holder, name)
            return after
        if relation in ("setattr", "delattr") and len(args) >= 2:
            # Through the type's __setattr__/__delattr__: a Python one runs under the monitor.
            self.write_attr(args[0], args[1], args[2] if len(args) > 2 else None,
                            delete=relation == "delattr")
            return None
        if relation in ("object_setattr", "object_delattr") and len(args) >= 2:
            holder = self.holder(args[0])
            if holder is not None:
                self.graph.write(holder, Relation("attr", args[1]),
                                 args[2] if len(args) > 2 else None,
                                 delete=relation == "object_delattr")
            return None
        if relation == "weakref" and args:
            ref = args[0]

            def deref(out):
                holder = self.holder(ref)
                if holder is not None:
                    self.graph.read(holder, Relation("ref"), out)
            return deref
        if relation == "variable" and len(args) == 1:
            src = args[0]
            return lambda out: self.recorder.record_detach(out, src)
        if relation == "make_subclass" and len(args) >= 2:  # nn.Parameter(data) in forward
            src = args[1]
            return lambda out: self._made_subclass(out, src)
        if relation == "vars" and args:
            obj = args[0]
            return lambda out: self.read_attr(obj, "__dict__", out)
        if relation == "dir":  # dir() without arguments: the caller's local names
            return (lambda out: self._dir_read(args[0])) if args else None
        self.stop(f"relation call with unexpected arguments: {relation}")
        return None

    def _made_subclass(self, out, src):
        """`out = torch.Tensor._make_subclass(cls, src, requires_grad)` returned: a detached
        alias of `src` of class `cls`, made again by the mock on every call as eager does.
        One that requires grad in a call under grad mode is a leaf autograd must reach from
        the ops that use it, which one graph cannot make: capture stops, naming the line."""
        site = self.site(program=True)
        if isinstance(out, torch.Tensor) and out.requires_grad and (
                self.grad_mode or torch.is_grad_enabled()):
            self.stop(f"new {type(out).__name__} requiring grad made under grad mode "
                      "(a leaf of autograd inside the graph)", site)
            return
        self.recorder.record_detach(out, src)
        if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
            self.subclassed[id(out)] = (weakref.ref(out), site)

    def made_subclass_at(self, tensor):
        """Where the run made `tensor` with _make_subclass ("file:line"), or None."""
        entry = self.subclassed.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def _dir_read(self, obj):
        """`dir(obj)` returned: its names come from the class (not mutated) and the
        instance `__dict__`, guarded whole (its keys). A Python `__dir__` ran watched."""
        d = getattr(obj, "__dict__", None)
        if isinstance(obj, types.ModuleType):
            if self.holder(obj) is not None:
                self.expand_lazy(self.const_node(d))
            return
        if isinstance(obj, type) or not isinstance(d, dict) or \
                isinstance(type(obj).__dir__, types.FunctionType):
            return
        self.read_attr(obj, "__dict__", d)
        node = self.graph.get_node_by_var(d)
        if node is not None and node.node_id in self.lazy:
            self.expand_lazy(node)

    def new_function(self, fn):
        self._new_funcs[id(fn)] = fn

    def is_new_function(self, fn):
        return id(fn) in self._new_funcs
