"""The eagerc device as a vendor's accelerator sees it, for tests: a script run in a fresh
process with aliases and the host round trip off (EAGERC_ALIAS_FALLBACK=0,
EAGERC_CPU_FALLBACK=0), and the check such a script ends with: each named op was served
by a kernel eagerc compiled (or loaded), never by a fallback, the host or an alias."""
import os
import subprocess
import sys

# Put before the scripts (they import eagerc): `served_by_kernels(("linalg_qr", ...))`. On
# host memory a kernel's listed extern (topk, say) runs ATen's CPU kernel on aliases, which
# counts as aliased: `no_aliases=True` where none of the ops' kernels calls one.
SERVED_BY_KERNELS = '''
def served_by_kernels(names, no_aliases=False):
    ops = eagerc.stats()["ops"]
    for op in names:
        entry = ops[f"aten::{op}@PrivateUse1"]
        assert entry["compiles"] + entry["disk_loads"] and not entry["fallbacks"], (op, entry)
        assert not entry["host_round_trips"], (op, entry)
        assert not (no_aliases and entry["aliased"]), (op, entry)
'''


def run_without_aliases(script: str, timeout: int = 900) -> None:
    """Run `script` (which prints OK at its end) on a device without aliases or the host."""
    env = dict(os.environ, EAGERC_ALIAS_FALLBACK="0", EAGERC_COMPILE="now", OMP_NUM_THREADS="1",
               EAGERC_CPU_FALLBACK="0")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


def opinfo_calls(entries, ops, dtypes):
    """(op, args, kwargs) of every call of an op in `ops` that the OpInfo samples of the
    entries named in `entries` make on CPU (samples eager refuses are left out)."""
    import warnings

    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    calls = []

    class Record(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in ops:
                calls.append((func, args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    for info in (o for o in op_db if o.name in entries):
        for dtype in dtypes:
            for sample in info.sample_inputs("cpu", dtype):
                try:
                    with warnings.catch_warnings(), Record():
                        warnings.simplefilter("ignore")  # deprecation notices (torch.cholesky)
                        info.op(sample.input, *sample.args, **sample.kwargs)
                except RuntimeError:
                    pass  # a sample eager refuses (its error is eager's: the device tests)
    return calls
