#!/usr/bin/env bash
# What the GCS's durability costs (issue 27): redis-server with appendfsync always (the embedded
# GCS: every acknowledged write survives a kill -9) beside everysec (up to a second lost), in one
# invocation, SET throughput with 1 and 16 clients over a unix socket, RUNS runs each; medians and
# the ratio everysec / always. Both servers write their append-only file in a temp dir on the disk
# the session directory would use (TMPDIR).
#   bench/gcs_fsync.sh [RUNS]
set -euo pipefail
runs=${1:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/troupe-gcs-fsync.XXXXXX")
cleanup() { for p in "$dir"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done; sleep 0.2; rm -rf "$dir"; }
trap cleanup EXIT
for mode in always everysec; do
  mkdir -p "$dir/$mode"
  redis-server --port 0 --unixsocket "$dir/$mode.sock" --dir "$dir/$mode" --appendonly yes --appendfsync "$mode" \
    --save "" --daemonize yes --pidfile "$dir/$mode.pid" --logfile "$dir/$mode.log"
done
for _ in $(seq 50); do [ -S "$dir/always.sock" ] && [ -S "$dir/everysec.sock" ] && break; sleep 0.1; done
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
printf "%-9s %8s %12s %12s %8s\n" clients requests "always/s" "everysec/s" ratio
for clients in 1 16; do
  n=$([ "$clients" = 1 ] && echo 5000 || echo 30000)
  declare -A rate=()
  for mode in always everysec; do
    rate[$mode]=$(for _ in $(seq "$runs"); do
      timeout 120 redis-benchmark -s "$dir/$mode.sock" -t set -n "$n" -c "$clients" 2>&1 |
        awk '/throughput summary/ {print $3}'
    done | median)
  done
  printf "%-9s %8s %12.0f %12.0f %7.1fx\n" "$clients" "$n" "${rate[always]}" "${rate[everysec]}" \
    "$(echo "${rate[everysec]} / ${rate[always]}" | bc -l)"
done
