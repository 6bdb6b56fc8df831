#!/usr/bin/env bash
# Recovery of a sync job, live against checkpoint, side by side (docs/benchmarks.md): a local cluster
# (head + 2 nodes, 2 cpus each), a sync job of 4 workers checkpointing every 100 steps; mid-epoch
# (step 900-1100) a node process hosting workers is killed with SIGKILL, and a replacement node
# joins before the next run. Each run submits the job twice in turn, `--recovery live` and
# `--recovery checkpoint`, killing a node in each. From the job's events and its summary: detect
# (kill -> job_restarting), resume (kill -> job_resumed, the first step trained again), completed
# steps lost (the summary's recovery.steps_lost: the steps done when the failure reached the
# supervisor minus the step the job went on from), back (kill -> the job's step count at the kill's
# again: the steps lost trained again included), bytes of state moved (live), test accuracy.
# Prints each run and, per mode, the medians and the ratios checkpoint / live.
#   bench/recovery.sh [RUNS]       (default 5; build/bin/troupe must be built)
# RECOVERY_UP and RECOVERY_JOB change the cluster (default "--nodes 2 --cpus 2") and add to the
# job's flags: an elastic --shard job on a cluster with no room for a replacement, say
#   RECOVERY_UP="--nodes 1 --cpus 2" RECOVERY_JOB="--elastic --shard gradients" bench/recovery.sh 3
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
. bench/local_cluster.sh recovery
up_args=${RECOVERY_UP:---nodes 2 --cpus 2}
job_args=${RECOVERY_JOB:-}
# shellcheck disable=SC2086
"$troupe" up $up_args >/dev/null
status() { "$troupe" status --json --events 400; }
job_field() {  # job_field JOB EXPR: EXPR of the job's record j
  status | python3 -c "import json,sys; d=json.load(sys.stdin); j=next((j for j in d['jobs'] if j['id']=='$1'), {}); print($2)"
}

# One faulted job with `--recovery $1`; prints "mode detect_ms resume_ms back_ms steps_lost bytes accuracy"
# (mode: how it went on — a live job falls back to its checkpoint when no survivor kept a state).
faulted_run() {
  local mode=$1 job target step victim killed state at back
  # shellcheck disable=SC2086
  job=$("$troupe" submit --strategy sync --workers 4 --epochs 6 --batch-size 128 --checkpoint-every 100 \
        --checkpoint-dir "$TROUPE_HOME/ckpt" --recovery "$mode" $job_args --detach 2>/dev/null | tail -1)
  target=$((900 + RANDOM % 200))   # somewhere between two checkpoints
  for _ in $(seq 1 600); do
    step=$(job_field "$job" "j.get('step', 0)")
    [ "$step" -ge "$target" ] && break
    sleep 0.05
  done
  victim=""
  for _ in $(seq 1 20); do
    victim=$(status | python3 -c "
import json,sys; d=json.load(sys.stdin)
heads={n['id'] for n in d['nodes'] if n.get('is_head')}
pids={n['id']:n['pid'] for n in d['nodes']}
print(next((pids[a['node']] for a in d['actors'] if a.get('job')=='$job' and a['state']=='ALIVE' and a['node'] not in heads), ''))")
    [ -n "$victim" ] && break
    sleep 0.1
  done
  [ -n "$victim" ] || { echo "recovery.sh: no node other than the head hosts a worker of job $job" >&2; exit 1; }
  at=$(job_field "$job" "j.get('step', 0)")
  killed=$(date +%s%3N)
  kill -9 "$victim"
  back=-1
  for _ in $(seq 1 1200); do   # back at the step it had reached
    step=$(job_field "$job" "j.get('step', 0) if j.get('state') == 'RUNNING' else 10**9")
    if [ "$step" -ge "$at" ]; then back=$(( $(date +%s%3N) - killed )); break; fi
    sleep 0.05
  done
  for _ in $(seq 1 1200); do
    state=$(job_field "$job" "j.get('state')")
    [ "$state" = SUCCEEDED ] || [ "$state" = FAILED ] && break
    sleep 0.25
  done
  status | python3 -c "
import json,sys; d=json.load(sys.stdin)
ev={e['kind']:e for e in reversed(d['events']) if e.get('subject')=='$job'}
j=next(j for j in d['jobs'] if j['id']=='$job')
r=j['result']['recovery']
print(r['mode'], ev['job_restarting']['time_ms']-$killed, ev['job_resumed']['time_ms']-$killed, $back, r['steps_lost'],
      r.get('bytes_moved', 0), j['result']['test_accuracy'])"
  # A replacement node for the next run (the killed one is DEAD).
  local info=$TROUPE_HOME/session/cluster.json
  "$troupe" up --address "$(python3 -c "import json;print(json.load(open('$info'))['head_address'])")" \
    --token "$(python3 -c "import json;print(json.load(open('$info'))['token'])")" --cpus 2 >/dev/null
}

results=()
for run in $(seq 1 "$runs"); do
  for mode in live checkpoint; do
    line=$(faulted_run "$mode")
    echo "run $run $mode: went_on detect_ms resume_ms back_ms steps_lost bytes_moved accuracy = $line"
    results+=("$mode $line")
  done
done
printf '%s\n' "${results[@]}" | python3 -c "
import statistics,sys
rows={}; went_on={}
for l in sys.stdin:
    if l.strip():
        mode,went,*v=l.split(); rows.setdefault(mode,[]).append(list(map(float,v))); went_on.setdefault(mode,[]).append(went)
names=['detect_ms','resume_ms','back_ms','steps_lost','bytes_moved','accuracy']
med={m:[statistics.median(c) for c in zip(*r)] for m,r in rows.items()}
for m in ('live','checkpoint'):
    print('%-10s median over %d runs (%d went on live): ' % (m, len(rows[m]), went_on[m].count('live')) +
          ', '.join('%s %g' % (n, v) for n,v in zip(names, med[m])))
print('checkpoint / live: resume %.2fx, back %.2fx, steps lost %s' % (med['checkpoint'][1]/med['live'][1],
      med['checkpoint'][2]/med['live'][2],
      'inf (live lost none)' if med['live'][3]==0 else '%.2fx' % (med['checkpoint'][3]/med['live'][3])))"
