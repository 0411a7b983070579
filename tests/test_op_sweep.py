"""OpInfo samples plus Python-number variants of each scalar argument (int, float, bool),
in override mode and on the eagerc device, compared with CPU eager: dtype, shape,
strides, values, or the same exception type (tools/op_sweep.py). The default run takes
ops whose scalar arguments take part in promotion; `-m slow` adds a wider set; the whole
op_db is `python tools/op_sweep.py` (numbers in docs/reliability.md)."""
from __future__ import annotations

import importlib.util
import itertools
import pathlib
import sys

import pytest
import torch

_spec = importlib.util.spec_from_file_location(
    "op_sweep", pathlib.Path(__file__).resolve().parents[1] / "tools" / "op_sweep.py")
op_sweep = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = op_sweep  # dataclasses look their module up
_spec.loader.exec_module(op_sweep)

DEFAULT_OPS = ["clamp_min", "add", "remainder"]
SLOW_OPS = ["clip", "div", "fmod", "pow", "where", "lerp", "addcmul", "addcdiv",
            "nn.functional.threshold", "nn.functional.hardtanh", "nn.functional.leaky_relu",
            "masked_fill", "eq", "lt", "ge", "maximum", "minimum", "rsub", "true_divide",
            "floor_divide", "sum", "prod", "cumsum", "mean", "var_mean", "std_mean"]


def _sweep(ops, per_op, forms=(), form_dtypes=(torch.int64, torch.bool)):
    failures = []
    n = 0
    every = itertools.chain(op_sweep.number_cases(set(forms), dtypes=form_dtypes),
                            op_sweep.cases(set(ops), dtypes=(torch.float32, torch.int64, torch.bool),
                                           per_op=per_op))
    for case in every:
        n += 1
        for mode, why in op_sweep.run_case(case).items():
            if why:
                failures.append(f"{mode} {case.op} {case.dtype} {case.label}: {why}")
    assert n > 0, "no cases: the OpInfo names changed"
    assert not failures, "\n".join(failures)


@pytest.mark.filterwarnings("ignore")
def test_promotion_sweep_default_ops(fresh_cache):
    _sweep(DEFAULT_OPS, per_op=1, forms=("clamp max", "add alpha"))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_promotion_sweep_wider(fresh_cache):
    _sweep(SLOW_OPS, per_op=4, forms=tuple(op_sweep.NUMBER_FORMS),
           form_dtypes=(torch.float32, torch.int64, torch.int8, torch.bool))
