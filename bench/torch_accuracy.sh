#!/usr/bin/env bash
# A BatchNorm CNN scripted in PyTorch (tests' fashion_bn_cnn.pt: Conv2d-BatchNorm2d-ReLU-pool twice,
# Linear) trained on Fashion-MNIST by a 2-worker sync job on a local cluster (the head alone, 2 cpus)
# and by PyTorch in Python (bench/torch_accuracy.py) with the same module, SGD at LR decayed by a cosine
# to 0 over the run (troupe's default --lr-schedule; torch_accuracy.py's CosineAnnealingLR per step)
# with momentum 0.9, batch 64 (troupe: 32 a worker), EPOCHS epochs, for each seed of SEEDS: PyTorch once on whole batches, once with each batch's
# BatchNorm over its two halves and the buffers moved by the halves' mean change (--split 2
# --average-buffers: what troupe's two replicas do). Prints the test accuracies (eval mode: the running
# statistics), their means and the differences in points. Uses /usr/bin/python3 (PyTorch 1.13).
#   bash bench/torch_accuracy.sh [EPOCHS] [LR] [SEEDS] [MODULE.pt]   (defaults 2, 0.01, "1 2 3", the fixture)
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-2}
lr=${2:-0.01}
seeds=${3:-1 2 3}
module=$(realpath "${4:-build/tests/models/torch_fixtures/fashion_bn_cnn.pt}")
data=/usr/share/datasets/fashion-mnist
[ -f "$module" ] || { echo "torch_accuracy: $module missing (build the troupe_torch_fixtures target)" >&2; exit 2; }
. bench/local_cluster.sh torch-accuracy
"$troupe" up --cpus 2 >/dev/null
rows=()
for seed in $seeds; do
  t=$("$troupe" submit --strategy sync --workers 2 --model torchscript --trainer-arg file="$module" --epochs "$epochs" \
        --batch-size 64 --optimizer sgd --lr "$lr" --lr-schedule cosine --momentum 0.9 --seed "$seed" --json \
        --no-progress 2>/dev/null | tail -1 | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['test_accuracy'])")
  py() { /usr/bin/python3 bench/torch_accuracy.py "$module" "$data" --epochs "$epochs" --batch 64 --lr "$lr" \
           --momentum 0.9 --schedule cosine --seed "$seed" "$@" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['accuracy'])"; }
  whole=$(py --split 1)
  halves=$(py --split 2 --average-buffers)
  echo "seed $seed: troupe sync 2 workers $t, pytorch whole batches $whole, pytorch halves $halves"
  rows+=("$t $whole $halves")
done
printf '%s\n' "${rows[@]}" | /usr/bin/python3 -c "
import statistics, sys
t, w, h = zip(*[map(float, l.split()) for l in sys.stdin])
mt, mw, mh = statistics.mean(t), statistics.mean(w), statistics.mean(h)
print(f'means over {len(t)} seed(s), lr $lr, $epochs epochs: troupe {mt:.4f}, pytorch whole batches {mw:.4f} '
      f'({100 * (mt - mw):+.2f} points), pytorch halves {mh:.4f} ({100 * (mt - mh):+.2f} points)')"
