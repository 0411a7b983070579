"""Training records: a recorded forward whose inputs require grad, compiled through
AOTAutograd as torch.compile does (joint forward/backward traced once, partitioned into a
forward and a backward graph, each compiled by the record's backend).

The compiled function returned here is called by the record's mock like any compiled
graph; with grad mode on its outputs carry an autograd node whose backward runs the
compiled backward graph, so `loss.backward()` after a captured call fills `.grad` as eager
does. Input mutations (BatchNorm's running statistics in train mode) are applied by
AOTAutograd's epilogue. Random ops (dropout) follow torch.compile's semantics: with
Inductor, its own philox-seeded lowering draws the mask in the forward and the backward
reuses it (saved); with the eager backend the ATen ops draw from torch's generator as eager
does. `autograd.Function.apply` is one node of the recorded graph (monitor.py): AOTAutograd
traces its forward and its own backward into the joint graph.
"""
import torch

from .capture_stop import CaptureStop
from .torch_calls import tensors_in


def needs_autograd(example_inputs):
    """Whether a graph on these inputs must be differentiable (compiled by `compile_joint`)."""
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def _boxed(fn):
    """AOTAutograd calls compiled graphs with one list of inputs."""
    def run(args):
        out = fn(*args)
        args.clear()
        return out
    run._boxed_call = True
    return run


