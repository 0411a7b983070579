#!/usr/bin/env bash
# Runs on the lent GPU machine (torch 2.11 + CUDA, Python 3.12, no network): builds
# eagerc against that torch, runs the CPU test suite there (CPU and the host-memory eagerc
# device; the GPU itself is tools/gpu_check.sh's) and the benchmarks. Carry the wheels it lacks
# in .whl/ (diskcache, expecttest). Usage (device tool):
#   bash tools/device_check.sh          # per-op kernels and the eagerc device
#   bash tools/device_check.sh core     # targets, the compile/cache service, the typed seam
#   bash tools/device_check.sh capture  # eagerc.capture: its tests and bench_capture.py
#                                       # on 2 pinned cores (the numbers in docs/capture_corpus.md)
set -uo pipefail
OUT=${OUT:-/tmp/eagerc-device-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export EAGERC_CACHE_DIR=/tmp/eagerc-cache
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
echo "cores: $(nproc)"
python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -30 || exit 1
if [ "${1:-ops}" = capture ]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_capture_*.py 2>&1 | tail -15 | tee "$OUT/tests_capture.txt"
  OMP_NUM_THREADS=2 taskset -c 0,1 python3 tools/bench_capture.py --iters 200 2>&1 | grep -v Warn \
    | tail -20 | tee "$OUT/bench_capture.txt"
  exit 0
fi
if [ "${1:-ops}" = core ]; then  # the core/targets layer on this torch: targets, service, seam
  python3 -m pytest -q -p no:cacheprovider tests/test_targets.py tests/test_cache_service.py \
    tests/test_torch_compile_device.py tests/test_layering.py tests/test_kernel_behaviour.py \
    tests/test_argument_kinds.py tests/test_docstrings.py tests/test_capture_compile.py 2>&1 \
    | tail -25 | tee "$OUT/tests_core.txt"
  exit 0
fi
python3 -m pytest -q -p no:cacheprovider tests/test_kernel_behaviour.py tests/test_argument_kinds.py \
  tests/test_device_runtime.py tests/test_device_semantics.py tests/test_device_models.py \
  tests/test_op_selection.py tests/test_targets.py tests/test_cache_service.py \
  tests/test_torch_compile_device.py 2>&1 | tail -15 | tee "$OUT/tests.txt"
for threads in 16 2; do
  OMP_NUM_THREADS=$threads python3 tools/bench_hit.py --repeats 100 2>&1 | grep -v Warn | tee -a "$OUT/bench_hit.txt"
done
python3 tools/bench_cold.py --runs 3 2>&1 | tail -12 | tee "$OUT/bench_cold.txt"
python3 -m eagerc demo 2>&1 | grep -v Warn | tail -4 | tee "$OUT/demo.txt"
