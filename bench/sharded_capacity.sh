#!/usr/bin/env bash
# The largest gpt two workers train under a memory limit, with each --shard stage (issue 24,
# docs/benchmarks.md): bench_sharded (2 replicas as threads of one process, over shared memory)
# runs one step of a gpt of dim DIM with L layers inside a memory cgroup of LIMIT MiB; the number of
# layers is searched (doubling, then bisection) for the largest that completes, per stage. The
# process's whole memory counts: parameters, gradients, optimizer state, gathered layers,
# activations (batch 2 windows of 16 tokens: small), the program and its libraries.
#   bench/sharded_capacity.sh [LIMIT_MIB] [DIM]    (default 3072 and 1024; needs root and cgroup v1's
#                                                   memory controller; build/bin/bench_sharded built;
#                                                   STAGES="gradients parameters" picks stages)
# With a large limit (STEP_PERCENT=P, e.g. 6 for 20 GiB) each stage starts from the layer count its
# ZeRO formula predicts (16, 12, 10, 8 bytes per parameter per worker; 1 GiB set aside)
# and walks up or down by P% until the largest that fits is next to the smallest that does not:
# a few probes of minutes each instead of a bisection from one layer.
set -euo pipefail
cd "$(dirname "$0")/.."
limit_mib=${1:-3072}
dim=${2:-1024}
bench=$PWD/build/bin/bench_sharded
cg=/sys/fs/cgroup/memory/troupe-capacity-$$
mkdir "$cg" || { echo "sharded_capacity: cannot make a memory cgroup at $cg (root and cgroup v1 needed)" >&2; exit 1; }
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
echo $((limit_mib * 1024 * 1024)) > "$cg/memory.limit_in_bytes"
# Whether L layers train one step under the limit with `stage`.
fits() {  # (in a subshell that outlives the command, so no note of an OOM kill reaches the table)
  ( sh -c "echo \$\$ > $cg/cgroup.procs && exec $bench --stages $1 --runs 1 --steps 1 --batch-size 2 --seq-len 16 \
    --dim $dim --heads 8 --layers $2" > /tmp/sharded-capacity.out 2>&1; exit $? )
}
params() { echo $(( 12 * $1 * dim * dim + 13 * $1 * dim + 256 * dim * 2 + 16 * dim + 2 * dim )); }
echo "# bench/sharded_capacity.sh $limit_mib $dim: 2 workers (threads of one process) under a ${limit_mib} MiB limit, gpt D$dim H8 T16 V256, one step"
printf "%-11s %7s %14s %12s\n" "shard" "layers" "parameters" "x none"
base=0
per_layer=$((12 * dim * dim + 13 * dim))
for stage in ${STAGES:-none optimizer gradients parameters}; do
  if [ -n "${STEP_PERCENT:-}" ]; then
    case $stage in none) b=16 ;; optimizer) b=12 ;; gradients) b=10 ;; *) b=8 ;; esac
    # The limit less 1 GiB (the program, activations, a layer's staging) over b bytes per parameter
    # for each of the 2 workers.
    guess=$(( (limit_mib - 1024) * 1024 * 1024 / (2 * b * per_layer) ))
    step=$(( guess * STEP_PERCENT / 100 )); [ "$step" -lt 1 ] && step=1
    if fits "$stage" "$guess"; then
      lo=$guess; hi=$((guess + step))
      while fits "$stage" "$hi"; do lo=$hi; hi=$((hi + step)); done
    else
      hi=$guess; lo=$((guess - step))
      while [ "$lo" -gt 0 ] && ! fits "$stage" "$lo"; do hi=$lo; lo=$((lo - step)); done
    fi
    echo "#   $stage: $lo layers fit, $hi do not" >&2
  else
    lo=0 hi=1
    while fits "$stage" "$hi"; do lo=$hi; hi=$((hi * 2)); [ "$hi" -gt 512 ] && break; done
  fi
  while [ $((hi - lo)) -gt 1 ] && [ -z "${STEP_PERCENT:-}" ]; do
    mid=$(((lo + hi) / 2))
    if fits "$stage" "$mid"; then lo=$mid; else hi=$mid; fi
  done
  p=0; [ "$lo" -gt 0 ] && p=$(params "$lo")
  [ "$stage" = none ] && base=$p
  ratio=$(python3 -c "print(f'{$p / $base:.2f}' if $base else '-')")
  printf "%-11s %7d %14d %12s\n" "$stage" "$lo" "$p" "$ratio"
done
