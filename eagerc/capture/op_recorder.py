"""The operator graph: torch calls of a monitored run recorded into a torch.fx graph (§4.3).

`OpRecorder` is a TorchFunctionMode, the AsOpNode rule for every torch API at once: each call
that reaches it (torch.*, torch.nn.functional.*, Tensor methods and operators, factories)
becomes one FX node. Tensor-metadata reads (shape, dtype, size()) are answered eagerly and not
recorded: the guard fixes the metadata. Calls whose result depends on tensor *values*
(`.item()`, `bool(t)`, `.tolist()`) stop capture.

Graph inputs are placeholders for tensors the run read from outside; which outputs the graph
has is decided at the end by the mock (only tensors that outlive the run).

In a symbolic run (§6.2.1) size reads of tensors whose sizes may vary give `SymbolicInt`s
(symbolic.py) that carry graph nodes; passed back to torch ops, their nodes go into the graph.
"""
import operator
import weakref

from typing import NamedTuple

import torch
import torch.fx as fx
from torch.overrides import TorchFunctionMode

from . import numpy_ops, torch_settings
from .capture_stop import CaptureStop
from .fx_targets import as_graph_constant, fx_target
from .speculate import (SPECULATED, equal_as_tensor, eval_dropout, outside_value, read_value,
                        shape_read)
from .symbolic import SymbolicInt, int_value, plain, record_expect
from .torch_calls import (BOOL_QUERIES, CONST_READS, CONSTANTS, META, METADATA_FACTORIES,
                          METADATA_RESULTS, NONDETERMINISTIC, SIZE_READS, STRIDE_META,
                          SYMBOLIC_READS, VALUE_READS, VIEW_ATTRS, fx_nodes, noop_flag_write,
                          UNINITIALIZED, norm_stats_written, storage_id, symbolic_in, tensors_in,
                          written_tensor, func_name, order_dependent_write,
                          value_shaped)


# Calls that differentiate, and the position of their create_graph argument.
_DIFFERENTIATE = {torch.autograd.grad: 4, torch.autograd.backward: 3, torch.Tensor.backward: 3}


# The metaclass of legacy tensor types (torch.FloatTensor, torch.cuda.LongTensor).
_TENSOR_TYPE = type(torch.FloatTensor)

