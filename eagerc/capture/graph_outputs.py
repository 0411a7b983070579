"""Graph outputs eagerc's compile/cache layer cannot return, split off so the rest of the
graph still goes through it (and persists in kernel_cache).

A compiled kernel returns fresh tensors. A graph output that is a view of an input (the
transposed weight AOTAutograd's forward saves for the backward), the same tensor as another
output, a view of another output, an input itself or None (the backward's gradient of an
input that needs none) made the whole graph take Inductor's compile_fx instead: no
training graph reached kernel_cache. Here such outputs are rebuilt after the kernel, from
the kernel's outputs and the graph's inputs, by replaying the view ops that made them (an
*epilogue* FX graph of views only: nothing is computed, aliasing is exactly the graph's).
The kernel graph returns each view chain's base once.
"""
import operator

import torch
import torch.fx as fx

# torch-level view methods (recorded inference graphs); ATen graphs say it in the schema.
_VIEW_METHODS = frozenset("""view view_as t transpose permute expand expand_as unsqueeze
    squeeze detach unflatten narrow select as_strided diagonal unbind split chunk
    movedim swapaxes swapdims mT T""".split())


def _is_view(node):
    if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
        return node.target.is_view
    if node.op == "call_function" and node.target is operator.getitem:
        src = node.args[0]
        return isinstance(src, fx.Node) and _is_view(src)  # an item of split(x)
    return node.op == "call_method" and node.target in _VIEW_METHODS


def _chain(node):
    """(base node, view nodes from the base to `node`), or None when a view step takes
    another graph value besides its source (a size computed in the graph)."""
    views = []
    while isinstance(node, fx.Node) and _is_view(node):
        src, rest = node.args[0], (node.args[1:], node.kwargs)
        if not isinstance(src, fx.Node) or _nodes_in(rest):
            return None
        views.append(node)
        node = src
    return node, views[::-1]


def _nodes_in(value):
    out = []
    fx.node.map_arg(value, out.append)
    return out


def split_outputs(gm):
    """(kernel graph module, epilogue) when some outputs must be rebuilt after the kernel;
    None when the graph's outputs can all come from the kernel (or this cannot tell).
    `epilogue(inputs, kernel_outputs) -> outputs` of the original graph."""
    graph = gm.graph
    output = next(n for n in graph.nodes if n.op == "output")
    outs = output.args[0]
    if not isinstance(outs, (list, tuple)):
        return None
    chains, need = [], False
    seen = set()
    for o in outs:
        if not isinstance(o, fx.Node):
            chains.append(None)  # None or a constant: returned as is
            need = True
            continue
        chain = _chain(o)
        if chain is None:
            return None
        base, views = chain
        if views or base.op == "placeholder" or base in seen:
            need = True
        seen.add(base)
        chains.append(chain)
    if not need:
        return None
    bases = []
    for c in chains:
        if c is not None and c[0].op != "placeholder" and c[0] not in bases:
            bases.append(c[0])
    if not bases:
        return None  # nothing computed: nothing for a kernel to return
    kernel = fx.GraphModule(gm, _with_outputs(graph, bases))
    return kernel, _epilogue(graph, outs, chains, bases)


def _with_outputs(graph, bases):
    new = fx.Graph()
    env = {}
    for node in graph.nodes:
        if node.op == "output":
            new.output([env[b] for b in bases])
        else:
            env[node] = new.node_copy(node, lambda n: env[n])
    return new


def _epilogue(graph, outs, chains, bases):
    g = fx.Graph()
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    env = {n: g.placeholder(f"in{i}") for i, n in enumerate(placeholders)}
    for i, b in enumerate(bases):
        env[b] = g.placeholder(f"k{i}")
    results = []
    for o, chain in zip(outs, chains):
        if chain is None:
            results.append(o)
            continue
        for v in chain[1]:
            if v not in env:
                env[v] = g.node_copy(v, lambda n: env[n])
        results.append(env[o])
    g.output(results)
    module = fx.GraphModule(torch.nn.Module(), g)
    n_inputs = len(placeholders)

    def epilogue(inputs, kernel_outputs):
        return list(module(*list(inputs)[:n_inputs], *kernel_outputs))
    return epilogue


def matching_layout(run, gm, example_inputs, for_layout=None):
    """`run` (a static kernel of `gm`, which assumes its inputs' strides and offsets) for
    inputs that may come with another layout. A record's guard checks its graph's inputs,
    but AOTAutograd's backward graph takes the forward's saved tensors, whose layout is the
    forward kernel's choice (Inductor may write a convolution's output channels-last where
    the trace said contiguous). For a layout seen at run time, `for_layout(inputs)` gives a
    kernel compiled for it (once; None if it cannot); failing that, inputs are copied into
    the layout the kernel was compiled for, and a graph writing into such an input runs
    `gm` as recorded (a copy would lose the write)."""
    expect = [(tuple(t.shape), _strides(t.shape, t.stride()), t.storage_offset())
              if isinstance(t, torch.Tensor) else None for t in example_inputs]
    if not any(expect):
        return run
    written = _written_inputs(gm)
    variants = {}  # the layouts of all inputs -> a kernel for them (or None)

    def other_layout(inputs):
        key = tuple((_key(t) if isinstance(t, torch.Tensor) else None) for t in inputs)
        if key not in variants:
            variants[key] = for_layout(inputs) if for_layout is not None else None
        variant = variants[key]
        if variant is not None:
            return variant(*inputs)
        fixed = list(inputs)
        for i, (t, e) in enumerate(zip(inputs, expect)):
            if e is None or not isinstance(t, torch.Tensor) or \
                    _strides(t.shape, t.stride()) == e[1] and t.storage_offset() == e[2]:
                continue
            if i in written or e[2] != 0 or tuple(t.shape) != e[0]:
                return list(gm(*inputs))
            fixed[i] = torch.empty_strided(t.shape, tuple(e[1]), dtype=t.dtype,
                                           device=t.device).copy_(t)
        return run(*fixed)

    exact = [(t.stride(), t.storage_offset()) if isinstance(t, torch.Tensor) else None
             for t in example_inputs]

    def call(*inputs):
        for t, x, e in zip(inputs, exact, expect):
            if x is not None and (t.stride() != x[0] or t.storage_offset() != x[1]) and not (
                    _strides(t.shape, t.stride()) == e[1] and t.storage_offset() == e[2]):
                return other_layout(inputs)
        return run(*inputs)
    return call


def _key(t):
    return tuple(t.shape), tuple(_strides(t.shape, t.stride())), t.storage_offset()


def _strides(shape, strides):
    # a dim of size <= 1 is never stepped along: its stride does not matter
    return [s if n > 1 else 0 for n, s in zip(shape, strides)]


def _written_inputs(gm):
    """Positions of the placeholders an op of `gm` may write into."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    written = set()
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload):
            if target._schema.is_mutable:
                written |= {index[a] for a in _nodes_in((node.args, node.kwargs))
                            if a in index}
        elif node.op in ("call_function", "call_method") and \
                str(getattr(target, "__name__", target)).endswith("_") and \
                not str(getattr(target, "__name__", target)).endswith("__"):
            written |= {index[a] for a in _nodes_in((node.args, node.kwargs)) if a in index}
    return written