def compile_joint(gm, example_inputs, compile_graph, inductor):
    """`gm` compiled for training. `compile_graph(gm, inputs) -> fn(*inputs) -> outputs`
    compiles each of the forward and backward graphs AOTAutograd makes (ATen graphs);
    `inductor`: use Inductor's decompositions and its min-cut partitioner (what
    torch.compile's default backend does), else the graphs keep the ops the program called
    (torch.compile's "aot_eager")."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    def compiler(g, inputs):
        return _boxed(compile_graph(g, list(inputs)))

    def bw_compiler(g, inputs):
        _drop_dead_random(g)
        if not inductor:
            _views_as_reshapes(g)
        return compiler(g, inputs)

    decompositions, partition = None, default_partition
    if inductor:
        from torch._inductor.decomposition import select_decomp_table
        # Inductor's decompositions ask its lowerings (max_pool2d_with_indices asks
        # `torch._inductor.lowering.should_fallback_max_pool_with_indices`), which only
        # compile_fx imports: without it a ResNet's joint trace failed (AttributeError).
        import torch._inductor.lowering  # noqa: F401
        decompositions, partition = select_decomp_table(), min_cut_rematerialization_partition
    _traceable(gm)
    # (gm holds no parameters: they are graph inputs, so the result takes *inputs)
    with _no_mkldnn_lstm(gm):
        return aot_module_simplified(gm, list(example_inputs), fw_compiler=compiler,
                                     bw_compiler=bw_compiler, partition_fn=partition,
                                     decompositions=decompositions,
                                     keep_inference_input_mutations=True)


# Recurrent layers whose whole sequence is one ATen call. AOTAutograd decomposes them into
# per-time-step cells and traces their backward step by step (a 2-layer nn.LSTM over 10
# steps: ~1,600 traced ops, 10-25 s on the dev machine, growing with the sequence), so a
# training graph holding one runs as recorded with eager autograd instead, as torch.compile
# leaves RNN modules to eager (Dynamo's allow_rnn=False).
_RNN_OPS = frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu"})


def has_rnn(gm):
    """Whether the recorded graph calls a whole-sequence recurrent op (see _RNN_OPS)."""
    return any(node.op == "call_function" and
               getattr(node.target, "__name__", None) in _RNN_OPS
               for node in gm.graph.nodes)


def _no_mkldnn_lstm(gm):
    """PyTorch's LSTM decomposition takes oneDNN's inference kernel (`mkldnn_rnn_layer`,
    train=False) when the LSTM's input does not require grad, even where its weights do
    (PyG's Set2Set feeds zeros): on fake tensors it returns a workspace, which the forward
    graph saves for the backward, but the real kernel returns none, and every call failed
    in AOTAutograd's runtime. Tracing such a graph with oneDNN off decomposes the LSTM into
    ATen ops that autograd differentiates (the flag is back on when the graph runs)."""
    import contextlib
    lstm = any(node.op == "call_function" and "lstm" in getattr(node.target, "__name__", "")
               for node in gm.graph.nodes)
    return torch.backends.mkldnn.flags(enabled=False) if lstm else contextlib.nullcontext()


def _drop_dead_random(gm):
    """The partitioner can leave a copy of a forward's random op in the backward graph with
    no user (vit-pytorch's patch dropout: `randn(...).topk(k).indices`); graph DCE keeps it,
    random ops being impure. Run op by op it drew again, moving torch's generator past the
    numbers eager's next step draws: every later step's mask differed from eager's. Eager's
    backward draws nothing, so an unused out-of-place random op there is dropped."""
    changed = False
    for node in reversed(list(gm.graph.nodes)):
        target = node.target
        if node.op == "call_function" and not node.users and \
                isinstance(target, torch._ops.OpOverload) and \
                torch.Tag.nondeterministic_seeded in target.tags and \
                not target._schema.is_mutable:
            gm.graph.erase_node(node)
            changed = True
    if changed:
        gm.recompile()


def _views_as_reshapes(gm):
    """A backward graph run op by op (the eager backend): its `view`s were traced on fake
    tensors, whose strides follow the meta functions; a real CPU kernel may lay out an
    intermediate otherwise (LaRA-mini's `softplus_backward` output), and `view` then raises
    where `reshape` copies. The backward graph is functional and returns gradients (no
    output aliases anything), so a copy instead of a view changes no value."""
    aten = torch.ops.aten
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in (aten.view.default,
                                                          aten._unsafe_view.default):
            node.target = aten.reshape.default
            changed = True
    if changed:
        gm.recompile()


# -- ops whose meta function refuses what their eager kernel computes ----------------------
def grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    """`torch._grouped_mm` in a graph AOTAutograd traces. Its meta function (run on fake
    tensors by the trace) accepts bfloat16 only, while the CPU kernel computes float32 too,
    and transformers' MoE experts call it on float32 CPU weights unless Dynamo is compiling
    (they take a custom-op path then). Here each row of a 2-D `a` is multiplied by its
    group's matrix of a 3-D `b` (the group of row m: the number of offsets <= m), without
    reading `offs` in Python, so the graph is one graph for any split of the rows; autograd
    derives the backward from these ops. Rows past the last offset, which eager leaves
    uninitialized, are zero. bfloat16 and other forms call the op itself."""
    if a.dtype == torch.bfloat16 and b.dtype == torch.bfloat16 or not (
            a.dim() == 3 and b.dim() == 3 and offs is None or
            a.dim() == 2 and b.dim() == 3 and offs is not None):
        return torch._grouped_mm(a, b, offs=offs, bias=bias, out_dtype=out_dtype)
    if offs is None:
        out = torch.bmm(a, b)
        if bias is not None:
            out = out + bias.unsqueeze(-2)
    else:
        rows = torch.arange(a.shape[0], device=a.device, dtype=offs.dtype)
        group = torch.searchsorted(offs, rows, right=True)
        inside = group < b.shape[0]
        group = group.clamp(max=b.shape[0] - 1)
        out = torch.bmm(a.unsqueeze(1), b[group]).squeeze(1)
        if bias is not None:
            out = out + bias[group]
        out = torch.where(inside.unsqueeze(1), out, out.new_zeros(()))
    return out if out_dtype is None else out.to(out_dtype)


_TRACEABLE = {}  # graph target -> a function AOTAutograd can trace in its place
if hasattr(torch, "_grouped_mm"):
    _TRACEABLE[torch._grouped_mm] = grouped_mm
    if hasattr(torch.nn.functional, "grouped_mm"):
        _TRACEABLE[torch.nn.functional.grouped_mm] = grouped_mm


def _traceable(gm):
    """Swap, in place, graph targets whose meta functions refuse what eager computes."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _TRACEABLE:
            node.target = _TRACEABLE[node.target]
            changed = True
    if changed:
        gm.recompile()


# -- autograd.Function.apply under grad: one node of the recorded graph ------------------
_APPLY = torch.autograd.function.Function.apply.__func__
_APPLY_TARGETS = {}  # autograd.Function subclass -> the graph target calling its apply


def function_applied(fn, args):
    """(the autograd.Function subclass, its arguments) when `fn(*args)` is
    `SomeFunction.apply(...)`, else None. The call is seen either as the bound classmethod
    or, after LOAD_METHOD, as the plain function with the class first."""
    if getattr(fn, "__func__", None) is _APPLY and isinstance(fn.__self__, type):
        return fn.__self__, list(args)
    if fn is _APPLY and args and isinstance(args[0], type):
        return args[0], list(args[1:])
    return None


def _apply_target(cls):
    """A plain function calling `cls.apply`, named after the class (graph source names it,
    and a graph's code is part of its cache key)."""
    target = _APPLY_TARGETS.get(cls)
    if target is None:
        def target(*args):
            return cls.apply(*args)
        target.__module__ = cls.__module__
        target.__name__ = target.__qualname__ = \
            f"{cls.__qualname__.replace('.', '_').replace('<', '_').replace('>', '_')}_apply"
        _APPLY_TARGETS[cls] = target
    return target


def record_function_apply(mon, cls, args, kw_values, set_post):
    """A custom autograd.Function applied with grad mode on to a tensor that requires grad:
    its forward is not followed (the ops inside would give AOTAutograd a backward derived
    from them, not the Function's own); the call is one graph node, through which
    AOTAutograd traces the forward and the Function's backward. True when the call was
    taken (the caller then runs it opaque), False to follow it as any Python code (no grad:
    the forward's ops are the graph's, as under no_grad)."""
    if not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors_in(list(args))):
        return False
    if kw_values:
        mon.stop("autograd.Function.apply with keyword arguments")
        return True
    rec = mon.recorder
    try:
        fx_args = rec._to_fx(tuple(args))
    except CaptureStop as e:
        mon.stop(str(e))
        return True
    target = _apply_target(cls)

    def after(out):
        node = rec.graph.call_function(target, fx_args)
        if not rec._bind(out, node):
            mon.stop(f"autograd.Function returned a {type(out).__name__}")
    set_post(after)
    return True
