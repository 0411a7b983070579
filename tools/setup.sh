#!/usr/bin/env bash
# Sets up everything eagerc needs on a fresh machine (Python 3.11 or 3.12), then builds
# the C++ extension. Safe to run again: installed packages are skipped, the build reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# torch first and pinned: a bare `torch` (or any package that asks for one) could pull a
# multi-GB CUDA build; 2.13.0 is the CPU build on this machine's local disk.
if ! $PY -c "import torch" 2>/dev/null; then
  $PY -m pip install -q "torch==2.13.0"
fi
# Build tools, runtime and test dependencies. The build runs without isolation so it
# uses the torch above instead of fetching another one.
$PY -m pip install -q "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja "diskcache>=5.6" \
  tqdm pytest expecttest "transformers>=4.40,<6" redis
$PY -m pip install -q --no-build-isolation --no-deps -e .
# A redis-server lets the remote-tier tests run (they skip cleanly without one); installed
# where the machine allows (root with apt), never fatal.
if ! command -v redis-server >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get install -y -q redis-server >/dev/null 2>&1 || \
   (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q redis-server >/dev/null 2>&1)) || \
    echo "setup: redis-server not installed; the remote-tier tests will skip"
fi
# Chromium (headless) lets the coverage report's HTML test run in a real browser (it skips
# cleanly without one); installed where the machine allows, never fatal.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get install -y -q chromium >/dev/null 2>&1 || \
   (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1)) || \
    echo "setup: chromium not installed; the coverage report's browser test will skip"
fi
$PY -c "import eagerc; print('eagerc', eagerc.__version__, 'ready with torch', __import__('torch').__version__)"
