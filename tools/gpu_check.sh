#!/usr/bin/env bash
# The GPU session script, run on the lent GPU machine (torch + CUDA + Triton, Python 3.12,
# no network) through the device tool: builds eagerc against that torch, runs the GPU tests
# (tests/test_gpu*.py, skipped in CI) and the GPU benchmarks, and leaves logs in $OUT.
# Carry the wheels the machine lacks in .whl/ (diskcache, expecttest). Usage:
#   bash tools/gpu_check.sh gpu-tests      # build + tests/test_gpu*.py (override mode on CUDA,
#                                          # the eagerc device on GPU memory)
#   bash tools/gpu_check.sh model-tests    # build + tests/test_device_models.py on the eagerc
#                                          # device on GPU memory (EAGERC_BACKING=cuda)
#   bash tools/gpu_check.sh tests          # both (more than one device call's 600 s: split it)
#   bash tools/gpu_check.sh bench [ARGS]   # build + tools/bench_gpu.py ARGS
#   bash tools/gpu_check.sh probe MODE     # build + tools/gpu_probe.py MODE (diagnostics)
#   bash tools/gpu_check.sh hit [ARGS]     # build + tools/bench_hit.py --device cuda ARGS
#   bash tools/gpu_check.sh capture-train [ARGS]  # build + tools/bench_capture_train.py ARGS
#   bash tools/gpu_check.sh cold-child M   # build + model M's first forward, progress, stacks
#   bash tools/gpu_check.sh coverage ARGS  # build + python -m eagerc.coverage --device cuda ARGS
#   bash tools/gpu_check.sh with VAR=VALUE STEP  # one step with an extra environment variable
#   bash tools/gpu_check.sh STEP + STEP ...  # several of these after one build
# Environment: EAGERC_GPU_TESTS (test files for gpu-tests, default tests/test_gpu*.py),
# EAGERC_GPU_WORKERS (pytest-xdist workers, default 4), EAGERC_GPU_SKIP_SOLO=1 (skip the
# fresh-process test that runs alone after the others).
# Budget: each new process pays ~70 s for its first CUDA compile (docs/benchmarks.md).
# Filters are line-buffered: a step killed by the device call's time limit keeps its lines.
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
# Parallel test workers (pytest-xdist from .whl/): each pays its own first CUDA compile, but
# the model tests' kernels compile side by side on the machine's 16 cores.
XDIST=""; python3 -c "import xdist" 2>/dev/null && XDIST="-n ${EAGERC_GPU_WORKERS:-4}"
step() {
what=${1:-all}; shift || true
if [ "$what" = with ]; then
  # with VAR=VALUE STEP ...: one step under an extra environment variable; its bench log
  # is named after the value (bench_device-models_EAGERC_BACKING-cuda.txt).
  local assign=$1; shift
  ( export "$assign"; TAG="_${assign//=/-}" step "$@" )
  return
fi
if [ "$what" = gpu-tests ] || [ "$what" = tests ]; then
  # The test that starts fresh CUDA processes runs alone afterwards: under three other
  # compiling workers its first child can run past 400 s.
  SOLO=test_new_process_loads_self_contained_artifacts
  python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" --timeout=400 $XDIST -k "not $SOLO" ${EAGERC_GPU_TESTS:-tests/test_gpu*.py} 2>&1 | tee "$OUT/tests_gpu.txt" | tail -60
  [ "${EAGERC_GPU_SKIP_SOLO:-0}" = 1 ] || \
  python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" --timeout=400 -k "$SOLO" tests/test_gpu.py 2>&1 | tee "$OUT/tests_gpu_solo.txt" | tail -40
fi
if [ "$what" = model-tests ] || [ "$what" = tests ]; then
  # The host-memory device's model tests, on the eagerc device on GPU memory.
  EAGERC_BACKING=cuda python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" --timeout=400 $XDIST tests/test_device_models.py 2>&1 \
    | tee "$OUT/tests_gpu_device_models.txt" | tail -40
fi
if [ "$what" = probe ]; then
  for mode in "$@"; do
    # One file per probe, stderr included (the device tool brings back 8 files a call).
    python3 tools/gpu_probe.py "$mode" 2>&1 | grep --line-buffered -v "Warn\|warnings.warn" > "$OUT/probe_$mode.txt"
    status=${PIPESTATUS[0]}  # the probe's own exit status, not grep's
    echo "== probe $mode (exit $status)" | tee -a "$OUT/probe_$mode.txt"; head -120 "$OUT/probe_$mode.txt"
  done
fi
if [ "$what" = bench ]; then
  python3 tools/bench_gpu.py "$@" 2>&1 | grep --line-buffered -v "Warn\|warnings.warn" | tee "$OUT/bench_$1${TAG:-}.txt"
fi
if [ "$what" = capture-train ]; then
  # Training step under eager, torch.compile and eagerc.capture (tools/bench_capture_train.py).
  python3 tools/bench_capture_train.py "$@" 2>&1 | grep --line-buffered -v "Warn\|warnings.warn" | tee "$OUT/bench_capture_train.txt"
fi
if [ "$what" = cold-child ]; then
  # One model's first forward (override mode, fresh caches) in the foreground, with its
  # progress every 5 s and every thread's stack if it runs past EAGERC_CHILD_TIMEOUT.
  fresh=$(mktemp -d)
  _EAGERC_COLD_CHILD=1 _EAGERC_COLD_VERBOSE=1 EAGERC_CACHE_DIR=$fresh/eagerc TORCHINDUCTOR_CACHE_DIR=$fresh/inductor \
    TRITON_CACHE_DIR=$fresh/triton PYTHONFAULTHANDLER=1 timeout -s ABRT "${EAGERC_CHILD_TIMEOUT:-150}" \
    python3 tools/bench_gpu.py cold-model --models "$1" 2>&1 | grep --line-buffered -v "Warn\|warnings.warn" > "$OUT/cold_child_$1.txt"
  echo "== cold-child $1 (exit ${PIPESTATUS[0]})"; tail -80 "$OUT/cold_child_$1.txt"
fi
if [ "$what" = hit ]; then
  # Hit host time per op against native CUDA eager (tools/bench_hit.py).
  python3 tools/bench_hit.py --device cuda "$@" 2>&1 | grep --line-buffered -v "Warn\|warnings.warn" | tee "$OUT/bench_hit.txt"
fi
if [ "$what" = coverage ]; then
  # The coverage report on CUDA (override mode): which ops compile, which are extern.
  python3 -m eagerc.coverage --device cuda --quiet --out "$OUT/coverage_cuda" "$@" 2>&1 | tail -30 | tee "$OUT/coverage_cuda.txt"
  # One archive: the device tool brings back only a few files per call (a report and its
  # workers' logs are more than that).
  tar czf "$OUT/coverage_cuda.tgz" -C "$OUT" coverage_cuda && rm -rf "$OUT/coverage_cuda"
fi
}
# Steps separated by "+" run one after another in one call (one build, one machine start):
#   bash tools/gpu_check.sh probe device-profile + bench device-models --rounds 7
args=()
for a in "$@" +; do
  if [ "$a" = + ]; then [ ${#args[@]} -gt 0 ] && { echo "=== step: ${args[*]} ($(date +%T))"; step "${args[@]}"; }; args=()
  else args+=("$a"); fi
done
