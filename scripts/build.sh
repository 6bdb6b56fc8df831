#!/usr/bin/env bash
# Configures and builds troupe into build/ (Release, ccache, -j2 by default). CUDA sources are
# compiled when nvcc is found at /usr/local/cuda. Extra arguments go to cmake's configure step.
#   TROUPE_JOBS=N          parallel compile jobs (default 2)
#   TROUPE_TARGETS="a b"   only these targets (default: everything, the tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TROUPE_JOBS:-2}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths inside the checkout are hashed relative to it, so another clone reuses the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
grep -E "^-- troupe:" build-configure.log || true
targets=()
for t in ${TROUPE_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j"$jobs" "${targets[@]}"
