#!/usr/bin/env bash
# Sets up everything eagerc needs on a fresh machine (Python 3.11 or 3.12), then builds
# the C++ extension. Safe to run again: installed packages are skipped, the build reused.
# Each step says what it does as it starts; pip shows its own progress, the C++ build one
# line per compiled file (its full output goes to build/setup-build.log).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
START=$SECONDS
mkdir -p build

step() { echo; echo "==> setup [$1/5, $((SECONDS - START)) s]: $2"; }

# torch first and pinned: a bare `torch` (or any package that asks for one) could pull a
# multi-GB CUDA build; 2.13.0 is the CPU build on this machine's local disk.
step 1 "torch 2.13.0 (CPU build)"
if version=$($PY -c "import torch; print(torch.__version__)" 2>/dev/null); then
  echo "torch $version is installed; kept"
else
  $PY -m pip install "torch==2.13.0"
fi

# Build tools, runtime and test dependencies: pyproject's dependencies and its test, redis
# and ray extras (none of them asks for another torch). The build runs without isolation
# so it uses the torch above instead of fetching another one.
step 2 "build tools, runtime and test dependencies (pip; the first time downloads ray, transformers, diffusers and what they need)"
$PY -m pip install "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja "diskcache>=5.6" \
  "tqdm>=4.60" "pytest>=8" expecttest "transformers>=4.40,<6" "diffusers==0.42.1" "redis>=5" \
  "ray==2.60.0" "accelerate==1.16.0" "lightning==2.6.6" "pytest-xdist==3.8.0" "pytest-timeout==2.4.0"
# TorchCTS, the PrivateUse1 conformance suite: 0.4.x declares torch < 2.12.2, so it is
# installed without its declared dependencies (it needs nothing torch does not bring).
$PY -m pip install --no-deps "torchcts==0.4.1"

SOURCES=$(find csrc -name '*.cpp' | wc -l)
step 3 "eagerc's C++ extension (csrc/, $SOURCES C++ files; 3-6 minutes on 2 cores the first time, seconds after)"
BUILD_LOG=build/setup-build.log
: >"$BUILD_LOG"
$PY -m pip install -v --no-build-isolation --no-deps -e . >"$BUILD_LOG" 2>&1 &
BUILD_PID=$!
echo "  pip: installing eagerc, editable (full output: $BUILD_LOG)"
# What the build is doing, as it happens: pip's and scikit-build-core's stages, CMake's
# configure findings, then one line per file as the compiler finishes it (ninja's
# "[n/total] Building ..."); an unchanged tree compiles nothing and prints no file lines.
SHOWN='Running command (Preparing editable metadata|Building editable)|\*\*\* (Configuring CMake|Building project)|-- (The CXX compiler identification|Found Torch|Found pybind11|Configuring done|Build files have been written)|\[[0-9]+/[0-9]+\] (Building CXX object|Linking)'
tail -n +1 -f "$BUILD_LOG" --pid "$BUILD_PID" 2>/dev/null | sed -nu -E \
  -e 's#.*Running command Preparing editable metadata.*#  pip: reading the project (pyproject.toml)#p' \
  -e 's#.*Running command Building editable.*#  pip: building eagerc (scikit-build-core drives CMake and ninja)#p' \
  -e 's#.*\*\*\* Configuring CMake.*#  cmake: configuring (finds the compiler, torch and pybind11; 5-40 s)#p' \
  -e 's#.*-- (The CXX compiler identification.*|Found Torch.*|Found pybind11.*|Configuring done.*)$#  cmake: \1#p' \
  -e 's#.*\*\*\* Building project.*#  ninja: compiling (one line per file)#p' \
  -e 's#.*\[([0-9]+/[0-9]+)\] Building CXX object CMakeFiles/_eagerc\.dir/(.*)\.o$#  [\1] \2#p' \
  -e 's#.*\[([0-9]+/[0-9]+)\] Linking.*#  [\1] linked _eagerc (eagerc._C)#p' || true &
