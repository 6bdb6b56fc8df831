#!/usr/bin/env bash
# Sharded data parallelism in worker processes (issue 24's benchmark; bench_sharded runs the same
# replicas as threads of one process): on a local cluster (the head alone, 2 cpus), a sync job of 2
# workers training the gpt L6 H6 D384 (T 128, byte vocabulary, adamw, global batch 8 windows) for
# STEPS steps under --shard none, optimizer, gradients and parameters, each ROUNDS times, the stages
# interleaved within a round. Prints per job the step time (the job's training samples/s), the
# transport, the communication hidden behind backward and the sharded state a worker holds, then
# the medians and the ratios to plain sync.
#   bench/sharded_jobs.sh [ROUNDS] [STEPS]     (defaults 3 and 20; build/bin/troupe must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-20}
. bench/local_cluster.sh sharded-jobs
# Bytes of text: the repository's documentation, a small part of it held out to evaluate on.
cat docs/*.md > "$TROUPE_HOME/train.txt"
head -c 20000 docs/status.md > "$TROUPE_HOME/val.txt"
"$troupe" up --cpus 2 >/dev/null
rows=()
for round in $(seq 1 "$rounds"); do
  for shard in none optimizer gradients parameters; do
    line=$("$troupe" submit --strategy sync --workers 2 --shard "$shard" --model gpt --trainer-arg layers=6 \
             --trainer-arg heads=6 --trainer-arg dim=384 --data "text:$TROUPE_HOME/train.txt" \
             --val "text:$TROUPE_HOME/val.txt" --seq-len 128 --batch-size 8 --max-steps "$steps" --epochs 1 \
             --optimizer adamw --json --no-progress 2>/dev/null | tail -1 |
           python3 -c "
import json,sys; s=json.load(sys.stdin)
print(1000 * 8 / s['samples_per_second'], s['transport'], s.get('communication_hidden_fraction', 0),
      s.get('sharded_state_bytes', 0))")
    echo "round $round --shard $shard: step ms, transport, hidden, sharded state bytes = $line"
    rows+=("$shard $line")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c "
import statistics,sys
by={}
for l in sys.stdin:
    f=l.split(); by.setdefault(f[0],[]).append((float(f[1]), f[2], float(f[3]), float(f[4])))
base=statistics.median(r[0] for r in by['none'])
print('| --shard | step ms (median) | ratio | transport | hidden | sharded state MB/worker |')
print('|---|---:|---:|---|---:|---:|')
for k in ('none','optimizer','gradients','parameters'):
    r=by[k]; ms=statistics.median(x[0] for x in r)
    state=statistics.median(x[3] for x in r)/2**20
    hidden=statistics.median(x[2] for x in r)
    print(f'| {k} | {ms:.1f} | {ms/base:.3f} | {r[0][1]} | {hidden:.0%} | ' + (f'{state:.1f}' if state else '-') + ' |')
"
