#!/usr/bin/env bash
# What ASHA saves against running every trial to the end (docs/benchmarks.md, issue 25): on a local
# cluster (head + 1 node, 4 cpus each) the default settings' job, then the same 12-trial search
# (lr log-uniform in [3e-4, 1e-2], four hidden-layer shapes; the same --seed draws the same trials)
# with `--scheduler fifo`, `--scheduler asha` (all 12 trials at once) and asha with
# `--max-concurrent 4` side by side, each run RUNS times. Prints per run the best trial's accuracy,
# the trial-epochs trained and the wall time, then the medians and the ratios to fifo.
#   bench/tune_asha.sh [RUNS] [EPOCHS]     (defaults 3 and 6; build/bin/troupe must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
epochs=${2:-6}
. bench/local_cluster.sh tune
"$troupe" up --nodes 1 --cpus 4 >/dev/null
default=$("$troupe" submit --epochs "$epochs" --json --no-progress 2>/dev/null | tail -1 |
          python3 -c "import json,sys; print(json.load(sys.stdin)['test_accuracy'])")
echo "default settings (adam 0.002, hidden 256,128), $epochs epochs: test accuracy $default"
rows=()
for run in $(seq 1 "$runs"); do
  for config in fifo asha asha-k4; do
    scheduler=${config%-k4}
    concurrent=0
    [ "$config" = asha-k4 ] && concurrent=4
    start=$(date +%s%3N)
    line=$("$troupe" tune --search 'lr=loguniform(3e-4,1e-2)' --search "hidden=choice(128,256,'256,128','512,256')" \
             --trials 12 --epochs "$epochs" --scheduler "$scheduler" --seed "$run" --max-concurrent "$concurrent" \
             --search-dir "$TROUPE_HOME/search-$config-$run" --json --no-progress 2>/dev/null | tail -1 |
           python3 -c "
import json,sys; s=json.load(sys.stdin)
stopped=sum(1 for t in s['trials'] if t['stopped_at']>0)
print(s['best_value'], s['trial_epochs'], s['trial_epochs_budget'], stopped)")
    wall=$(( $(date +%s%3N) - start ))
    echo "run $run $config: best accuracy, trial-epochs, of, stopped early, wall s = $line $(python3 -c "print($wall/1000)")"
    rows+=("$config $line $wall")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c "
import statistics,sys
by={}
for l in sys.stdin:
  f=l.split()
  if f: by.setdefault(f[0],[]).append(list(map(float,f[1:])))
med={k:[statistics.median(c) for c in zip(*v)] for k,v in by.items()}
for k in ('fifo','asha','asha-k4'):
  m=med[k]; print('%s median of %d: best %.4f, trial-epochs %g of %g, stopped %g, wall %.1f s' % (k,len(by[k]),m[0],m[1],m[2],m[3],m[4]/1000))
for k in ('asha','asha-k4'):
  print('%s / fifo: trial-epochs %.2f, wall %.2f; best accuracy %s - default %+.4f, fifo - default %+.4f' % (
    k, med[k][1]/med['fifo'][1], med[k][4]/med['fifo'][4], k, med[k][0]-$default, med['fifo'][0]-$default))"
