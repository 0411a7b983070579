"""Inference batch norm on a GPU returns the running mean and the inverse std besides its
output (eagerc/codegen/triton/batch_norm_statistics.py): those must not feed the output, so that
Inductor's three kernels are independent and combo kernels launch them as one. Traced here
on meta tensors (a GPU's form: CPU returns no statistics) and run on CPU tensors."""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from eagerc.codegen.triton.generator import TritonCodegen
from eagerc.codegen.triton import batch_norm_statistics
from eagerc.codegen.triton.batch_norm_statistics import _default
from eagerc.compile.trace import _decompositions

aten = torch.ops.aten
CALLS = {"native_batch_norm": lambda op, x, w, b, m, v: op(x, w, b, m, v, False, 0.1, 1e-5),
         "legit_no_training": lambda op, x, w, b, m, v: op(x, w, b, m, v, 0.1, 1e-5)}
OPS = {"native_batch_norm": aten.native_batch_norm.default,
       "legit_no_training": aten._native_batch_norm_legit_no_training.default}


def _inputs(device, dtype=torch.float32, shape=(2, 8, 5, 5)):
    g = torch.Generator().manual_seed(0)
    c = shape[1]
    made = [torch.randn(shape, generator=g), torch.randn(c, generator=g), torch.randn(c, generator=g),
            torch.randn(c, generator=g), torch.rand(c, generator=g) + 0.5]
    return [t.to(device=device, dtype=dtype if i == 0 else torch.float32) for i, t in enumerate(made)]


def _trace(name, decomposition, dtype=torch.float32):
    """As eagerc traces (Inductor's decompositions, the code generator's own in place of
    some), with `decomposition` for the op."""
    table = _decompositions((), {OPS[name]: decomposition})
    return make_fx(lambda *a: CALLS[name](OPS[name], *a), decomposition_table=table)(*_inputs("meta", dtype))


def _output_reads_a_returned_statistic(gm) -> bool:
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    output, *statistics = out_node.args[0]
    seen, todo = set(), [output]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        todo.extend(n for n in node.all_input_nodes)
    return any(s in seen for s in statistics)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_output_does_not_read_the_returned_statistics(name):
    assert _output_reads_a_returned_statistic(_trace(name, _default(OPS[name])))  # torch._decomp's does
    own = TritonCodegen().decompositions()[OPS[name]]
    assert not _output_reads_a_returned_statistic(_trace(name, own))


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_values_are_a_gpus(name, dtype):
    """The GPU's form run on CPU tensors: the output as batch_norm's, the running mean
    copied, the inverse std 1/sqrt(var + eps), all in the computation dtype."""
    gm = _trace(name, batch_norm_statistics.DECOMPOSITIONS[OPS[name]], dtype)
    x, w, b, m, v = _inputs("cpu", dtype)
    output, mean, invstd = gm(x, w, b, m, v)
    want = F.batch_norm(x.float(), m, v, w, b, False, 0.1, 1e-5).to(dtype)
    torch.testing.assert_close(output, want, atol=2e-3 if dtype == torch.float16 else 1e-5, rtol=1e-3)
    assert output.dtype == dtype and mean.dtype == invstd.dtype == torch.float32
    torch.testing.assert_close(mean, m)
    assert mean.data_ptr() != m.data_ptr()
    torch.testing.assert_close(invstd, 1 / torch.sqrt(v + 1e-5))


def test_training_and_cpu_calls_are_torch_decomps():
    x, w, b, m, v = _inputs("cpu")
    own = batch_norm_statistics.native_batch_norm(x, w, b, m.clone(), v.clone(), True, 0.1, 1e-5)
    default = _default(OPS["native_batch_norm"])(x, w, b, m.clone(), v.clone(), True, 0.1, 1e-5)
    for a, e in zip(own, default):
        torch.testing.assert_close(a, e)
    _, mean, invstd = batch_norm_statistics.native_batch_norm(x, w, b, m, v, False, 0.1, 1e-5)
    assert mean.numel() == invstd.numel() == 0  # CPU's form, as the default gives
