#!/usr/bin/env bash
# README command 2 — the whole test suite: installs what is missing, builds troupe with its tests,
# and runs every test with CTest (2 in parallel). GPU tests run where a GPU is visible and are
# reported as skipped, with the reason, elsewhere. Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
export TROUPE_LOG_DIR=${TROUPE_LOG_DIR:-$PWD/build/test-logs}
cd build
status=0
# The fault matrix (label "matrix", about a minute a cell) is its own run: `cd build && ctest -L matrix`.
ctest -j"${TROUPE_JOBS:-2}" --output-on-failure --timeout 900 -LE matrix "$@" || status=$?
# Skipped tests say why in their output, which CTest keeps to itself: print those lines.
grep -h "^SKIPPED" Testing/Temporary/LastTest.log 2>/dev/null | sort -u | sed 's/^/test.sh: /' || true
exit $status
