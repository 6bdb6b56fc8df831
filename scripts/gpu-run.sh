#!/usr/bin/env bash
# Runs on the lent GPU machine, in the repository root, with .gpu/ from scripts/gpu-pack.sh carried:
# unpacks it, finds cuDNN (the toolkit's, else the one PyTorch's wheels bring), then runs
#   tests: every GPU test (troupe_gpu_tests: kernels against the CPU references, the mlp and cnn
#          trainers, bf16, sync replicas, async workers, device collectives);
#   bench: bench_train_gpu (mlp and cnn, batch 128 and 1024) beside bench/pytorch_mlp.py on the same
#          GPU, and bench_gpu_kernels (achieved fractions of the measured peaks).
# Each step's output goes to $OUT/<step>.log (the device tool brings $OUT back); a summary at the end.
#
# usage: bash scripts/gpu-run.sh tests|bench|all
set -u
what=${1:-all}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
find .gpu -name '*.xz' -print0 | xargs -0 -r -P8 -n8 unxz -f
chmod +x .gpu/bin/* 2>/dev/null
libs=$PWD/.gpu/lib
if ! ls /usr/local/cuda/lib64/libcudnn.so.9 >/dev/null 2>&1; then
  wheel=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$wheel" ] && libs=$libs:$wheel
fi
export TROUPE_DATASET_DIR=$PWD/.gpu/fashion-mnist
export PATH=$PWD/.gpu/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
summary=()
step() {  # step NAME COMMAND...: run with our libraries, log to $OUT/NAME.log
  local name=$1; shift
  local t0=$SECONDS
  LD_LIBRARY_PATH=$libs "$@" > "$out/$name.log" 2>&1
  local rc=$?
  summary+=("$name: rc=$rc ($((SECONDS - t0)) s)")
  echo "== $name: rc=$rc"; tail -n 5 "$out/$name.log"
}
if [ "$what" = tests ] || [ "$what" = all ]; then
  step gpu_tests .gpu/bin/troupe_gpu_tests --durations yes
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  for model in mlp cnn; do
    for batch in 128 1024; do
      step "train_${model}_b${batch}" .gpu/bin/bench_train_gpu --model "$model" --batch "$batch" --runs 3
      n=$(awk '/troupe_samples_per_s:/ {print $2}' "$out/train_${model}_b${batch}.log")
      summary+=("  troupe $model batch $batch: ${n:-?} samples/s")
      # PyTorch from its own environment: no LD_LIBRARY_PATH of ours.
      python3 bench/pytorch_mlp.py --model "$model" --batch "$batch" --runs 3 --optimizer adam --troupe "${n:-0}" \
        > "$out/pytorch_${model}_b${batch}.log" 2>&1
      summary+=("  $(grep -h 'ratio troupe / pytorch_graph' "$out/pytorch_${model}_b${batch}.log")")
    done
  done
  for precision in bf16 f16; do  # mixed precision, the mlp at batch 1024 (where products matter)
    step "train_mlp_b1024_$precision" .gpu/bin/bench_train_gpu --batch 1024 --runs 3 --precision "$precision"
    n=$(awk '/troupe_samples_per_s:/ {print $2}' "$out/train_mlp_b1024_$precision.log")
    summary+=("  troupe mlp batch 1024 $precision: ${n:-?} samples/s")
    python3 bench/pytorch_mlp.py --batch 1024 --runs 3 --precision "$precision" --troupe "${n:-0}" \
      > "$out/pytorch_mlp_b1024_$precision.log" 2>&1
    summary+=("  $(grep -h 'ratio troupe' "$out/pytorch_mlp_b1024_$precision.log" | tr '\n' ' ')")
  done
  step kernels .gpu/bin/bench_gpu_kernels
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
