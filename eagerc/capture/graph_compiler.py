"""The one seam between capture and the compiler: an FX graph in, a callable out.

One ladder for every graph, static or with symbolic sizes (`compile_graph`):
1. eagerc's compile/cache service (eagerc/graph_kernels.py): the graph becomes an artifact
   in kernel_cache, shared with the per-op kernels, so a later process recording the same
   graph loads it instead of compiling. Outputs a kernel cannot return (views of inputs or
   of other outputs, repeated outputs, None: AOTAutograd's forward and backward graphs have
   them) are rebuilt after the kernel by graph_outputs.py.
2. Graphs that path refuses (inputs on other devices, graphs that do not trace): Inductor's
   compile_fx.
3. A graph that cannot be compiled at all runs as recorded (the FX graph itself), with a
   warning.
A backend other than Inductor ("eager", a callable) takes the graph directly. A symbolic
graph also gives `shape_ok(inputs)`, the check of every assumption its compilation made.
`GraphCompiler` is a record's backend: training graphs go through AOTAutograd
(training.py), each of their graphs down the same ladder.
"""
import logging

from .graph_outputs import matching_layout, split_outputs

log = logging.getLogger("eagerc")


def _eager_backend(gm, example_inputs):
    return gm


_BACKENDS = {"eager": _eager_backend}


class GraphCompiler:
    """Compiles a record's (or a segment's) graph for one `backend`: "inductor"/None
    (eagerc's compile/cache layer), "eager" or a callable `(gm, example_inputs) -> fn`.
    Counts graphs loaded from disk and training graphs into `stats` (a CaptureStats)."""

    def __init__(self, backend, stats):
        self.backend, self.stats = backend, stats
        self.inductor = backend is None or backend == "inductor"
        # Set once the captured function was seen differentiating with create_graph=True
        # (PyG's EquilibriumAggregation optimizes inside its forward): AOTAutograd's
        # compiled backward cannot be differentiated again, so its training graphs and its
        # child modules' run as recorded, with eager autograd.
        self.eager_autograd = False

    def compile(self, gm, example_inputs):
        """fn(*inputs) -> outputs. With grad mode on and an input requiring grad: forward
        and backward through AOTAutograd, each graph compiled by `compile_static`."""
        from .second_order import twice_differentiable
        from .training import compile_joint, has_rnn, needs_autograd
        if needs_autograd(example_inputs):
            self.stats.training_graph()
            if self.eager_autograd or has_rnn(gm) or order_dependent(gm):
                return gm
            try:
                compiled = compile_joint(gm, example_inputs, self.compile_static, self.inductor)
                return twice_differentiable(compiled, gm, self.inductor, example_inputs)
            except Exception as e:  # noqa: BLE001 - a graph AOTAutograd cannot trace
                # (data-dependent checks: GaussianNLLLoss, CTCLoss). Run as recorded, its
                # ops build eager's autograd graph: eager's gradients, as Dynamo's "eager"
                # backend gives; like an inference graph nothing can compile.
                from eagerc.refusals import error_summary
                log.warning("eagerc.capture: training graph not traced by AOTAutograd (%s); "
                            "it runs as recorded, with eager autograd", error_summary(e))
                return gm
        return self.compile_static(gm, example_inputs)

    def compile_static(self, gm, example_inputs):
        """fn(*inputs) -> outputs, for inputs of exactly these shapes."""
        if order_dependent(gm):
            return gm
        return self._compile(gm, example_inputs, None)[0]

    def compile_symbolic(self, gm, example_inputs, dynamic_dims):
        """(fn, shape_ok) with symbolic sizes for `dynamic_dims` (see compile_graph)."""
        return self._compile(gm, example_inputs, dynamic_dims)

    def _compile(self, gm, example_inputs, dynamic_dims):
        backend = None if self.inductor else self.backend_fn()
        compiled, from_disk = compile_graph(gm, example_inputs, dynamic_dims, backend)
        self.stats.graph_compiled(from_disk)
        return compiled

    def backend_fn(self):
        backend = self.backend
        if isinstance(backend, str):
            try:
                backend = _BACKENDS[backend]
            except KeyError:
                raise ValueError(f"unknown capture backend {backend!r}: use 'inductor', "
                                 f"'eager' or a callable (gm, example_inputs) -> fn") from None
        return backend


def order_dependent(gm):
    """Whether the recorded graph writes into memory it reads through another view
    (`x[:, 1:] = x[:, :-1]`): eager's result depends on its kernel's loop order, which a
    functional compilation (AOTAutograd, Inductor) does not keep, so the graph runs as
    recorded (torch_calls.order_dependent_write)."""
    return any(n.meta.get("eagerc_order_dependent") for n in gm.graph.nodes)


