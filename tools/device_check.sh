#!/usr/bin/env bash
# Runs on the lent GPU machine (torch 2.11 + CUDA, Python 3.12, no network): builds
# eagerc against that torch, runs the CPU behaviour tests there and the hit benchmark.
# Carry the wheels it lacks in .whl/ (diskcache, expecttest); see docs/benchmarks.md.
set -uo pipefail
OUT=${OUT:-/tmp/eagerc-device-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export EAGERC_CACHE_DIR=/tmp/eagerc-cache
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
nproc
time python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -30 || exit 1
python3 -c "import eagerc, torch; print('import ok'); print(len(eagerc.enable('cpu')), 'ops registered on CPU'); eagerc.disable('cpu')"
python3 -m pytest tests/test_kernel_behaviour.py tests/test_kernel_cache.py -q -x -p no:cacheprovider 2>&1 | tail -15
python3 tools/bench_hit.py --repeats 100 2>&1 | grep -v Warn | tee "$OUT/bench_hit_cpu.txt"
python3 -m eagerc demo 2>&1 | grep -v Warn | tail -12
