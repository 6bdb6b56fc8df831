#!/usr/bin/env bash
# Prediction rows/s in one process and as a job of 1, 2 and 4 predictors (issue 22;
# docs/benchmarks.md). Fixture: the Fashion-MNIST training images four times over (240,000 rows of
# u8[28,28] and their labels, written by NumPy), the mlp 784-256-128-10 trained 300 steps and saved.
# One process: `troupe predict --json` (the whole command: model and data read, rows converted,
# predicted in batches of 1,024, the .npy written durably). Jobs: a local cluster (the head + 2 nodes,
# 2 cpus each), `troupe predict --workers N --json`; two figures per run: the job's own rows/s (the
# rows over the span from the first shard claimed to the last part written) and the whole command's
# (submission, placement, each predictor loading the model and mapping the data, the assembly of
# --out, the result). Every job's output is compared byte for byte with the one-process output.
# Prints each run and the medians.
#   bench/predict_scaling.sh [RUNS]      (default 3; build/bin/troupe must be built; /usr/bin/python3
#                                         with NumPy and the Fashion-MNIST package for the fixture)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
troupe=$PWD/build/bin/troupe
work=$(mktemp -d /tmp/troupe-predict-bench.XXXXXX)
export TROUPE_HOME=$work/home
trap '"$troupe" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$work/data" "$work/big"
/usr/bin/python3 - "$work" <<'PY'
import gzip, os, sys
import numpy as np
os.chdir(sys.argv[1])
src = '/usr/share/datasets/fashion-mnist'
def idx(path):
    with gzip.open(path) as f: b = f.read()
    nd = b[3]; dims = [int.from_bytes(b[4+4*i:8+4*i], 'big') for i in range(nd)]
    return np.frombuffer(b[4+4*nd:], dtype=np.uint8).reshape(dims)
x = idx(src + '/train-images-idx3-ubyte.gz'); y = idx(src + '/train-labels-idx1-ubyte.gz').astype(np.int64)
np.save('data/x_train.npy', x); np.save('data/y_train.npy', y)
np.save('data/x_test.npy', idx(src + '/t10k-images-idx3-ubyte.gz'))
np.save('data/y_test.npy', idx(src + '/t10k-labels-idx1-ubyte.gz').astype(np.int64))
np.save('big/x.npy', np.tile(x, (4, 1, 1))); np.save('big/y.npy', np.tile(y, 4))
PY
"$troupe" train --data "$work/data" --epochs 1 --max-steps 300 --no-progress --save "$work/m.safetensors" >/dev/null
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one=()
for run in $(seq 1 "$runs"); do
  r=$("$troupe" predict --model "$work/m.safetensors" --data "$work/big" --out "$work/one.npy" --json)
  one+=("$(echo "$r" | field rows_per_second)")
  echo "one process, run $run: $(echo "$r" | field rows_per_second) rows/s ($(echo "$r" | field seconds) s)"
done
"$troupe" up --nodes 2 --cpus 2 >/dev/null
summary="one process: median $(median "${one[@]}") rows/s"
for workers in 1 2 4; do
  job=() whole=()
  for run in $(seq 1 "$runs"); do
    t0=$(date +%s%N)
    r=$("$troupe" predict --model "$work/m.safetensors" --data "$work/big" --out "$work/job.npy" --workers "$workers" --json 2>/dev/null)
    t1=$(date +%s%N)
    cmp -s "$work/one.npy" "$work/job.npy" || { echo "predict_scaling.sh: $workers workers: output differs from one process" >&2; exit 1; }
    rows=$(echo "$r" | field rows)
    w=$(python3 -c "print(round($rows / (($t1 - $t0) / 1e9)))")
    job+=("$(echo "$r" | field rows_per_second)")
    whole+=("$w")
    echo "$workers workers, run $run: job $(echo "$r" | field rows_per_second) rows/s, whole command $w rows/s ($(python3 -c "print(round(($t1 - $t0) / 1e9, 3))") s), output equal"
  done
  summary="$summary; $workers workers: job $(median "${job[@]}"), whole command $(median "${whole[@]}") rows/s"
done
echo "medians: $summary"