SHOW_PID=$!
# A line when 7 s pass without one (a large file under load compiles for longer).
(
  shown=0 quiet_since=$SECONDS
  while kill -0 "$BUILD_PID" 2>/dev/null; do
    sleep 1
    now=$(grep -cE "$SHOWN" "$BUILD_LOG" 2>/dev/null || true)
    if [ "${now:-0}" != "$shown" ]; then
      shown=${now:-0} quiet_since=$SECONDS
    elif (( SECONDS - quiet_since >= 7 )) && kill -0 "$BUILD_PID" 2>/dev/null; then
      last=$(grep -oE '\[[0-9]+/[0-9]+\]' "$BUILD_LOG" | tail -n 1 || true)
      echo "  ... still building (${last:+last finished $last, }$((SECONDS - START)) s)"
      quiet_since=$SECONDS
    fi
  done
) &
TICK_PID=$!
BUILD_STATUS=0
wait "$BUILD_PID" || BUILD_STATUS=$?
wait "$SHOW_PID" "$TICK_PID" 2>/dev/null || true
if [ "$BUILD_STATUS" != 0 ]; then
  tail -n 30 "$BUILD_LOG"
  echo "setup: the C++ build failed; its full output is in $BUILD_LOG"
  exit 1
fi
echo "eagerc installed (editable, C++ extension built) at $((SECONDS - START)) s"

# apt-get install PACKAGE, waiting while another job (unattended-upgrades, a second
# setup) holds apt's lock instead of calling the package missing; never fatal.
apt_install() {
  local package=$1 log=build/setup-apt-$1.log attempt holder
  : >"$log"
  for attempt in $(seq 1 60); do
    if apt-get -o DPkg::Lock::Timeout=10 install -y -q "$package" >>"$log" 2>&1 || \
       { apt-get -o DPkg::Lock::Timeout=10 update -q >>"$log" 2>&1 && \
         apt-get -o DPkg::Lock::Timeout=10 install -y -q "$package" >>"$log" 2>&1; }; then
      echo "$package installed"
      return 0
    fi
    if ! tail -n 5 "$log" | grep -qiE "could not get lock|unable to acquire|unable to lock"; then
      echo "setup: apt could not install $package: $(grep -E '^E:' "$log" | tail -n 1) (full output: $log)"
      return 1
    fi
    holder=$(tail -n 5 "$log" | grep -oE "held by process [0-9]+( \([^)]*\))?" | tail -n 1)
    echo "apt's lock is ${holder:-held by another job}: waiting for it to be released (attempt $attempt of 60)"
    sleep 5
  done
  echo "setup: apt's lock stayed held for 15 minutes; $package not installed (run tools/setup.sh again later)"
  return 1
}

# A redis-server lets the remote-tier tests run and Chromium (headless) the coverage
# report's browser test (both skip cleanly without them); clang with LLVM's omp.h
# (libomp-dev) compiles CPU kernels in about half of g++'s time (codegen/cpp/clang_units.py;
# without them g++ builds everything). Installed where the machine allows (root with apt).
step 4 "redis-server, chromium and clang (apt, where this machine allows)"
for pair in redis-server:redis-server chromium:chromium clang++:clang omp.h:libomp-dev; do
  command_name=${pair%%:*} package=${pair##*:}
  if command -v "$command_name" >/dev/null 2>&1 || \
     { [ "$command_name" = omp.h ] && ls /usr/lib/llvm-*/lib/clang/*/include/omp.h >/dev/null 2>&1; }; then
    echo "$package is installed"
  elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt_install "$package" || echo "setup: without $package the tests that need it skip, saying so"
  else
    echo "setup: $package is not installed and this is no root shell with apt; the tests that need it skip"
  fi
done

step 5 "check"
$PY -c "import eagerc; print('eagerc', eagerc.__version__, 'ready with torch', __import__('torch').__version__)"
echo "setup done in $((SECONDS - START)) s"
