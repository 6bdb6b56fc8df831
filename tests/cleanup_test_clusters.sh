#!/usr/bin/env bash
# CTest cleanup fixture of the cluster suites (FIXTURES_CLEANUP test_clusters): runs after the last
# test that starts clusters. A test killed by its timeout never runs its fixture's destructor, so
# its cluster (redis-server, head, nodes, job actors) would run on and load every later test. Test
# clusters live under <build>/test-homes/ (tests/cluster/cluster_fixture.h); this finds processes
# whose TROUPE_HOME (or working directory) is there, gives them 5 s to end, SIGKILLs what is left, removes the homes, and
# fails naming the processes it had to kill (a test that leaked its cluster is a defect).
set -uo pipefail
homes="${1:?usage: cleanup_test_clusters.sh BUILD_DIR/test-homes}"

leftovers() {
  local env pid
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [[ $pid == "$$" ]] && continue
    # A troupe process has TROUPE_HOME in its environment; the embedded redis-server runs in the
    # session's redis/ directory instead.
    if { tr '\0' '\n' < "$env"; } 2>/dev/null | grep -q "^TROUPE_HOME=$homes/" ||
       [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$homes/"* ]]; then
      echo "$pid"
    fi
  done
}

# The grace is 5 s of the clock, not a count of scans: one scan of /proc takes ~2 s on a loaded
# 2-core machine, and 50 of them outlasted the fixture's 60 s timeout with the leftovers alive.
pids=$(leftovers)
deadline=$((SECONDS + 5))
while [[ -n $pids && $SECONDS -lt $deadline ]]; do
  sleep 0.2
  pids=$(leftovers)
done
status=0
if [[ -n $pids ]]; then
  echo "cleanup_test_clusters: processes of test clusters still running after their tests (a test timed out or leaked its cluster):"
  for pid in $pids; do
    echo "  pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)"
    kill -9 "$pid" 2>/dev/null
  done
  status=1
fi
rm -rf "$homes"
[[ $status == 0 ]] && echo "cleanup_test_clusters: no test cluster left running under $homes"
exit $status
