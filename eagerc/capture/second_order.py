"""Gradients of a captured training graph that are differentiated again (double backward).

AOTAutograd's compiled backward cannot itself be differentiated: a gradient penalty
(`torch.autograd.grad(loss, x, create_graph=True)`, then `.backward()` through that
gradient) raised "torch.compile with aot_autograd does not currently support double
backward" on every captured call after the first, where eager computes it. A captured call
cannot know, when it runs, whether its gradients will be differentiated. A call that
differentiates with respect to something other than parameters (an input tensor that
requires grad and is not an `nn.Parameter`: a gradient penalty's input, a meta-learner's
fast weights, a captured child module's input) has its outputs go through one autograd node
(`_TwiceDifferentiable`) that keeps the call's inputs:

- a plain backward hands the incoming gradients to AOTAutograd's graph (the compiled
  backward, as before) and then lets it go, so its saved activations are freed as usual;
- a backward with `create_graph=True` (or one that finds AOTAutograd's graph already
  freed: a second backward through a graph kept with `retain_graph=True`) runs the
  recorded graph again eagerly on the same inputs, with the random draws of the first run
  and the buffers it writes (BatchNorm's running statistics) left as they are, and
  differentiates that, as eager autograd does.

That node costs a second autograd engine pass per backward (about 3 us per input that
requires grad on the development machine), so a call whose only inputs requiring grad are
parameters (a plain training step) goes without it, straight to AOTAutograd's node: a
second derivative with respect to parameters alone (a gradient-norm penalty over
`model.parameters()`) raises as under torch.compile. Graphs compiled by Inductor whose
forward draws random numbers are not wrapped either: Inductor's own seeded draws cannot be
replayed eagerly, and such a graph's double backward raises as torch.compile's does.
"""
import torch
from torch.utils.checkpoint import get_device_states, set_device_states

from .torch_calls import NONDETERMINISTIC, UNINITIALIZED


def twice_differentiable(compiled, gm, inductor, example_inputs):
    """`compiled(*inputs)` (AOTAutograd's function for the recorded graph `gm`) whose outputs
    can be differentiated twice where a call's non-parameter inputs require grad;
    `compiled` itself where that cannot be done faithfully."""
    draws = _draws(gm)
    # Where a parameter is read, every call reads one (the guard holds the structure).
    watched = [i for i, t in enumerate(example_inputs)
               if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter)]
    if (draws and inductor) or not watched:
        return compiled

    def run(*inputs):
        if not torch.is_grad_enabled() or not any(
                isinstance(inputs[i], torch.Tensor) and inputs[i].requires_grad for i in watched):
            return compiled(*inputs)
        call = _Call(compiled, gm, draws, inputs)
        out = _TwiceDifferentiable.apply(call, *inputs)
        return call.outputs_like(out)

    return run


def _draws(gm):
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method"):
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            if name in NONDETERMINISTIC and name not in UNINITIALIZED:
                return True
    return False


class _Call:
    """One call's state between its forward and its backward."""

    __slots__ = ("compiled", "gm", "inputs", "rng", "aot_outputs", "structure")

    def __init__(self, compiled, gm, draws, inputs):
        self.compiled, self.gm, self.inputs = compiled, gm, inputs
        self.rng = (torch.get_rng_state(), *get_device_states(*inputs)) if draws else None
        self.aot_outputs = None
        self.structure = None

    def outputs_like(self, flat):
        """The compiled function's own output container around `flat`."""
        kind = self.structure
        return list(flat) if kind is list else tuple(flat) if kind is tuple else flat[0]

    def recompute(self):
        """The recorded graph run eagerly on the call's inputs: the first run's random draws,
        written buffers (inputs that need no gradient) on copies."""
        inputs = [t.clone() if isinstance(t, torch.Tensor) and not t.requires_grad else t
                  for t in self.inputs]
        devices = self.rng[1] if self.rng else []
        with torch.random.fork_rng(devices=devices, enabled=self.rng is not None,
                                   device_type=_device_type(self.inputs)):
            if self.rng is not None:
                torch.set_rng_state(self.rng[0])
                set_device_states(self.rng[1], self.rng[2], device_type=_device_type(self.inputs))
            with torch.enable_grad():
                out = self.gm(*inputs)
        return list(out) if isinstance(out, (list, tuple)) else [out]


def _device_type(tensors):
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            return t.device.type
    return "cuda"


class _TwiceDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, *inputs):
        with torch.enable_grad():  # AOTAutograd's training path, its graph kept here
            out = call.compiled(*inputs)
        call.structure = type(out) if isinstance(out, (list, tuple)) else None
        flat = list(out) if call.structure else [out]
        call.aot_outputs = flat
        ctx.call = call
        ctx.differentiable = [isinstance(o, torch.Tensor) and o.requires_grad for o in flat]
        results = [o.detach() if isinstance(o, torch.Tensor) else o for o in flat]
        ctx.mark_non_differentiable(*[r for r, d in zip(results, ctx.differentiable)
                                      if isinstance(r, torch.Tensor) and not d])
        return tuple(results)

    @staticmethod
    def backward(ctx, *grads):
        call = ctx.call
        wanted = [i for i, need in enumerate(ctx.needs_input_grad[1:]) if need]
        create_graph = torch.is_grad_enabled()
        if create_graph or call.aot_outputs is None:
            outputs = call.recompute()
        else:
            outputs, call.aot_outputs = call.aot_outputs, None
        pairs = [(o, g) for o, g, d in zip(outputs, grads, ctx.differentiable)
                 if d and g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
        result = [None] * len(call.inputs)
        if pairs and wanted:
            found = torch.autograd.grad([o for o, _ in pairs], [call.inputs[i] for i in wanted],
                                        [g for _, g in pairs], allow_unused=True,
                                        create_graph=create_graph)
            for i, g in zip(wanted, found):
                result[i] = g
        return (None, *result)
