"""OpInfo samples with Python-number variants, run in override mode and on the eagerc
device and compared with CPU eager (dtype, shape, strides, values; or the same exception).

    python tools/op_sweep.py [--ops clamp,add,...] [--per-op 4] [--without-fixes]

tests/test_op_sweep.py runs a few ops of it in the default test run; the numbers of wider
runs are in docs/reliability.md. Each Python number among a sample's
arguments is replaced in turn by an int, a float and a bool of about its value (a complex
is not tried: eagerc refuses complex scalars, and eager's kernel serves them), since a
number's kind takes part in result-type promotion. Each call runs twice (the miss, which
compiles, then a hit of that kernel).
"""
from __future__ import annotations

import dataclasses
import itertools

import torch

from eagerc.testing import assert_close


@dataclasses.dataclass
class Case:
    op: str
    dtype: torch.dtype
    label: str
    call: object  # device -> result


# Scalar forms OpInfo's samples do not pass a Python number to (clamp's samples pass
# tensor bounds): name -> call(x, number) for an input x of the case's dtype.
NUMBER_FORMS = {
    "clamp max": lambda x, v: x.clamp(max=v),
    "clamp min": lambda x, v: x.clamp(min=v),
    "clamp (min, max)": lambda x, v: x.clamp(min=v, max=v * 3),
    "clip": lambda x, v: x.clip(max=v),
    "clamp_min": lambda x, v: torch.clamp_min(x, v),
    "clamp_max": lambda x, v: torch.clamp_max(x, v),
    "add alpha": lambda x, v: torch.add(x, x, alpha=v),
    "sub alpha": lambda x, v: torch.sub(x, x.flip(0), alpha=v) if x.dtype != torch.bool else x,
    "where": lambda x, v: torch.where(x > 1, x, v),
    "masked_fill": lambda x, v: x.masked_fill(x > 1, v),
    "fill_": lambda x, v: x.clone().fill_(v),
    "full_like": lambda x, v: torch.full_like(x, v),
    "lerp": lambda x, v: torch.lerp(x, x * 2, v),
    "pow": lambda x, v: torch.pow(x, v),
    "rsub": lambda x, v: torch.rsub(x, v),
    "remainder": lambda x, v: torch.remainder(x, v),
    "floor_divide": lambda x, v: torch.floor_divide(x, v),
    "eq": lambda x, v: torch.eq(x, v),
    "threshold": lambda x, v: torch.nn.functional.threshold(x, v, v * 2),
    "hardtanh": lambda x, v: torch.nn.functional.hardtanh(x, -abs(v), abs(v) + 1),
    "leaky_relu": lambda x, v: torch.nn.functional.leaky_relu(x, v),
    "sum out=": lambda x, v: torch.sum(x * v, 0, out=torch.empty((), dtype=torch.int64, device=x.device)),
    "cumsum out=": lambda x, v: torch.cumsum(x * v, 0, out=torch.empty(x.shape, dtype=torch.int64, device=x.device)),
}
NUMBERS = (2, 2.5, -1.5, True, 0.5)


def number_cases(names=None, dtypes=(torch.float32, torch.int64, torch.int8, torch.bool)):
    """The NUMBER_FORMS cases: each form, dtype and Python number."""
    for name, form in NUMBER_FORMS.items():
        if names is not None and name not in names:
            continue
        for dtype in dtypes:
            for v in NUMBERS:
                def call(device, form=form, v=v, dtype=dtype):
                    x = torch.tensor([1.7, -3.2, 0.4, 5.9, 2.0, -0.6]).to(dtype).to(device)
                    return form(x, v)
                yield Case(name, dtype, f"{type(v).__name__} {v!r}", call)


def _number_variants(value):
    if isinstance(value, bool):
        return [value, int(value), float(value) + 0.5]
    if isinstance(value, int):
        return [value, float(value) + 0.5, bool(value)]
    if isinstance(value, float):
        return [value, int(value) or 2, bool(value)]
    return [value]


def _move(value, device):
    if isinstance(value, torch.Tensor):
        return value.detach().to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_move(v, device) for v in value)
    return value


def cases(op_names, dtypes=(torch.float32, torch.int64, torch.bool), per_op: int = 4):
    """The sweep's cases for OpInfos named in `op_names` (all of op_db when None)."""
    from torch.testing._internal.common_methods_invocations import op_db

    for info in op_db:
        if op_names is not None and info.name not in op_names:
            continue
        for dtype in dtypes:
            if dtype not in info.supported_dtypes("cpu"):
                continue
            try:
                samples = list(itertools.islice(info.sample_inputs("cpu", dtype), 64))
            except Exception:  # noqa: BLE001 - a sample generator that cannot run here
                continue
            # Samples with a Python number first: tensor-only samples are
            # tests/test_ops_correctness.py's.
            samples.sort(key=lambda s: not _slots(s))
            for k, sample in enumerate(samples[:per_op]):
                slots = _slots(sample)
                variants = [(None, None)] + [(slot, v) for slot in slots
                                             for v in _number_variants(_get(sample, slot))[1:]]
                for slot, value in variants:
                    label = f"sample {k}" + (f" {slot[1]}={value!r}" if slot else "")
                    yield Case(info.name, dtype, label, _caller(info, sample, slot, value))


