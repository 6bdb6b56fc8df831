#!/usr/bin/env bash
# What the buddy mirror of live recovery costs a sharded sync job (docs/benchmarks.md): the same job,
# 4 workers on a local head (`troupe up --nodes 0 --cpus 4`), for each --shard stage run in turn
# with --recovery checkpoint (no mirror) and --recovery live at --mirror-every 1 and 10 (the send
# after each step: --mirror-overlap off) and at --mirror-every 1 overlapped (on). Reads each
# job's training throughput from its summary (samples_per_second over the steps it trained) and prints
# every run, then per stage the medians and the cost of the mirror against no mirror.
#   bench/mirror_cost.sh [RUNS] [STEPS]   (default 3 runs of 400 steps; build/bin/troupe must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
steps=${2:-400}
. bench/local_cluster.sh mirror_cost
"$troupe" up --nodes 0 --cpus 4 >/dev/null

one_job() {  # one_job STAGE RECOVERY EVERY OVERLAP: the job's samples/s
  "$troupe" submit --strategy sync --workers 4 --epochs 1 --batch-size 128 --max-steps "$steps" --seed 3 \
    --shard "$1" --recovery "$2" --mirror-every "$3" --mirror-overlap "$4" --json --no-progress 2>/dev/null | tail -1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(d['samples_per_second'])"
}

results=()
for run in $(seq 1 "$runs"); do
  for stage in optimizer gradients parameters; do
    for config in "checkpoint 1 off" "live 1 off" "live 10 off" "live 1 on"; do
      set -- $config
      rate=$(one_job "$stage" "$1" "$2" "$3")
      label=$([ "$1" = checkpoint ] && echo "no-mirror" || echo "every-$2$([ "$3" = on ] && echo -overlapped)")
      echo "run $run --shard $stage $label: $rate samples/s"
      results+=("$stage $label $rate")
    done
  done
done
printf '%s\n' "${results[@]}" | python3 -c "
import statistics,sys
rows={}
for l in sys.stdin:
    if l.strip():
        stage,label,rate=l.split(); rows.setdefault((stage,label),[]).append(float(rate))
for stage in ('optimizer','gradients','parameters'):
    base=statistics.median(rows[(stage,'no-mirror')])
    parts=['no mirror %.0f samples/s' % base]
    for label in ('every-1','every-10','every-1-overlapped'):
        m=statistics.median(rows[(stage,label)])
        parts.append('%s %.0f (step time +%.1f%%)' % (label.replace('-',' '), m, 100*(base/m-1)))
    print('--shard %-10s medians of %d: ' % (stage, len(rows[(stage,'no-mirror')])) + ', '.join(parts))"
