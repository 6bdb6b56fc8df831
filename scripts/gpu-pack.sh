#!/usr/bin/env bash
# Packs what the lent GPU machine runs (it has CUDA, NCCL, PyTorch and cmake, but none of our Debian
# libraries): the GPU tests, the GPU benchmarks and the CLI, the libraries they need, redis-server
# and Fashion-MNIST, into .gpu/ (git-ignored through .git/info/exclude), every file xz-compressed so
# the working tree plus .gpu stays under the 64 MiB the device tool carries. Then, with the device
# tool: carry [".gpu"], command "bash scripts/gpu-run.sh all" (scripts/gpu-run.sh unpacks it).
#
# usage: bash scripts/gpu-pack.sh        (after scripts/build.sh; run from the repository root)
set -eu
cd "$(dirname "$0")/.."
grep -qx '.gpu/' .git/info/exclude 2>/dev/null || echo '.gpu/' >> .git/info/exclude
rm -rf .gpu
progs=()
# GPU_PROGS="troupe_gpu_tests bench_train_gpu ..." packs only those (the carry limit is 64 MiB in all)
for p in ${GPU_PROGS:-troupe_gpu_tests troupe bench_train_gpu bench_gpu_kernels bench_sync_buckets bench_scaling}; do
  [ -x "build/bin/$p" ] && progs+=("build/bin/$p")
done
bash ../shared/tools/gpu-bundle.sh --data .gpu "${progs[@]}"
# Fashion-MNIST travels as xz of the raw IDX files (3.4 MiB less than gzip); gpu-run.sh gzips it again.
if [ -d .gpu/fashion-mnist ]; then
  gunzip -f .gpu/fashion-mnist/*.gz
  find .gpu/fashion-mnist -type f ! -name '*.xz' -print0 | xargs -0 -P2 -n1 xz -T1 -9e
fi
find .gpu/bin .gpu/lib -type f ! -name '*.xz' -print0 | xargs -0 -P2 -n4 xz -T1 -6
du -sh .gpu | awk '{print "packed: " $1}'