def _slots(sample):
    """Where the sample passes a Python number: ("arg", index) or ("kw", name)."""
    number = (bool, int, float)
    return ([("arg", i) for i, a in enumerate(sample.args) if isinstance(a, number)]
            + [("kw", n) for n, v in sample.kwargs.items() if isinstance(v, number)])


def _get(sample, slot):
    kind, key = slot
    return sample.args[key] if kind == "arg" else sample.kwargs[key]


def _caller(info, sample, slot, value):
    def call(device):
        inp = _move(sample.input, device)
        args = list(_move(a, device) for a in sample.args)
        kwargs = {k: _move(v, device) for k, v in sample.kwargs.items()}
        if slot is not None:
            if slot[0] == "arg":
                args[slot[1]] = value
            else:
                kwargs[slot[1]] = value
        return info.op(inp, *args, **kwargs)
    return call


def _outcome(call, device):
    try:
        return "ok", _cpu(call(device))
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return type(e).__name__, str(e).splitlines()[0] if str(e) else ""


def _cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)):
        return [_cpu(v) for v in value]
    return value


def _dense_strides(t):
    """t's strides where they matter (dims longer than 1), None for a result whose memory
    is not dense (its strides are the kernel's choice in eager too)."""
    from torch._prims_common import _is_non_overlapping_and_dense_or_false as dense

    if t.numel() <= 1 or not dense(t.shape, t.stride()):
        return None
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def mismatch(want, got) -> str | None:
    """Why `got` differs from eager's `want` (outcomes of _outcome), or None."""
    if want[0] != "ok" or got[0] != "ok":
        if want[0] == got[0]:
            return None  # both raise the same type (messages may name the device)
        return f"eager {want[0]}, got {got[0]}: {got[1] if got[0] != 'ok' else ''}"[:200]
    w, g = want[1], got[1]
    ws, gs = (w if isinstance(w, list) else [w]), (g if isinstance(g, list) else [g])
    if len(ws) != len(gs):
        return "number of results"
    for a, b in zip(ws, gs):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return "result kinds"
        if not isinstance(a, torch.Tensor):
            if a != b and not (a != a and b != b):
                return f"value {b!r} != {a!r}"
            continue
        if a.dtype != b.dtype:
            return f"dtype {b.dtype} != eager's {a.dtype}"
        if a.shape != b.shape:
            return f"shape {tuple(b.shape)} != {tuple(a.shape)}"
        if _dense_strides(a) != _dense_strides(b):
            return f"strides {b.stride()} != eager's {a.stride()}"
        try:
            assert_close(b, a, equal_nan=True, check_stride=False)
        except AssertionError as e:
            return "values: " + str(e).splitlines()[0][:150]
    return None


def run_case(case: Case, modes=("override", "device")) -> dict:
    """mode -> mismatch text or None, for one case (each mode: a miss, then a hit)."""
    import eagerc

    torch.manual_seed(0)
    with eagerc.enabled("cpu", ops=[]):  # nothing served: CPU's own kernels
        want = _outcome(case.call, "cpu")
    found = {}
    for mode in modes:
        why = None
        for _ in range(2):
            if mode == "override":
                with eagerc.enabled("cpu"):
                    got = _outcome(case.call, "cpu")
            else:
                got = _outcome(case.call, "eagerc")
            why = why or mismatch(want, got)
        found[mode] = why
    return found


def _without_fixes() -> None:
    """Turn off eagerc's promotion fixes (the clamp decomposition, out= dtypes, the bool
    alpha and empty var_mean refusals) to count what they fix."""
    from eagerc.compile import known_wrong, trace

    trace._LIFTED_SCALAR_DECOMPOSITIONS.clear()
    trace._OUT_DTYPE_COMPUTES = frozenset()
    known_wrong._bool_alpha = lambda op, args: False
    for name in ("var_mean", "std_mean"):
        known_wrong._WRONG.pop(name, None)


def main(argv=None) -> int:
    import argparse
    import collections
    import warnings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all of op_db)")
    parser.add_argument("--per-op", type=int, default=4, help="samples per op and dtype")
    parser.add_argument("--without-fixes", action="store_true")
    parser.add_argument("--no-opinfo", action="store_true", help="the number forms only")
    parser.add_argument("--no-forms", action="store_true", help="the OpInfo samples only")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.without_fixes:
        _without_fixes()
    names = set(args.ops.split(",")) if args.ops else None
    total, bad = 0, collections.Counter()
    every = itertools.chain(() if args.no_forms else number_cases(names),
                            () if args.no_opinfo else cases(names, per_op=args.per_op))
    for case in every:
        total += 1
        found = run_case(case)
        for mode, why in found.items():
            if why:
                bad[mode] += 1
                print(f"MISMATCH {mode:8} {case.op} {str(case.dtype)[6:]} {case.label}: {why}", flush=True)
        if not any(found.values()):
            print(f"ok {case.op} {str(case.dtype)[6:]} {case.label}", flush=True)
    print(f"cases {total}; mismatches: override {bad['override']}, device {bad['device']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
