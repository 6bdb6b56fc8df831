#!/usr/bin/env bash
# A 2-worker troupe sync job against PyTorch DistributedDataParallel over Gloo (2 processes), on the
# same TorchScript modules (bench/peers/torch_modules.py: mlp, wide, cnn), Fashion-MNIST batches of
# B per replica (each case is MODULE:B), SGD with momentum, one thread per replica; the two alternate RUNS times per
# module. troupe: `troupe submit --strategy sync --workers 2 --model torchscript` on a local cluster
# of one node with 2 cpus (its epoch's samples/s over --max-steps STEPS, the first steps included);
# DDP: bench/peers/ddp_torch.py (STEPS steps after 20 untimed), which also times the same steps under
# no_sync() to give the share of DDP's step spent communicating. Prints every run, then per module
# the medians, troupe/DDP and DDP's communication share.
#
#   bash bench/torch_ddp.sh [RUNS] [STEPS] [CASES]   (default CASES: "mlp:64 wide:64 cnn:64 wide:16")
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
steps=${2:-300}
cases=${3:-"mlp:64 wide:64 cnn:64 wide:16"}
python=/usr/bin/python3
troupe=$PWD/build/bin/troupe
[ -x "$troupe" ] && [ -f build/lib/troupe/models/libtroupe_model_torchscript.so ] ||
  { echo "torch_ddp: build troupe with libtorch first (bash scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
export TROUPE_HOME=$work/home OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# glibc maps every tensor over its mmap threshold afresh each step (page faults on every touch): with
# the default, PyTorch in Python trained the cnn at a quarter of its speed here. Both sides (the
# cluster's processes too) run with the threshold raised, the peer at its best.
export MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824
trap '"$troupe" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
$python bench/peers/torch_modules.py "$work/modules"
"$troupe" up --nodes 0 --cpus 2 >/dev/null
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
json_field() { $python -c "import json,sys; print(json.loads(sys.stdin.readlines()[-1])['$1'])"; }
summary=()
for case in $cases; do
  m=${case%%:*} batch=${case#*:}
  shape=784; [ "$m" = cnn ] && shape=1,28,28
  t_runs=() d_runs=() share_runs=()
  for r in $(seq 1 "$runs"); do
    t=$("$troupe" submit --strategy sync --workers 2 --model torchscript --trainer-arg file="$work/modules/$m.pt" \
          --trainer-arg input_shape=$shape --batch-size $((2 * batch)) --max-steps "$steps" --optimizer sgd --lr 0.05 \
          --momentum 0.9 --json --no-progress | json_field samples_per_second)
    d_json=$($python bench/peers/ddp_torch.py "$work/modules/$m.pt" --workers 2 --batch "$batch" --steps "$steps" \
               --input-shape "$shape")
    d=$(echo "$d_json" | json_field samples_per_second)
    c=$(echo "$d_json" | json_field compute_samples_per_second)
    share=$(awk -v s="$d" -v c="$c" 'BEGIN {printf "%.3f", 1 - s / c}')
    printf '%s run %d: troupe %.0f samples/s, DDP %.0f samples/s (DDP without all-reduce %.0f: %.0f%% communicating)\n' \
      "$case" "$r" "$t" "$d" "$c" "$(awk -v x="$share" 'BEGIN {print 100 * x}')"
    t_runs+=("$t") d_runs+=("$d") share_runs+=("$share")
  done
  t=$(printf '%s\n' "${t_runs[@]}" | median)
  d=$(printf '%s\n' "${d_runs[@]}" | median)
  share=$(printf '%s\n' "${share_runs[@]}" | median)
  summary+=("$(printf '%-8s median of %d: troupe %.0f samples/s, DDP %.0f samples/s, troupe/DDP %.2fx, DDP communicating %.0f%% of its step' \
    "$case" "$runs" "$t" "$d" "$(awk -v a="$t" -v b="$d" 'BEGIN {print a / b}')" "$(awk -v x="$share" 'BEGIN {print 100 * x}')")")
done
printf '%s\n' "${summary[@]}"
