"""ATen's fused LSTM and GRU cells as pointwise code: _thnn_fused_lstm_cell,
_thnn_fused_gru_cell and their backwards.

`lstm_cell` and `gru_cell` take these fused ops on a CUDA or PrivateUse1 tensor, and only
CUDA has kernels for them: on the eagerc device over host memory neither the home (CPU)
nor the host round trip can run them, so every target traces them with these
(Target.decompositions), and eager's check of such a call runs them too
(eagerc/per_op/eager_rules.py). They compute what ATen's CUDA kernels compute, in the
same order, with half and bfloat16 in float32 (CUDA's accumulate type), rounded where
CUDA stores:

- LSTM: gates = input_gates + hidden_gates (+ input_bias + hidden_bias), split into
  four H-wide column blocks i, f, g, o; ig, fg, og = sigmoid, cg = tanh;
  cy = fg * cx + ig * cg, hy = og * tanh(cy). The workspace is [ig | fg | cg | og]
  (input_gates' shape), which the backward reads with cx and cy.
- GRU: three blocks r, i (update), n; rg, ig = sigmoid of the summed gates,
  hn = hidden n + hidden_bias n, ng = tanh(input n + input_bias n + rg * hn),
  hy = ng + ig * (hx - ng). The workspace is [rg | ig | ng | hx | hn] (B x 5H).
- The backwards return the gradients of the gates before their activations; a bias's
  gradient is its gates' gradient summed over the batch, undefined without a bias.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _check_cell_sizes(name, input_gates, hidden_gates, input_bias, hidden_bias, factor, prev):
    torch._check(input_gates.dim() == 2,
                 lambda: f"Expected 2-dimensional tensor, but got {input_gates.dim()}-dimensional "
                         f"tensor for argument #1 'input_gates' (while checking arguments for {name})")
    torch._check(input_gates.shape == hidden_gates.shape,
                 lambda: f"Expected tensor for argument #1 'input_gates' to have the same size as "
                         f"tensor for argument #2 'hidden_gates'; but {list(input_gates.shape)} does "
                         f"not equal {list(hidden_gates.shape)} (while checking arguments for {name})")
    gates_size = input_gates.shape[1]
    if input_bias is not None:
        torch._check(input_bias.dim() == 1 and input_bias.numel() == gates_size,
                     lambda: f"input_bias must be 1-dimensional with {gates_size} elements "
                             f"(while checking arguments for {name})")
        torch._check(hidden_bias is not None and hidden_bias.shape == input_bias.shape,
                     lambda: f"hidden_bias must have input_bias's size (while checking arguments for {name})")
    torch._check(prev.dim() == 2 and prev.numel() == input_gates.shape[0] * gates_size // factor,
                 lambda: f"prev_hidden must be 2-dimensional with {input_gates.shape[0] * gates_size // factor} "
                         f"elements (while checking arguments for {name})")


def _summed_gates(input_gates, hidden_gates, input_bias, hidden_bias, count, dtype):
    """The per-gate sums (ATen's order: input + hidden + input bias + hidden bias)."""
    gates = input_gates.to(dtype) + hidden_gates.to(dtype)
    if input_bias is not None:
        gates = gates + input_bias.to(dtype) + hidden_bias.to(dtype)
    return gates.chunk(count, 1)


def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    _check_cell_sizes("_thnn_fused_lstm_cell_cuda", input_gates, hidden_gates, input_bias,
                      hidden_bias, 4, cx)
    dtype = input_gates.dtype
    compute = _compute_dtype(dtype)
    i, f, g, o = _summed_gates(input_gates, hidden_gates, input_bias, hidden_bias, 4, compute)
    ig, fg, cg, og = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    cy = fg * cx.to(compute) + ig * cg
    hy = og * torch.tanh(cy)
    workspace = torch.cat([ig, fg, cg, og], 1).to(dtype)
    return hy.to(cx.dtype).contiguous(), cy.to(cx.dtype).contiguous(), workspace


def fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias: bool):
    if grad_hy is None and grad_cy is None:
        return None, None, None
    defined = grad_hy if grad_hy is not None else grad_cy
    torch._check(defined.dim() == 2, lambda: "fused_lstm_cell_backward: gradients must be 2-dimensional")
    for t in (grad_hy, grad_cy, cx, cy):
        if t is not None:
            torch._check(t.shape == defined.shape,
                         lambda: f"fused_lstm_cell_backward: expected size {list(defined.shape)}, "
                                 f"got {list(t.shape)}")
    torch._check(workspace.dim() == 2 and workspace.numel() == defined.numel() * 4,
                 lambda: "fused_lstm_cell_backward: workspace must be 2-dimensional with 4 times "
                         "the gradient's elements")
    dtype = workspace.dtype
    compute = _compute_dtype(dtype)
    ig, fg, cg, og = workspace.to(compute).chunk(4, 1)
    go = grad_hy.to(compute) if grad_hy is not None else 0.0
    goc = grad_cy.to(compute) if grad_cy is not None else 0.0
    tanh_cy = torch.tanh(cy.to(compute))
    gog = go * tanh_cy
    gcx = go * og * (1 - tanh_cy * tanh_cy) + goc
    gig = gcx * cg * (1 - ig) * ig
    gfg = gcx * cx.to(compute) * (1 - fg) * fg
    gcg = gcx * ig * (1 - cg * cg)
    gog = gog * (1 - og) * og
    grad_gates = torch.cat([gig, gfg, gcg, gog], 1).to(dtype)
    grad_cx = (gcx * fg).to(cx.dtype).contiguous()
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_cx, grad_bias


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    _check_cell_sizes("_thnn_fused_gru_cell_cuda", input_gates, hidden_gates, input_bias,
                      hidden_bias, 3, hx)
    dtype = input_gates.dtype
    compute = _compute_dtype(dtype)
    ir, ii, in_ = input_gates.to(compute).chunk(3, 1)
    hr, hi, hn = hidden_gates.to(compute).chunk(3, 1)
    if input_bias is not None:
        b1r, b1i, b1n = input_bias.to(compute).chunk(3)
        b2r, b2i, b2n = hidden_bias.to(compute).chunk(3)
        rg = torch.sigmoid(ir + hr + b1r + b2r)
        ig = torch.sigmoid(ii + hi + b1i + b2i)
        hn = hn + b2n
        ng = torch.tanh(in_ + b1n + rg * hn)
    else:
        rg = torch.sigmoid(ir + hr)
        ig = torch.sigmoid(ii + hi)
        ng = torch.tanh(in_ + rg * hn)
    hy = ng + ig * (hx.to(compute) - ng)
    # The workspace has hx's dtype (ATen allocates it with hx's options).
    workspace = torch.cat([rg.to(dtype), ig.to(dtype), ng.to(dtype), hx.to(dtype), hn.to(dtype)], 1)
    return hy.to(hx.dtype).contiguous(), workspace.to(hx.dtype)


