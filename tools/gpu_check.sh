#!/usr/bin/env bash
# The GPU session script, run on the lent GPU machine (torch + CUDA + Triton, Python 3.12,
# no network) through the device tool: builds eagerc against that torch, runs the GPU tests
# (tests/test_gpu*.py, skipped in CI) and the GPU benchmarks, and leaves logs in $OUT.
# Carry the wheels the machine lacks in .whl/ (diskcache, expecttest). Usage:
#   bash tools/gpu_check.sh tests          # build + GPU tests (override mode on CUDA, the
#                                          # eagerc device on GPU memory, its model tests)
#   bash tools/gpu_check.sh bench [ARGS]   # build + tools/bench_gpu.py ARGS
#   bash tools/gpu_check.sh all            # both
# Budget: each new process pays ~70 s for its first CUDA compile (docs/benchmarks.md); the
# tests take several minutes: run "tests" and "bench" as separate device calls.
set -uo pipefail
OUT=${OUT:-/tmp/eagerc-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export EAGERC_CACHE_DIR=/tmp/eagerc-cache PYTHONUNBUFFERED=1
# The machine compiles torch's .py files anew in every process (~6 s of each first
# compile): a writable bytecode cache keeps them for the session.
export PYTHONPYCACHEPREFIX=/tmp/pycache
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0), 'x', torch.cuda.device_count())" | tee "$OUT/machine.txt"
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
what=${1:-all}; shift || true
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" --timeout=400 tests/test_gpu*.py 2>&1 | tee "$OUT/tests_gpu.txt" | tail -60
  # The host-memory device's model tests, on the eagerc device on GPU memory.
  EAGERC_BACKING=cuda python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" --timeout=400 tests/test_device_models.py 2>&1 \
    | tee "$OUT/tests_gpu_device_models.txt" | tail -40
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  python3 tools/bench_gpu.py "$@" 2>&1 | grep -v "Warn\|warnings.warn" | tee "$OUT/bench_gpu.txt"
fi
