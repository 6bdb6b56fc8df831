#!/usr/bin/env bash
# Actor creation through the head, two troupe builds side by side (docs/benchmarks.md, issue 41):
# for each run and each build in turn, `troupe up --nodes NODES --cpus 1` on a fresh TROUPE_HOME
# (timed: the cluster up), then `troupe spawn echo --count COUNT --cpus 0` (timed: the CLI's start,
# its connection and the spawn; every actor must be reported started), then `troupe down`. Prints
# each run, the medians and the ratio B/A of each figure.
#   bench/actor_creation.sh TROUPE_A TROUPE_B [RUNS] [NODES] [COUNT]   (defaults 5, 16, 10000)
set -euo pipefail
a=${1:?"usage: bench/actor_creation.sh TROUPE_A TROUPE_B [RUNS] [NODES] [COUNT]"}
b=${2:?"usage: bench/actor_creation.sh TROUPE_A TROUPE_B [RUNS] [NODES] [COUNT]"}
runs=${3:-5}
nodes=${4:-16}
count=${5:-10000}
for t in "$a" "$b"; do [ -x "$t" ] || { echo "actor_creation: $t is not an executable" >&2; exit 2; }; done
ms() { date +%s%3N; }
home=""
cleanup() { [ -n "$home" ] && { TROUPE_HOME=$home timeout 60 "$current" down >/dev/null 2>&1 || true; rm -rf "$home"; }; }
trap cleanup EXIT
# One run of build $1: prints "up_s actors_per_s".
one() {
  current=$1
  home=$(mktemp -d /tmp/troupe-actor-creation.XXXXXX)
  export TROUPE_HOME=$home
  local t0 t1 t2 out started
  t0=$(ms)
  timeout 120 "$current" up --nodes "$nodes" --cpus 1 >/dev/null
  t1=$(ms)
  out=$(timeout 120 "$current" spawn echo --count "$count" --cpus 0 2>/dev/null | head -1)
  t2=$(ms)
  started=$(echo "$out" | sed -n 's/^started \([0-9]*\) of .*/\1/p')
  [ "$started" = "$count" ] || { echo "actor_creation: $current started $started of $count actors" >&2; exit 1; }
  timeout 60 "$current" down >/dev/null 2>&1 || true
  rm -rf "$home"
  home=""
  python3 -c "import sys; up=(int(sys.argv[2])-int(sys.argv[1]))/1000; sp=(int(sys.argv[3])-int(sys.argv[2]))/1000; print(f'{up:.2f} {int(sys.argv[4])/sp:.0f}')" \
    "$t0" "$t1" "$t2" "$count"
}
results=()
for run in $(seq 1 "$runs"); do
  ra=$(one "$a"); rb=$(one "$b")
  echo "run $run: A up ${ra% *} s, ${ra#* } actors/s | B up ${rb% *} s, ${rb#* } actors/s"
  results+=("$ra $rb")
done
printf '%s\n' "${results[@]}" | python3 -c "
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
med = [statistics.median(r[i] for r in rows) for i in range(4)]
print(f'median of {len(rows)}: A up {med[0]:.2f} s, {med[1]:,.0f} actors/s | B up {med[2]:.2f} s, {med[3]:,.0f} actors/s')
print(f'B/A: up {med[2]/med[0]:.3f}x the time, actors/s {med[3]/med[1]:.3f}x')
"
