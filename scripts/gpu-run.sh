#!/usr/bin/env bash
# Runs on the lent GPU machine, in the repository root, with .gpu/ from scripts/gpu-pack.sh carried:
# unpacks it, finds cuDNN (the toolkit's, else the one PyTorch's wheels bring), then runs
#   tests:   every GPU test (troupe_gpu_tests), one process per test file, side by side: kernels
#            against the CPU references, the mlp and cnn trainers, bf16/f16, sync replicas, async
#            workers, device collectives;
#   cli:     `troupe train --device cuda`: mlp f32/bf16/f16 (10 epochs) and cnn (4 epochs, batch 32);
#   cluster: a local cluster (troupe up) with sync and async jobs of 2 workers on the one GPU
#            (--gpus-per-worker 0.5, the staged path) and the async job on the CPU beside them;
#   bench:   bench_train_gpu (mlp and cnn, batch 128 and 1024; mlp bf16/f16) beside
#            bench/pytorch_mlp.py on the same GPU, and bench_gpu_kernels;
#   scaling: bench_scaling --workers 1,2,4,8 beside PyTorch DDP (the 16-core host);
#   cnn:     the cnn's timings alone: strict f32 and TF32 beside PyTorch, and the kernels' fractions;
#   check:   tests, cli and cluster side by side (correctness only, ~250 s);
#   session: all of it within one device call: tests, cli and cluster side by side (correctness,
#            bounded), then bench and scaling one after the other (timings, nothing beside them).
# Several modes run in the order given. Every step is bounded by `timeout`; its output goes to
# gpu-out/<step>.log, a summary to gpu-out/summary.txt after every step (so a cut-off call still says
# what ran), and at the end both to $OUT (the device tool brings back only a few files: summary.txt
# and gpu-logs.tgz).
#
# usage: bash scripts/gpu-run.sh MODE...   (MODE: tests cli cluster bench cnn scaling check session)
#        GPU_TESTS="conv_test cnn_test" bash scripts/gpu-run.sh tests   (only those files of tests/gpu)
set -u
modes=("$@")
[ ${#modes[@]} = 0 ] && modes=(session)
out=$PWD/gpu-out
rm -rf "$out"
mkdir -p "$out"
find .gpu -name '*.xz' -print0 | xargs -0 -r -P8 -n1 unxz -f
find .gpu/fashion-mnist -name '*-ubyte' -print0 2>/dev/null | xargs -0 -r -P4 -n1 gzip -1 -f  # as troupe reads them
chmod +x .gpu/bin/* 2>/dev/null
libs=$PWD/.gpu/lib
if ! ls /usr/local/cuda/lib64/libcudnn.so.9 >/dev/null 2>&1; then
  wheel=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$wheel" ] && libs=$libs:$wheel
fi
export TROUPE_DATASET_DIR=$PWD/.gpu/fashion-mnist
export PATH=$PWD/.gpu/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
nproc >> "$out/gpu.txt"
summary=$out/summary.txt
[ -n "${OUT:-}" ] && summary=$OUT/summary.txt  # written as it goes: a call cut off still brings it back
note() { echo "$*" >> "$summary"; echo "$*"; }

step() {  # step NAME SECONDS COMMAND...: run bounded, with our libraries, log to $OUT/NAME.log
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  LD_LIBRARY_PATH=$libs timeout -k 5 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  note "$name: rc=$rc ($((SECONDS - t0)) s)$([ $rc = 124 ] && echo ' TIMED OUT')"
}

run_tests() {  # every test file its own process, all at once (the GPU has room; 16 cores)
  local limit=${1:-300} pids=() f
  for f in tests/gpu/*_test.cc; do
    f=$(basename "$f" .cc)
    [ -n "${GPU_TESTS:-}" ] && [[ " $GPU_TESTS " != *" $f "* ]] && continue
    step "test_$f" "$limit" .gpu/bin/troupe_gpu_tests -# "[#$f]" --durations yes &
    pids+=($!)
  done
  wait "${pids[@]}"
  grep -h -E '^test cases:|^All tests passed' "$out"/test_*.log | sort | uniq -c >> "$summary"
}

models=/tmp/gpu-models  # --save's files, read back on the CPU by `troupe predict`
mkdir -p "$models"
predict_cpu() {  # predict_cpu NAME: the CPU's accuracy on the test split of the model NAME saved
  step "predict_$1" 60 troupe predict --model "$models/$1.safetensors" --data "$TROUPE_DATASET_DIR" \
    --out "$models/$1.npy" --no-progress
  note "  $1 saved, on the CPU: $(grep -i 'accuracy' "$out/predict_$1.log" | tail -n1)"
}

run_cli() {
  local limit=${1:-100}
  step cli_mlp "$limit" troupe train --device cuda --model mlp --epochs 10 --batch-size 128 --save "$models/cli_mlp.safetensors"
  predict_cpu cli_mlp
  step cli_mlp_init "$limit" troupe train --device cuda --model mlp --epochs 1 --batch-size 128 --lr 0.0001 \
    --init-from "$models/cli_mlp.safetensors"
  note "  cli_mlp_init (1 epoch from cli_mlp's file): $(grep -i -m1 'accuracy' "$out/cli_mlp_init.log")"
  step cli_cnn "$limit" troupe train --device cuda --model cnn --epochs 4 --batch-size 32
  step cli_mlp_bf16 "$limit" troupe train --device cuda --model mlp --epochs 10 --batch-size 128 --precision bf16
  step cli_mlp_f16 "$limit" troupe train --device cuda --model mlp --epochs 10 --batch-size 128 --precision f16
  for s in cli_mlp cli_cnn cli_mlp_bf16 cli_mlp_f16; do
    note "  $s: $(grep -i -m1 'accuracy' "$out/$s.log")"
  done
}

run_cluster() {
  local limit=${1:-150}
  export TROUPE_HOME
  TROUPE_HOME=${TROUPE_HOME:-$(mktemp -d /tmp/troupe-gpu.XXXXXX)}
  step cluster_up 60 troupe up --nodes 1 --cpus 8 --gpus 1
  step cluster_sync_gpu "$limit" troupe submit --strategy sync --workers 2 --gpus-per-worker 0.5 \
    --model mlp --hidden 256,128 --dataset fashion-mnist --epochs 10 --batch-size 128 --save "$models/sync_gpu.safetensors"
  step cluster_async_gpu "$limit" troupe submit --strategy async --workers 2 --ps 2 --gpus-per-worker 0.5 \
    --model mlp --hidden 256,128 --dataset fashion-mnist --epochs 10 --batch-size 128 --save "$models/async_gpu.safetensors"
  step cluster_async_cpu "$limit" troupe submit --strategy async --workers 2 --ps 2 \
    --model mlp --hidden 256,128 --dataset fashion-mnist --epochs 10 --batch-size 128
  step cluster_status 30 troupe status
  step cluster_down 60 troupe down
  for s in cluster_sync_gpu cluster_async_gpu cluster_async_cpu; do
    note "  $s: $(grep -i 'accuracy' "$out/$s.log" | tail -n1)"
  done
  predict_cpu sync_gpu
  predict_cpu async_gpu
}

run_bench() {
  local limit=${1:-60} model batch n precision
  for model in mlp cnn; do
    for batch in 128 1024; do
      [ "$model" = cnn ] && [ "$batch" = 1024 ] && continue  # the issue asks the cnn at batch 128
      step "train_${model}_b${batch}" "$limit" .gpu/bin/bench_train_gpu --model "$model" --batch "$batch" --runs 3
      n=$(awk '/troupe_samples_per_s:/ {print $2}' "$out/train_${model}_b${batch}.log")
      note "  troupe $model batch $batch: ${n:-?} samples/s"
      # PyTorch from its own environment: no LD_LIBRARY_PATH of ours.
      timeout -k 5 "$limit" python3 bench/pytorch_mlp.py --model "$model" --batch "$batch" --runs 3 --optimizer adam \
        --troupe "${n:-0}" > "$out/pytorch_${model}_b${batch}.log" 2>&1
      note "  $(grep -h 'ratio troupe / pytorch_graph' "$out/pytorch_${model}_b${batch}.log")"
    done
  done
  for precision in bf16 f16; do  # mixed precision, the mlp at batch 1024 (where products matter)
    step "train_mlp_b1024_$precision" "$limit" .gpu/bin/bench_train_gpu --batch 1024 --runs 3 --precision "$precision"
    n=$(awk '/troupe_samples_per_s:/ {print $2}' "$out/train_mlp_b1024_$precision.log")
    note "  troupe mlp batch 1024 $precision: ${n:-?} samples/s"
    timeout -k 5 "$limit" python3 bench/pytorch_mlp.py --batch 1024 --runs 3 --precision "$precision" \
      --troupe "${n:-0}" > "$out/pytorch_mlp_b1024_$precision.log" 2>&1
    note "  $(grep -h 'ratio troupe' "$out/pytorch_mlp_b1024_$precision.log" | tr '\n' ' ')"
  done
  step kernels "$limit" .gpu/bin/bench_gpu_kernels
}

run_cnn() {
  local limit=${1:-60} tf n
  for tf in "" --tf32; do
    step "train_cnn_b128$tf" "$limit" .gpu/bin/bench_train_gpu --model cnn --batch 128 --runs 3 $tf
    n=$(awk '/troupe_samples_per_s:/ {print $2}' "$out/train_cnn_b128$tf.log")
    note "  troupe cnn batch 128 ${tf:-strict}: ${n:-?} samples/s"
    timeout -k 5 "$limit" python3 bench/pytorch_mlp.py --model cnn --batch 128 --runs 3 --optimizer adam $tf \
      --troupe "${n:-0}" > "$out/pytorch_cnn_b128$tf.log" 2>&1
    note "  $(grep -h 'ratio troupe' "$out/pytorch_cnn_b128$tf.log" | tr '\n' ' ')"
  done
  step kernels "$limit" .gpu/bin/bench_gpu_kernels
}

run_scaling() {
  local limit=${1:-150}
  step scaling "$limit" .gpu/bin/bench_scaling --workers 1,2,4,8 --steps 200 --runs 3 \
    --peer "$PWD/bench/peers/ddp_mlp.py" --python "$(command -v python3)"
  tail -n 20 "$out/scaling.log" >> "$summary"
}

run_check() {  # tests, cli and cluster side by side, each lane bounded
  timeout -k 5 250 bash -c 'run_tests 240' &
  local tp=$!
  timeout -k 5 250 bash -c 'run_cli 60' &
  local cp=$!
  timeout -k 5 250 bash -c 'run_cluster 75' &
  local kp=$!
  wait $tp $cp $kp
  LD_LIBRARY_PATH=$libs timeout 20 troupe down > /dev/null 2>&1
}

export out libs summary models TROUPE_HOME
TROUPE_HOME=${TROUPE_HOME:-$(mktemp -d /tmp/troupe-gpu.XXXXXX)}
export -f note step predict_cpu run_tests run_cli run_cluster run_bench run_cnn run_scaling
for what in "${modes[@]}"; do
case "$what" in
  tests) timeout -k 5 250 bash -c 'run_tests 240' ;;
  cli) timeout -k 5 250 bash -c 'run_cli 60' ;;
  cluster) timeout -k 5 400 bash -c 'run_cluster 90'; LD_LIBRARY_PATH=$libs timeout 20 troupe down > /dev/null 2>&1 ;;
  bench) timeout -k 5 170 bash -c 'run_bench 40' ;;
  cnn) timeout -k 5 150 bash -c 'run_cnn 45' ;;
  scaling) timeout -k 5 290 bash -c 'run_scaling 280' ;;
  check) run_check ;;  # the correctness lanes side by side, bounded (~250 s), no timings
  session)
    run_check  # correctness side by side (~250 s in all), then the timings alone
    timeout -k 5 170 bash -c 'run_bench 40'
    timeout -k 5 110 bash -c 'run_scaling 105'
    ;;
  *) echo "usage: gpu-run.sh MODE... (tests cli cluster bench cnn scaling check session)" >&2; exit 2 ;;
esac
done
cat "$summary"
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/gpu-logs.tgz" -C "$out" .
fi