def fused_gru_cell_backward(grad_hy, workspace, has_bias: bool):
    torch._check(grad_hy.dim() == 2, lambda: "fused_gru_cell_backward: grad_hy must be 2-dimensional")
    torch._check(workspace.shape == (grad_hy.shape[0], grad_hy.shape[1] * 5),
                 lambda: f"fused_gru_cell_backward: expected workspace of size "
                         f"{[grad_hy.shape[0], grad_hy.shape[1] * 5]}, got {list(workspace.shape)}")
    dtype = workspace.dtype
    compute = _compute_dtype(dtype)
    rg, ig, ng, hx, hn = workspace.to(compute).chunk(5, 1)
    go = grad_hy.to(compute)
    gig = go * (hx - ng) * (1 - ig) * ig
    ghx = go * ig
    gin = go * (1 - ig) * (1 - ng * ng)
    ghn = gin * rg
    grg = gin * hn * (1 - rg) * rg
    grad_input_gates = torch.cat([grg, gig, gin], 1).to(dtype)
    grad_hidden_gates = torch.cat([grg, gig, ghn], 1).to(dtype)
    grad_hx = ghx.to(grad_hy.dtype).contiguous()
    if has_bias:
        return (grad_input_gates, grad_hidden_gates, grad_hx,
                grad_input_gates.sum(0), grad_hidden_gates.sum(0))
    return grad_input_gates, grad_hidden_gates, grad_hx, None, None


def table() -> dict:
    from torch._prims_common.wrappers import out_wrapper

    return {
        aten._thnn_fused_lstm_cell.default: fused_lstm_cell,
        aten._thnn_fused_lstm_cell.out: out_wrapper("out0", "out1", "out2")(fused_lstm_cell),
        aten._thnn_fused_lstm_cell_backward_impl.default: fused_lstm_cell_backward_impl,
        aten._thnn_fused_gru_cell.default: fused_gru_cell,
        aten._thnn_fused_gru_cell.out: out_wrapper("out0", "out1")(fused_gru_cell),
        aten._thnn_fused_gru_cell_backward.default: fused_gru_cell_backward,
    }
