"""A kernel's outputs carry eager's strides, size-1 dims included.

The strides of a size-1 dim do not move any data, but they are not free: c10 reads them to
suggest a tensor's memory format (``is_channels_last_strides_2d`` compares dim 0's stride
with the others'), and ops decide their layout from it (group_norm's
``input.contiguous(input.suggest_memory_format())``, TensorIterator's fast paths). Torch's
meta functions, which a traced graph's outputs follow, do not always give eager's strides
there: ``x / 2`` of a (1, 16, 4, 4) tensor with strides (16, 1, 64, 16) is (16, 1, 64, 16)
in eager and (256, 1, 64, 16) on meta, which reads as channels-last where eager's does not.

Eager's kernel runs once per miss anyway (eagerc/per_op/eager_rules.py); its outputs'
sizes and strides come here, and each traced output whose strides differ from eager's
only at static size-1 dims is marked with eager's strides there. Inductor gives an output
the traced value's stride order, and at size-1 dims whatever stride that order gives;
while eagerc compiles, its graph output step hands a marked output back as a view of its
buffer with eager's strides at those dims (eager_output_strides), so the kernel returns
eager's strides without moving data.

A size-1 dim's stride is written as the output's own stride at another dim times that
dim's size (or 1), which is what eager's dense layouts give it; the kernel then serves
every call of its signature (sizes symbolic) with the stride eager gives each. A stride
that is no such product (a clone of an input whose size-1 dim had an arbitrary stride) is
left as the meta function gives it.
"""
from __future__ import annotations

import contextlib
import logging

import torch

log = logging.getLogger("eagerc")


def fresh_output_layouts(op, result) -> tuple:
    """(sizes, strides) of each output of `result` (eager's result of `op`) that the traced
    graph returns: the returns that alias no argument, or the tensors of a returned list;
    None for a return that is not a tensor."""
    schema = op._schema
    if len(schema.returns) == 1 and isinstance(schema.returns[0].type, torch._C.ListType):
        outs = list(result)
    else:
        outs = result if isinstance(result, tuple) else (result,)
        outs = [outs[i] for i, ret in enumerate(schema.returns) if ret.alias_info is None]
    return tuple((tuple(t.shape), t.stride()) if isinstance(t, torch.Tensor) and t.layout == torch.strided
                 else None for t in outs)


# The fx node meta key under which a traced output carries its size-1 dims' strides:
# ((dim, k), ...), the stride at `dim` being the output's stride at dim k times its size at
# k (k = -1: the stride is 1).
META_KEY = "eagerc_size1_strides"


def match_eager_strides(gm, eager_layouts) -> None:
    """Mark the traced outputs of `gm` whose strides differ from eager's only at static
    size-1 dims with eager's strides there (`eager_layouts`: fresh_output_layouts of eager's
    result for the call traced; None: eager did not run). The marks take effect while
    Inductor compiles the graph under eager_output_strides()."""
    if not eager_layouts:
        return
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if len(outputs) != len(eager_layouts):
        return
    for node, eager in zip(outputs, eager_layouts):
        val = getattr(node, "meta", {}).get("val")
        if eager is None or not isinstance(val, torch.Tensor) or val.layout != torch.strided:
            continue
        rules = _size1_rules(val, *eager)
        if rules:
            node.meta[META_KEY] = rules


def _size1_rules(val, eager_sizes, eager_strides):
    """((dim, k), ...) giving `val` eager's strides at its static size-1 dims, or () when
    nothing should change."""
    sizes = [_hint(s) for s in val.shape]
    strides = [_hint(s) for s in val.stride()]
    if None in sizes or None in strides or sizes != list(eager_sizes) or 0 in sizes:
        return ()
    ones = [d for d, s in enumerate(val.shape) if isinstance(s, int) and s == 1]
    if all(strides[d] == eager_strides[d] for d in ones):
        return ()
    if any(strides[d] != eager_strides[d] for d in range(len(sizes)) if sizes[d] > 1):
        return ()  # a layout of its own (not eager's): left to the code generator
    rules = []
    for d in ones:
        if strides[d] != eager_strides[d]:
            k = _as_product(d, sizes, eager_strides)
            if k is None:
                log.debug("eagerc: an output's size-1 dim %d has eager's stride %d, no product "
                          "of its layout; left as traced (%d)", d, eager_strides[d], strides[d])
                continue
            rules.append((d, k))
    return tuple(rules)


@contextlib.contextmanager
def eager_output_strides():
    """While active, Inductor's graph output step hands back each output marked by
    match_eager_strides as a view of its buffer with the marked strides at its size-1 dims
    (the same bytes: a size-1 dim's stride moves no data)."""
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V

    original = GraphLowering.output

    def output(self, target, args, kwargs):
        nodes = V.graph.current_node.args[0]
        nodes = nodes if isinstance(nodes, (tuple, list)) else (nodes,)
        result = original(self, target, args, kwargs)
        for i, node in enumerate(nodes):
            rules = getattr(node, "meta", {}).get(META_KEY)
            if rules and i < len(self.graph_outputs):
                self.graph_outputs[i] = _restrided(self.graph_outputs[i], node.meta["val"], rules)
        return result

    GraphLowering.output = output
    try:
        yield
    finally:
        GraphLowering.output = original


def _restrided(out, val, rules):
    """Inductor's output `out` (an IR node) as a view with strides following `rules` at its
    size-1 dims; `out` itself where its layout is not the traced value `val`'s."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V

    if not isinstance(out, (ir.TensorBox, ir.StorageBox, ir.BaseView)) or not ir.is_storage_and_layout(out):
        return out
    storage, layout = ir.as_storage_and_layout(out)
    sizes, strides = list(layout.size), list(layout.stride)
    traced = [s.node.expr if isinstance(s, torch.SymInt) else s for s in val.stride()]
    if len(sizes) != len(traced) or not ir.significant_strides_equal(traced, strides, sizes):
        return out
    for d, k in rules:
        if not V.graph.sizevars.statically_known_equals(sizes[d], 1):
            return out
        strides[d] = 1 if k < 0 else strides[k] * sizes[k]
    view = ir.FixedLayout(layout.device, layout.dtype, layout.size, strides, layout.offset)
    return ir.TensorBox(ir.ReinterpretView(data=storage, layout=view))


def _as_product(d, sizes, strides):
    """The dim k (size > 1) whose stride times size is `strides[d]`, -1 when that stride
    is 1, None when neither holds for exactly one k."""
    if strides[d] == 1:
        return -1
    found = [k for k, n in enumerate(sizes) if n > 1 and strides[k] * n == strides[d]]
    return found[0] if len(found) == 1 else None


def _hint(s):
    if isinstance(s, int):
        return s
    hint = s.node.hint if isinstance(s, torch.SymInt) else None
    return int(hint) if hint is not None else None
