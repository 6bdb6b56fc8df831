#!/usr/bin/env bash
# troupe's overhead on a PyTorch module in one process: `troupe train --model torchscript` against a
# plain libtorch loop (bench/peers/torch_loop.cc) on the same scripted module, Fashion-MNIST batches
# of 64, SGD with momentum, one thread each; the two alternate RUNS times. Each run's figure is the
# median samples/s of its epochs after the first; printed: every run, the medians and their ratio.
#
#   bash bench/torch_overhead.sh [MODULE.pt] [RUNS] [EPOCHS]
# Default module: the tests' 784-64-10 MLP (build/tests/models/torch_fixtures/fashion_mlp.pt).
set -euo pipefail
cd "$(dirname "$0")/.."
module=${1:-build/tests/models/torch_fixtures/fashion_mlp.pt}
runs=${2:-5}
epochs=${3:-3}
data=/usr/share/datasets/fashion-mnist
[ -x build/bin/torch_loop ] || { echo "torch_overhead: build/bin/torch_loop missing (libtorch not found at configure?)" >&2; exit 1; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
after_first() { tail -n +2 | median; }
troupe_runs=() loop_runs=()
for r in $(seq 1 "$runs"); do
  t=$(build/bin/troupe train --no-progress --json --model torchscript --trainer-arg file="$module" --epochs "$epochs" \
        --batch-size 64 --optimizer sgd --lr 0.05 --momentum 0.9 2>/dev/null | tail -1 |
      /usr/bin/python3 -c "import json,sys; [print(h['samples_per_second']) for h in json.load(sys.stdin)['history']]" | after_first)
  l=$(build/bin/torch_loop "$module" "$data" "$epochs" 64 0.05 0.9 |
      /usr/bin/python3 -c "import json,sys; [print(json.loads(x)['samples_per_second']) for x in sys.stdin]" | after_first)
  echo "run $r: troupe $t samples/s, libtorch loop $l samples/s"
  troupe_runs+=("$t") loop_runs+=("$l")
done
t=$(printf '%s\n' "${troupe_runs[@]}" | median)
l=$(printf '%s\n' "${loop_runs[@]}" | median)
echo "median of $runs: troupe $t samples/s, libtorch loop $l samples/s, troupe/libtorch $(awk -v a="$t" -v b="$l" 'BEGIN {printf "%.3f", a / b}')"
