"""The one seam between capture and the compiler: an FX graph in, a callable out.

The default path is eagerc's compile/cache service (eagerc/graph_kernels.py): the graph
becomes an artifact in kernel_cache, shared with the per-op kernels, so a later process
recording the same graph loads it instead of compiling. Outputs a kernel cannot return
(views of inputs or of other outputs, repeated outputs, None: AOTAutograd's forward and
backward graphs have them) are rebuilt after the kernel by graph_outputs.py. Graphs that
path still refuses (inputs on other devices, graphs that do not trace) are compiled by
Inductor's compile_fx; a graph
that cannot be compiled at all runs as recorded (the FX graph itself), with a warning.
Each function returns `(fn, from_disk)`. `GraphCompiler` picks the path for a record's
backend: one entry for static graphs (training graphs through AOTAutograd, training.py) and
one for symbolic ones.
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
    Counts graphs loaded from disk and training graphs into `stats`."""

    def __init__(self, backend, stats):
        self.backend, self.stats = backend, stats
        self.inductor = backend is None or backend == "inductor"

    def compile(self, gm, example_inputs):
        """fn(*inputs) -> outputs. With grad mode on and an input requiring grad: forward
        and backward through AOTAutograd, each graph compiled by `compile_static`."""
        from .training import compile_joint, needs_autograd
        if needs_autograd(example_inputs):
            self.stats["training_graphs"] += 1
            try:
                return compile_joint(gm, example_inputs, self.compile_static, self.inductor)
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
        if self.inductor:
            fn, from_disk = _compile_graph(gm, example_inputs)
            self.stats["graphs_from_disk"] += from_disk
            return fn
        return self.backend_fn()(gm, example_inputs)

    def compile_symbolic(self, gm, example_inputs, dynamic_dims):
        """((fn, shape_ok)) with symbolic sizes for `dynamic_dims` (see _compile_graph_symbolic)."""
        backend = None if self.inductor else self.backend_fn()
        compiled, from_disk = _compile_graph_symbolic(gm, example_inputs, dynamic_dims, backend)
        self.stats["graphs_from_disk"] += from_disk
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


def _compile_graph(gm, example_inputs):
    """Compile `gm` (a torch.fx.GraphModule) for `example_inputs`.

    The callable takes the graph inputs positionally and returns the outputs as a sequence.
    """
    from torch._subclasses.fake_tensor import FakeTensor

    from eagerc.refusals import CompileError, error_summary
    from eagerc.graph_kernels import load_or_compile

    def kernel_for(inputs):
        split = split_outputs(gm)
        if split is None:
            kernel = load_or_compile(gm, list(inputs))
            return kernel.run, kernel.from_disk
        kernel_gm, epilogue = split  # outputs a kernel cannot return: rebuilt after it
        kernel = load_or_compile(kernel_gm, list(inputs))
        return _with_epilogue(kernel.run, epilogue), kernel.from_disk

    def for_layout(inputs):  # another layout of the inputs: its own kernel, also cached
        try:
            return kernel_for(inputs)[0]
        except CompileError:
            return None

    try:
        run, from_disk = kernel_for(example_inputs)
        if any(isinstance(t, FakeTensor) for t in example_inputs):
            # AOTAutograd's graphs (fake inputs): the backward's saved tensors come in the
            # forward kernel's layouts. A record's inputs are checked by its guard.
            run = matching_layout(run, gm, example_inputs, for_layout)
        return run, from_disk
    except CompileError as e:
        log.info("eagerc.capture: graph compiled by compile_fx (%s)", e)
    from torch._inductor.compile_fx import compile_fx  # heavy: imported on first compile

    try:
        return compile_fx(gm, list(example_inputs)), False
    except Exception as e:  # noqa: BLE001 - e.g. a device Inductor has no codegen for
        log.warning("eagerc.capture: graph not compiled (%s); it runs as recorded",
                    error_summary(e))
        return gm, False


def _with_epilogue(run, epilogue):
    def run_all(*inputs):
        return epilogue(inputs, run(*inputs))
    return run_all


def _compile_graph_symbolic(gm, example_inputs, dynamic_dims, backend=None):
    """Compile `gm` with symbolic sizes for `dynamic_dims[i]` of input i (paper §6.2.1).

    Returns `((fn, shape_ok), from_disk)`: `shape_ok(inputs)` checks every assumption the
    compilation made (sizes, strides, storage offsets of every input, the symbols' ranges
    such as `2 <= s0`), so a call never reaches the compiled graph with a shape it was not
    compiled for. On eagerc's path that check is C++ inside the artifact.
    """
    from eagerc.refusals import error_summary

    if backend is None:
        from eagerc.refusals import CompileError
        from eagerc.graph_kernels import load_or_compile

        try:
            split = split_outputs(gm)
            if split is None:
                kernel = load_or_compile(gm, list(example_inputs), dynamic_dims)
                return (kernel.run, kernel.guard), kernel.from_disk
            kernel = load_or_compile(split[0], list(example_inputs), dynamic_dims)
            return (_with_epilogue(kernel.run, split[1]), kernel.guard), kernel.from_disk
        except CompileError as e:
            log.info("eagerc.capture: symbolic graph compiled by compile_fx (%s)", e)
        try:
            return _compile_fx_symbolic(gm, example_inputs, dynamic_dims, None), False
        except Exception as e:  # noqa: BLE001 - as in _compile_graph: run it as recorded
            log.warning("eagerc.capture: symbolic graph not compiled (%s); it runs as recorded",
                        error_summary(e))
            backend = _as_recorded
    return _compile_fx_symbolic(gm, example_inputs, dynamic_dims, backend), False


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
