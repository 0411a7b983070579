#!/usr/bin/env bash
# eagerc on your own NVIDIA GPU machine: checks what the GPU path needs (a CUDA build of
# torch that sees a GPU, Triton, eagerc built against that torch), compiles and runs one
# op on CUDA against torch's own kernel, then runs the GPU tests (tests/test_gpu*.py,
# skipped on machines without a GPU). Run tools/setup.sh first: it keeps the torch you
# have and installs the test dependencies (pytest, pytest-xdist, pytest-timeout).
#   bash tools/user_gpu_check.sh            # the checks, the smoke test, the GPU tests
#   bash tools/user_gpu_check.sh --models   # also the model tests on the eagerc device on
#                                           # GPU memory (EAGERC_BACKING=cuda; slower)
# Environment: PYTHON (default python3), EAGERC_GPU_WORKERS (pytest-xdist workers,
# default 2). The tests use a kernel cache of their own (removed afterwards); yours is
# not touched. (tools/gpu_check.sh is the project's script for its lent GPU machine.)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
START=$SECONDS
say() { echo; echo "==> user_gpu_check [$((SECONDS - START)) s]: $*"; }
fail() { echo "user_gpu_check: $*" >&2; exit 2; }

say "what this machine has"
$PY - <<'EOF' || fail "see the line above; nothing was run"
import sys
try:
    import torch
except ImportError:
    sys.exit("no torch: install a CUDA build of torch, then run tools/setup.sh")
print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)
if torch.version.cuda is None:
    sys.exit(f"torch {torch.__version__} is a CPU-only build: install a CUDA build "
             "(https://pytorch.org/get-started/locally/), then run tools/setup.sh again")
if not torch.cuda.is_available():
    sys.exit("torch is a CUDA build but sees no GPU (driver? CUDA_VISIBLE_DEVICES?); "
             "nvidia-smi should list one")
print("GPU:", ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())))
from torch.utils._triton import has_triton
if not has_triton():
    sys.exit("Triton is missing (eagerc compiles CUDA kernels with it): pip install triton")
import triton
print("triton", triton.__version__)
try:
    import eagerc
    from eagerc import _C  # noqa: F401
except ImportError as e:
    sys.exit(f"eagerc is not built against this torch ({e}): run bash tools/setup.sh")
print("eagerc", eagerc.__version__)
for name in ("pytest", "xdist"):
    try:
        __import__(name)
    except ImportError:
        sys.exit(f"{name} is missing: run bash tools/setup.sh (it installs the test dependencies)")
EOF

say "one op compiled for CUDA (the first compile takes 10-70 s: Triton and the launcher build)"
EAGERC_CACHE_DIR=$(mktemp -d -t eagerc-gpu-check-XXXXXX)
trap 'rm -rf "$EAGERC_CACHE_DIR"' EXIT
EAGERC_CACHE_DIR=$EAGERC_CACHE_DIR $PY - <<'EOF'
import logging, torch, eagerc
from eagerc import _console
from eagerc.testing import assert_close
_console.log_to_console()  # each compile as it finishes
x = torch.randn(64, 128, device="cuda")
expected = torch.softmax(x, dim=-1)
with _console.heartbeat(lambda: "compiling aten::_softmax for CUDA"):
    with eagerc.enabled("cuda"):
        got = torch.softmax(x, dim=-1)
        torch.cuda.synchronize()
assert_close(got, expected)
stats = eagerc.stats()
assert stats["compiles"] + stats["disk_loads"] >= 1, stats
print(stats)
print("softmax on CUDA: a compiled kernel, same values as torch's own")
EOF

TIMEOUT=""; $PY -c "import pytest_timeout" 2>/dev/null && TIMEOUT="--timeout=900"
WORKERS=${EAGERC_GPU_WORKERS:-2}
say "the GPU tests (tests/test_gpu*.py, slow ones included, spread over $WORKERS workers; a line per finished file)"
$PY -m pytest -q -ra -p no:cacheprovider -m "" -n "$WORKERS" --dist load $TIMEOUT tests/test_gpu*.py

if [ "${1:-}" = --models ]; then
  say "the model tests on the eagerc device on GPU memory (EAGERC_BACKING=cuda)"
  EAGERC_BACKING=cuda $PY -m pytest -q -ra -p no:cacheprovider -m "" -n "$WORKERS" --dist load \
    $TIMEOUT tests/test_device_models.py
fi
say "done"