class OpRecorder(TorchFunctionMode):
    """Records torch calls into `self.graph` while a monitor run is active."""

    def __init__(self, monitor, symbolic=False):
        super().__init__()
        self.monitor = monitor
        # Symbolic run: sizes read by Python code become SymbolicInts; `vary` tells, per
        # id(tensor), whether its sizes may vary (made from argument tensors or SymbolicInts).
        self.symbolic = symbolic
        self.live = symbolic  # SymbolicInts record only until the record is built
        self.vary = {}
        self.graph = fx.Graph()
        self.nodes = {}  # id(tensor) -> fx.Node holding its current value
        # Tensors the run made are held weakly (a monitor run frees them when eager does);
        # when one dies its id-keyed entries go, so a new tensor at that id starts clean.
        self.keep = []  # strong references, only for objects that cannot be held weakly
        self._weak = {}
        self.placeholders = []  # (ShadowNode, fx.Node) of graph inputs, in order
        self.calls = 0  # torch calls seen, so the monitor can tell a call reached us
        # Symbolic shapes: id(tensor) -> {(node_id of an outside tensor, dim)} its sizes may
        # depend on (conservatively: every dim of every tensor input of the ops making it);
        # `specialized` collects those whose size the program read (they stay static).
        self.deps = {}
        self.specialized = set()
        # fx nodes whose values are computed from constants only (no graph input, nothing
        # random or uninitialized): the same on every call the record serves, so Python
        # may read them (`if mask.all():` on a mask made by torch.ones(...)).
        self.const = set()
        self.const_memory = {}  # const node -> its tensor's storage (a write there ends it)
        # (fx node, read name, value) of tensor values Python read in a run that speculates
        # (speculate.py): checked after the record's graph instead of stopping capture.
        self.speculated = []
        # The graph writes into an outside tensor, or draws random numbers: a miss after it
        # must undo those before the call runs again (speculate.undo_inputs, save).
        self.outside_write = False
        self.written_storages = set()  # of the outside tensors written (None: no storage)
        self.random = False
        self.random_elsewhere = False
        # The program differentiates with create_graph=True during the call: gradients of
        # gradients may flow through the graphs of this call (graph_compiler.eager_autograd).
        self.higher_order = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        mon = self.monitor
        if mon.stopped is not None or mon.opaque:
            return func(*args, **kwargs)
        self.calls += 1
        mon.suspend += 1
        call = _RealCall(func)
        try:
            return self._handle(func, args, kwargs, call)
        except BaseException as e:
            # The program must see exactly what eager gives: its own call's exception, or
            # its own call's result when the recording around it failed (capture stops).
            if call.started and not call.done:
                raise
            mon.stop(f"monitor error: {type(e).__name__}: {e}")
            if call.done:
                return call.post(call.out)
            return func(*args, **kwargs)
        finally:
            mon.suspend -= 1

    def _note_outside_write(self, tensor):
        storage = storage_id(tensor)
        if storage is None or storage in {storage_id(sn.obj) for sn, _ in self.placeholders
                                          if isinstance(sn.obj, torch.Tensor)}:
            self.outside_write = True
            self.written_storages.add(storage)

    def _handle(self, func, args, kwargs, call):
        name, is_getter = func_name(func)
        if func in _DIFFERENTIATE and (kwargs.get("create_graph") or
                                       len(args) > _DIFFERENTIATE[func] and
                                       args[_DIFFERENTIATE[func]]):
            self.higher_order = True
        if name in ("__set__", "__delete__"):
            if noop_flag_write(func, name, args):
                return call(args, kwargs)
            attr = getattr(getattr(func, "__self__", None), "__name__", "?")
            self.monitor.stop(f"tensor attribute write: {attr}")
            return call(args, kwargs)
        as_detach = is_getter and name == "data"
        if as_detach:  # `t.data` under no_grad: a detached alias, recorded as detach()
            name, is_getter = "detach", False
        if name in SIZE_READS and args and isinstance(args[0], torch.Tensor):
            if name in SYMBOLIC_READS and self.symbolic and self._varies(args[0]):
                out = self._symbolic_size(func, name, args, kwargs, call)
                if out is not None:
                    return out
            self.specialized |= self._deps_of(args[0])
        if name in META or name in STRIDE_META:
            if name in STRIDE_META and args:
                self.monitor.note_stride_read(args[0])
            return call(args, kwargs)
        if name == "grad_fn" and args and self._made_by_run(args[0]):
            # None or not by construction: whether the op's inputs required grad under the
            # grad mode, both fixed by the guard (nn.Parameter checks it, BigBird branches on
            # it). The node object itself is not state a mock can rebuild: storing it or
            # calling its methods stops elsewhere.
            return call(args, kwargs)
        if name in numpy_ops.TENSOR_CALLS:  # t.numpy(), torch.tensor(array): numpy_ops.py
            out = numpy_ops.record_torch_call(self, name, args, kwargs, call)
            if out is not numpy_ops.NOT_TRACED:
                return out
        if name in VALUE_READS:
            if name in CONST_READS and args and self.nodes.get(id(args[0])) in self.const:
                return call(args, kwargs)  # a value made from constants only: a constant
            if name in SPECULATED and self.monitor.speculate and not self.symbolic:
                out = read_value(self, name, args, kwargs, call)
                if call.done:
                    return out
            if name in SPECULATED:
                out = outside_value(self, name, args, kwargs, call)
                if call.done:
                    return out
            self.monitor.stop(f"tensor value read: Tensor.{name}")
            return call(args, kwargs)
        if name == "__iter__" and args and isinstance(args[0], torch.Tensor):
            call.func, call.post = torch.Tensor.unbind, iter
            return iter(self._handle(torch.Tensor.unbind, (args[0], 0), {}, call))
        if is_getter and name not in VIEW_ATTRS:
            self.monitor.stop(f"unknown tensor attribute: Tensor.{name}")
            return call(args, kwargs)
        if name == "scaled_dot_product_attention" and \
                torch_settings.sdp_changed_for(self.monitor.sdp_flags, args, kwargs):
            self.monitor.stop("torch setting changed: SDPA backends")  # another kernel
            return call(args, kwargs)
        try:
            fx_args, fx_kwargs = self._to_fx((args, kwargs))
            target = None if is_getter else ("call_method", "detach") if as_detach \
                else fx_target(func, name)
        except CaptureStop as e:
            self.monitor.stop(str(e))
            return call(args, kwargs)
        if self.symbolic:  # the real call gets plain ints; the graph got their nodes
            out = call(plain(args), plain(kwargs))
        else:
            out = call(args, kwargs)
        if is_getter:
            node = self.graph.call_function(getattr, (fx_args[0], name))
        elif target[0] == "call_method":
            node = self.graph.call_method(target[1], fx_args, fx_kwargs)
        else:
            node = self.graph.call_function(target[1], fx_args, fx_kwargs)
        deps, varies = set(), False
        for a in tensors_in((args, kwargs)):
            deps |= self._deps_of(a)
            varies = varies or self.symbolic and self._varies(a)
        if self.symbolic:
            for a in symbolic_in((args, kwargs)):
                deps |= a.deps
                varies = True
        for o in tensors_in(out):
            self.deps[id(o)] = self.deps.get(id(o), frozenset()) | deps
            if varies:
                self.vary[id(o)] = True
        if name not in NONDETERMINISTIC and not (self.symbolic and any(
                True for _ in symbolic_in((args, kwargs)))) and (
                all(n in self.const for n in fx_nodes((fx_args, fx_kwargs))) or
                name in METADATA_FACTORIES and not self.symbolic and
                all(n in self.const for n in fx_nodes((fx_args[1:], fx_kwargs)))):
            self.const.add(node)  # (ones_like(x): x's metadata, which the guard fixes)
        if not self._bind(out, node) and not self._equal_read(name, args, fx_args, out, node):
            self.monitor.stop(f"non-tensor result of {name}: {type(out).__name__}")
        elif value_shaped(name, args, kwargs):
            shape_read(self, name, out)
        for o in tensors_in(out) if self.const else ():
            if self.nodes.get(id(o)) in self.const:
                self.const_memory[self.nodes[id(o)]] = storage_id(o)
        if name in NONDETERMINISTIC and name not in UNINITIALIZED and \
                not eval_dropout(name, args, kwargs):
            self.random = True
            # Draws the mock can rewind come from the CPU's default generator; another
            # generator, another device's, or a resize/set_ cannot be undone (speculate.py).
            if name in ("set_", "resize_", "seed", "manual_seed") or \
                    kwargs.get("generator") is not None or \
                    any(t.device.type != "cpu" for t in tensors_in(out)):
                self.random_elsewhere = True
        written = written_tensor(name, args, kwargs)
        for w in ([written] if written is not None else []) + \
                norm_stats_written(func, args, kwargs):
            self._note_outside_write(w)
        if written is not None:
            # Kept by dead-code elimination even when its result is unused: the write into
            # an input is the point (build_module).
            node.meta["eagerc_writes"] = True
            if order_dependent_write(name, plain(args), plain(kwargs), written):
                node.meta["eagerc_order_dependent"] = True  # runs as recorded
            self.monitor.note_tensor_write(written)
            if node not in self.const:
                # No constant any more: the written tensor and every view of its memory.
                target = storage_id(written)
                gone = {n for n, m in self.const_memory.items()
                        if m == target or m is None or target is None}
                self.const -= gone
                if self.nodes.get(id(written)) in self.const:
                    self.const.discard(self.nodes[id(written)])
        return out

    def _equal_read(self, name, args, fx_args, out, node):
        """`torch.equal(a, b)` / `a.equal(b)` on tensors the run made (PyG's is_undirected)
        in a run that speculates: a bool Python reads, recorded as a 0-d tensor the mock
        checks after the graph like any value read (speculate.py)."""
        if name != "equal" or type(out) is not bool or not self.monitor.speculate or \
                self.symbolic or len(args) != 2 or \
                not all(self._made_by_run(a) for a in args) or \
                args[0].dtype != args[1].dtype or args[0].device != args[1].device:
            return False
        self.graph.erase_node(node)
        read = self.graph.call_function(equal_as_tensor, tuple(fx_args[:2]))
        self.speculated.append((read, "__bool__", out))
        return True

    def record_detach(self, out, src):
        """`out` is a detached alias of tensor `src` made outside torch's API
        (torch.autograd.Variable(src))."""
        if not isinstance(out, torch.Tensor) or not isinstance(src, torch.Tensor):
            self.monitor.stop("Variable of a non-tensor")
            return
        try:
            node = self.graph.call_method("detach", (self._to_fx(src),))
        except CaptureStop as e:
            self.monitor.stop(str(e))
            return
        self.deps[id(out)] = self._deps_of(src)
        if self.symbolic and self._varies(src):
            self.vary[id(out)] = True
        self._bind(out, node)

    def _made_by_run(self, tensor):
        """A tensor a recorded op of the run made (not a graph input)."""
        node = self.nodes.get(id(tensor))
        return node is not None and node.op != "placeholder"

    def _bind(self, out, node):
        """Make `out` (a tensor, a tuple of tensors or None) refer to `node`."""
        if isinstance(out, torch.Tensor):
            self.nodes[id(out)] = node
            self._hold(out)
            return True
        if out is None:
            return True
        if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) or o is None
                                                  for o in out):
            for i, o in enumerate(out):
                if o is not None:  # (attention output, None): the None is a constant
                    item = self.graph.call_function(operator.getitem, (node, i))
                    if node in self.const:
                        self.const.add(item)
                    self._bind(o, item)
            return True
        if isinstance(out, METADATA_RESULTS) or \
                isinstance(out, bool) and node.target in BOOL_QUERIES:
            return True  # decided by the metadata the guard checks: a constant of the record
        return False

    def _to_fx(self, value):
        """Replace tensors by graph nodes; keep values FX can embed as constants."""
        if isinstance(value, torch.Tensor):
            node = self.nodes.get(id(value))
            if node is None:
                node = self._placeholder(value)
            return node
        if isinstance(value, SymbolicInt):
            return value.node if value.rec is self and self.live else int_value(value)
        if isinstance(value, (tuple, list)):
            seq = [self._to_fx(v) for v in value]
            return type(value)(seq) if type(value) in (tuple, list) else tuple(seq)
        if isinstance(value, dict):
            return {k: self._to_fx(v) for k, v in value.items()}
        if type(value) is float and id(value) in self.monitor.lifted:
            node = self.nodes.get(id(value))
            return node if node is not None else self._placeholder(value)
        if type(value) in CONSTANTS or value is None or value is Ellipsis:
            return value
        ok, const = as_graph_constant(value)
        if ok:
            return const
        if numpy_ops.is_plain_array(value):  # (an index, a table): folded, by value
            return numpy_ops.array_node(self, value)
        if isinstance(value, slice):
            return slice(self._to_fx(value.start), self._to_fx(value.stop),
                         self._to_fx(value.step))
        if isinstance(value, _TENSOR_TYPE):  # x.type(torch.FloatTensor): its name says as much
            return f"{value.__module__}.{value.__name__}"
        raise CaptureStop(f"cannot put a {type(value).__name__} into the operator graph")

    def _placeholder(self, tensor):
        """A graph input for an outside tensor (or a lifted float, passed as a 0-d tensor;
        or a host random draw, drawn again by the mock: a DrawInput)."""
        draw = self.monitor.drawn.get(id(tensor)) if type(tensor) is float else None
        sn = self.monitor.external_node(tensor) if draw is None else DrawInput(
            tensor, [d[2] for d in self.monitor.draws].index(tensor))
        if sn is None:
            raise CaptureStop("tensor of unknown origin (not read from outside, not an op "
                              "result)")
        node = self.graph.placeholder(f"in{len(self.placeholders)}")
        self.placeholders.append((sn, node))
        self.nodes[id(tensor)] = node
        self.keep.append(tensor)  # outside state (or a lifted float): alive anyway
        return node

    def _hold(self, tensor):
        key = id(tensor)
        if key in self._weak:
            return
        try:
            self._weak[key] = weakref.ref(tensor, lambda _, key=key: self._forget(key))
        except TypeError:
            self.keep.append(tensor)

    def _forget(self, key):
        for table in (self._weak, self.nodes, self.deps, self.vary):
            table.pop(key, None)

    def _deps_of(self, tensor):
        d = self.deps.get(id(tensor))
        if d is None:
            sn = self.monitor.external_node(tensor)
            d = frozenset((sn.node_id, i) for i in range(tensor.dim())) if sn else frozenset()
        return d

    def node_of(self, tensor):
        return self.nodes.get(id(tensor))

    # -- symbolic sizes (symbolic.py) -----------------------------------------------------
    def _varies(self, tensor):
        """Whether `tensor`'s sizes may differ between calls a symbolic record serves: an
        outside tensor reached from the call's arguments, or one computed from such tensors
        or from SymbolicInts. (A guess only decides which reads get SymbolicInts: every
        other read specializes, and every SymbolicInt's use is recorded or baked.)"""
        v = self.vary.get(id(tensor))
        if v is None:
            if id(tensor) in self.nodes and self.nodes[id(tensor)].op != "placeholder":
                v = False  # made by an op from tensors that do not vary
            else:
                sn = self.monitor.external_node(tensor)
                v = sn is not None and self.monitor.from_args(sn)
            self.vary[id(tensor)] = v
        return v

    def _symbolic_size(self, func, name, args, kwargs, call):
        """`t.size()`, `t.size(d)`, `t.shape`, `t.numel()` as SymbolicInts; None when `t`
        cannot be put into the graph (then the read specializes)."""
        t = args[0]
        try:
            tnode = self._to_fx(t)
        except CaptureStop:
            return None
        out = call(plain(args), plain(kwargs))  # the real answer (or its IndexError)
        deps, g = self._deps_of(t), self.graph
        if name in ("numel", "nelement"):
            return SymbolicInt(out, g.call_method("numel", (tnode,)), self, deps)
        if isinstance(out, int):  # size(d)
            d = int_value(args[1]) if len(args) > 1 else int_value(kwargs["dim"])
            return SymbolicInt(out, g.call_method("size", (tnode, d)), self, deps)
        return torch.Size([SymbolicInt(n, g.call_method("size", (tnode, d)), self, deps)
                           for d, n in enumerate(out)])

    def recording(self):
        return self.live and self.monitor.stopped is None

    def record_int(self, op, operands, value):
        """A SymbolicInt for `value = op(*operands)`, recorded as a graph node."""
        mon = self.monitor
        mon.suspend += 1  # FX's own frames are not the program's
        try:
            node = self.graph.call_function(op, tuple(self._to_fx(a) for a in operands))
            deps = frozenset().union(*(a.deps for a in operands if isinstance(a, SymbolicInt)))
            return SymbolicInt(value, node, self, deps)
        except Exception as e:  # noqa: BLE001 - the program gets the plain value
            mon.stop(f"monitor error: {type(e).__name__}: {e}")
            return value
        finally:
            mon.suspend -= 1

    def record_check(self, op, a, b, result):
        """Record that `op(a, b)` was `result` (a check that becomes a shape guard)."""
        mon = self.monitor
        mon.suspend += 1
        try:
            cond = self.graph.call_function(op, (self._to_fx(a), self._to_fx(b)))
            record_expect(self.graph, cond, result)
        except Exception as e:  # noqa: BLE001 - the check cannot be recorded: no record
            mon.stop(f"monitor error: {type(e).__name__}: {e}")
        finally:
            mon.suspend -= 1


class _RealCall:
    """The program's own call of a torch API inside the recorder: made at most once, so a
    fault of the recording around it can still give the program eager's result."""

    __slots__ = ("func", "started", "done", "out", "post")

    def __init__(self, func):
        self.func, self.started, self.done, self.out = func, False, False, None
        self.post = _identity

    def __call__(self, args, kwargs):
        self.started = True
        self.out = self.func(*args, **kwargs)
        self.done = True
        return self.out


def _identity(x):
    return x


class DrawInput(NamedTuple):
    """A graph input that is the `index`-th host random draw of the run (Monitor._draw)."""
    obj: float
    index: int

    @property
    def node_id(self):  # no RefGraph node: never a guard variable
        return -1 - self.index


def build_module(graph, outputs):
    """A GraphModule returning `outputs` (fx nodes) as a tuple; dead nodes removed, except
    writes into tensors (an in-place op whose result is unused still updates its input)."""
    graph.output(tuple(outputs))
    gm = fx.GraphModule(torch.nn.Module(), graph)
    gm.graph.eliminate_dead_code(
        is_impure_node=lambda n: n.meta.get("eagerc_writes", False) or n.is_impure())
    gm.recompile()
    return gm
