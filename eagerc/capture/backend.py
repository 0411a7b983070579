"""The one seam between capture and the compiler: an FX graph in, a callable out."""


def _compile_graph(gm, example_inputs):
    """Compile `gm` (a torch.fx.GraphModule) for `example_inputs` with TorchInductor.

    The callable takes the graph inputs positionally and returns the outputs as a sequence.
    """
    from torch._inductor.compile_fx import compile_fx  # heavy: imported on first compile

    return compile_fx(gm, list(example_inputs))
