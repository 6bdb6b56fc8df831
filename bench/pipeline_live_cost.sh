#!/usr/bin/env bash
# What live recovery costs a pipeline's steps (docs/benchmarks.md): the same pipeline job, 4 workers on
# a local head (`troupe up --nodes 0 --cpus 4`), as 2 replicas x 2 stages and 1 replica x 4 stages,
# run in turn with --recovery checkpoint (nothing kept) and --recovery live (a copy of the stage's
# state before each update; with one replica also the buddy mirror's send of the stage's state after
# each update; and one replica at --mirror-every 10: a round every 10 steps and no copy before each
# update). Reads each job's training throughput from its summary and prints every run, then per shape
# the medians and the step-time cost of live recovery.
#   bench/pipeline_live_cost.sh [RUNS] [STEPS]   (default 3 runs of 400 steps; build/bin/troupe must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
steps=${2:-400}
. bench/local_cluster.sh pipeline_live_cost
"$troupe" up --nodes 0 --cpus 4 >/dev/null

one_job() {  # one_job STAGES RECOVERY [MIRROR_EVERY]: the job's samples/s
  "$troupe" submit --strategy pipeline --stages "$1" --workers 4 --microbatches 4 --hidden 256,128,64 --epochs 1 \
    --batch-size 128 --max-steps "$steps" --seed 3 --recovery "$2" --mirror-every "${3:-1}" --json --no-progress \
    2>/dev/null | tail -1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(d['samples_per_second'])"
}

results=()
for run in $(seq 1 "$runs"); do
  for stages in 2 4; do
    for recovery in checkpoint live; do
      rate=$(one_job "$stages" "$recovery")
      echo "run $run, $((4 / stages)) x $stages, --recovery $recovery: $rate samples/s"
      results+=("$stages $recovery $rate")
    done
  done
  rate=$(one_job 4 live 10)
  echo "run $run, 1 x 4, --recovery live --mirror-every 10: $rate samples/s"
  results+=("4 live10 $rate")
done
printf '%s\n' "${results[@]}" | python3 -c "
import statistics,sys
rows={}
for l in sys.stdin:
    if l.strip():
        stages,recovery,rate=l.split(); rows.setdefault((stages,recovery),[]).append(float(rate))
for stages in ('2','4'):
    base=statistics.median(rows[(stages,'checkpoint')]); live=statistics.median(rows[(stages,'live')])
    print('%d x %s (%s) medians of %d: checkpoint %.0f samples/s, live %.0f (step time +%.1f%%)' % (
        4//int(stages), stages, 'kept state + buddy mirror' if stages=='4' else 'kept state', len(rows[(stages,'live')]),
        base, live, 100*(base/live-1)))
base=statistics.median(rows[('4','checkpoint')]); live=statistics.median(rows[('4','live10')])
print('1 x 4 (buddy mirror every 10 steps) medians of %d: checkpoint %.0f samples/s, live %.0f (step time +%.1f%%)' % (
    len(rows[('4','live10')]), base, live, 100*(base/live-1)))"
