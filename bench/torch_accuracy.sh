#!/usr/bin/env bash
# A BatchNorm CNN scripted in PyTorch (tests' fashion_bn_cnn.pt: Conv2d-BatchNorm2d-ReLU-pool twice,
# Linear) trained on Fashion-MNIST by a 2-worker sync job on a local cluster (the head alone, 2 cpus)
# and by PyTorch in Python (bench/torch_accuracy.py) with the same module, SGD at LR with momentum 0.9,
# batch 64 (troupe: 32 a worker), EPOCHS epochs: once on whole batches, once with each batch's
# BatchNorm over its two halves (--split 2: as two replicas normalise). Prints the test accuracies
# (eval mode: the running statistics) and the differences in points. Uses /usr/bin/python3 (PyTorch 1.13).
#   bash bench/torch_accuracy.sh [EPOCHS] [LR] [MODULE.pt]      (defaults 2, 0.01 and the tests' fixture)
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-2}
lr=${2:-0.01}
module=$(realpath "${3:-build/tests/models/torch_fixtures/fashion_bn_cnn.pt}")
data=/usr/share/datasets/fashion-mnist
[ -f "$module" ] || { echo "torch_accuracy: $module missing (build the troupe_torch_fixtures target)" >&2; exit 2; }
. bench/local_cluster.sh torch-accuracy
"$troupe" up --cpus 2 >/dev/null
t=$("$troupe" submit --strategy sync --workers 2 --model torchscript --trainer-arg file="$module" --epochs "$epochs" \
      --batch-size 64 --optimizer sgd --lr "$lr" --momentum 0.9 --json --no-progress 2>/dev/null | tail -1 |
    /usr/bin/python3 -c "import json,sys; s=json.load(sys.stdin); print(s['test_accuracy'])")
echo "troupe, sync 2 workers, lr $lr, $epochs epochs: $t"
echo "pytorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), one process, lr $lr, $epochs epochs:"
for split in 1 2; do
  p=$(/usr/bin/python3 bench/torch_accuracy.py "$module" "$data" --epochs "$epochs" --batch 64 --lr "$lr" --momentum 0.9 \
        --split "$split" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['accuracy'])")
  awk -v s="$split" -v a="$t" -v b="$p" \
    'BEGIN {printf "  --split %d: %.4f; troupe - pytorch: %+.2f points\n", s, b, 100 * (a - b)}'
done
