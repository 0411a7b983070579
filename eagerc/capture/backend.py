"""The one seam between capture and the compiler: an FX graph in, a callable out."""


def _compile_graph(gm, example_inputs):
    """Compile `gm` (a torch.fx.GraphModule) for `example_inputs` with TorchInductor.

    The callable takes the graph inputs positionally and returns the outputs as a sequence.
    """
    from torch._inductor.compile_fx import compile_fx  # heavy: imported on first compile

    return compile_fx(gm, list(example_inputs))


def _compile_graph_symbolic(gm, example_inputs, dynamic_dims, backend=None):
    """Compile `gm` with symbolic sizes for `dynamic_dims[i]` of input i (paper §6.2.1).

    The inputs become fake tensors of one ShapeEnv (dims of size >= 2 marked dynamic, the rest
    static); the graph is first run on them (every size the ops need, e.g. for broadcasting
    against a constant shape, becomes a guard), then compiled: by Inductor on the fake inputs
    (its own shape decisions add guards to the same ShapeEnv), or by `backend(gm, inputs)`.
    Returns `(fn, shape_ok)`: `shape_ok(inputs)` evaluates all guards the ShapeEnv produced
    (sizes, strides, storage offsets of every input, the symbols' ranges such as `2 <= s0`),
    so a call never reaches the compiled graph with a shape it was not compiled for.
    """
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (SYMPY_INTERP, DimDynamic, ShapeEnv,
                                                       StatelessSymbolicContext)

    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    fakes = []
    for t, dims in zip(example_inputs, dynamic_dims):
        ctx = StatelessSymbolicContext(dynamic_sizes=[
            DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC for d in range(t.dim())])
        fakes.append(mode.from_tensor(t, symbolic_context=ctx))
    with mode:
        gm(*fakes)
    if backend is None:
        from torch._inductor.compile_fx import compile_fx

        with tracing(TracingContext(mode)):
            fn = compile_fx(gm, fakes)
    else:
        fn = backend(gm, list(example_inputs))
    code = shape_env.produce_guards_expression(fakes, ignore_static=False)
    if code is None:
        return fn, lambda inputs: True
    names = [f"t{i}" for i in range(len(fakes))]
    compiled = compile(code, "<eagerc.capture shape guards>", "eval")

    def shape_ok(inputs):
        return eval(compiled, SYMPY_INTERP, {"L": dict(zip(names, inputs))})

    shape_ok.source = code
    return fn, shape_ok