def compile_graph(gm, example_inputs, dynamic_dims=None, backend=None):
    """Compile `gm` (a torch.fx.GraphModule) for `example_inputs`, down the ladder of the
    module docstring; `backend` (not Inductor) takes the graph directly.

    Returns `((fn, shape_ok), from_disk)`. `fn` takes the graph inputs positionally and
    returns the outputs as a sequence. `dynamic_dims`: None for a static graph (`shape_ok`
    is None), else per input the dims compiled as symbolic sizes (paper §6.2.1);
    `shape_ok(inputs)` checks every assumption the compilation made (sizes, strides,
    storage offsets of every input, the symbols' ranges such as `2 <= s0`), so a call never
    reaches the compiled graph with a shape it was not compiled for. On eagerc's path that
    check is C++ inside the artifact.
    """
    from eagerc.refusals import error_summary

    kind = "graph" if dynamic_dims is None else "symbolic graph"
    if backend is None:
        from eagerc.refusals import CompileError

        try:
            return _through_cache(gm, example_inputs, dynamic_dims)
        except CompileError as e:
            log.info("eagerc.capture: %s compiled by compile_fx (%s)", kind, e)
        try:
            return _with_backend(gm, list(example_inputs), dynamic_dims, None), False
        except Exception as e:  # noqa: BLE001 - e.g. a device Inductor has no codegen for
            log.warning("eagerc.capture: %s not compiled (%s); it runs as recorded",
                        kind, error_summary(e))
            backend = _as_recorded
    return _with_backend(gm, example_inputs, dynamic_dims, backend), False


def _through_cache(gm, example_inputs, dynamic_dims):
    """Rung 1: eagerc's compile/cache service. Raises CompileError where it refuses."""
    from torch._subclasses.fake_tensor import FakeTensor

    from eagerc.refusals import CompileError
    from eagerc.graph_kernels import load_or_compile

    def kernel_for(inputs):
        split = split_outputs(gm)
        if split is None:
            kernel = load_or_compile(gm, list(inputs), dynamic_dims)
            return kernel, kernel.run
        kernel_gm, epilogue = split  # outputs a kernel cannot return: rebuilt after it
        kernel = load_or_compile(kernel_gm, list(inputs), dynamic_dims)
        return kernel, _with_epilogue(kernel.run, epilogue)

    kernel, run = kernel_for(example_inputs)
    if dynamic_dims is not None:
        return (run, kernel.guard), kernel.from_disk

    def for_layout(inputs):  # another layout of the inputs: its own kernel, also cached
        try:
            return kernel_for(inputs)[1]
        except CompileError:
            return None

    if any(isinstance(t, FakeTensor) for t in example_inputs):
        # AOTAutograd's graphs (fake inputs): the backward's saved tensors come in the
        # forward kernel's layouts. A record's inputs are checked by its guard.
        run = matching_layout(run, gm, example_inputs, for_layout)
    return (run, None), kernel.from_disk


def _with_backend(gm, example_inputs, dynamic_dims, backend):
    """Rungs 2 and 3: `backend` (None: Inductor's compile_fx) -> (fn, shape_ok)."""
    if dynamic_dims is not None:
        return _compile_fx_symbolic(gm, example_inputs, dynamic_dims, backend)
    if backend is None:
        from torch._inductor.compile_fx import compile_fx  # heavy: imported on first compile
        backend = compile_fx
    return backend(gm, example_inputs), None


def _with_epilogue(run, epilogue):
    def run_all(*inputs):
        return epilogue(inputs, run(*inputs))
    return run_all


def _as_recorded(gm, example_inputs):
    return gm


def _compile_fx_symbolic(gm, example_inputs, dynamic_dims, backend):
    """Inductor's compile_fx (or `backend(gm, inputs)`) on fake inputs of one ShapeEnv (dims
    of size >= 2 marked dynamic, the rest static); the graph is first run on them (every
    size the ops need, e.g. for broadcasting against a constant shape, becomes a guard).
    `shape_ok` evaluates the guards the ShapeEnv produced, in Python."""
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
        backend = compile_fx
    # A backend sees fake inputs with symbolic sizes (as Dynamo hands them to its backends),
    # not the first call's real tensors: it must not specialize to their shapes.
    with tracing(TracingContext(mode)):
        fn = backend(gm, fakes)
    code = shape_env.produce_guards_expression(fakes, ignore_static=False)
    if code is None:
        return fn, lambda inputs: True
    names = [f"t{i}" for i in range(len(fakes))]
    compiled = compile(code, "<eagerc.capture shape guards>", "eval")

    def shape_ok(inputs):
        return eval(compiled, SYMPY_INTERP, {"L": dict(zip(names, inputs))})

    shape_ok.source = code
    return fn, shape_ok
