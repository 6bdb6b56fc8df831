#!/usr/bin/env bash
# Recovery figures of supervised jobs (docs/benchmarks.md): a local cluster (head + 2 nodes, 2 cpus
# each), a sync job of 4 workers checkpointing every 100 steps; mid-epoch a node process hosting
# workers is killed with SIGKILL, and a replacement node joins for the next run. From the job's
# events: time to detect (kill -> job_restarting), time until training resumes (kill ->
# job_resumed, the first step of the restarted attempt), and steps lost (trained after the
# checkpoint it resumed from and before the kill, from the time since that checkpoint at the pace
# of the checkpoints before it). Prints each run and the medians.
#   bench/recovery.sh [RUNS]       (default 5; build/bin/troupe must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
. bench/local_cluster.sh recovery
"$troupe" up --nodes 2 --cpus 2 >/dev/null
status() { "$troupe" status --json --events 400; }
results=()
for run in $(seq 1 "$runs"); do
  job=$("$troupe" submit --strategy sync --workers 4 --epochs 6 --batch-size 128 --checkpoint-every 100 \
        --checkpoint-dir "$TROUPE_HOME/ckpt" --detach 2>/dev/null | tail -1)
  target=$((900 + RANDOM % 200))   # somewhere between two checkpoints
  for _ in $(seq 1 600); do
    step=$(status | python3 -c "import json,sys; d=json.load(sys.stdin); print(next((j['step'] for j in d['jobs'] if j['id']=='$job'), 0))")
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
  killed=$(date +%s%3N)
  kill -9 "$victim"
  for _ in $(seq 1 1200); do
    state=$(status | python3 -c "import json,sys; d=json.load(sys.stdin); print(next(j['state'] for j in d['jobs'] if j['id']=='$job'))")
    [ "$state" = SUCCEEDED ] || [ "$state" = FAILED ] && break
    sleep 0.25
  done
  line=$(status | python3 -c "
import json,re,sys; d=json.load(sys.stdin)
ev={e['kind']:e for e in reversed(d['events']) if e.get('subject')=='$job'}
r,s=ev['job_restarting'],ev['job_resumed']
frm=int(re.search(r'step (\d+)$',s['message']).group(1))
# Steps trained after that checkpoint and before the kill, from the checkpoints' pace (one every 100).
ck={int(re.search(r'checkpoint of step (\d+)',e['message']).group(1)):e['time_ms'] for e in d['events']
    if e['kind']=='checkpoint_written' and e.get('subject')=='$job' and e['time_ms']<$killed}
pace=(ck[frm]-ck[frm-100])/100.0 if frm-100 in ck else float('nan')
lost=($killed-ck[frm])/pace
acc=next(j['result']['test_accuracy'] for j in d['jobs'] if j['id']=='$job')
print(r['time_ms']-$killed, s['time_ms']-$killed, round(lost), acc)")
  echo "run $run: detect_ms resume_ms steps_lost accuracy = $line"
  results+=("$line")
  # A replacement node for the next run (the killed one is DEAD).
  info=$TROUPE_HOME/session/cluster.json
  "$troupe" up --address "$(python3 -c "import json;print(json.load(open('$info'))['head_address'])")" \
    --token "$(python3 -c "import json;print(json.load(open('$info'))['token'])")" --cpus 2 >/dev/null
done
printf '%s\n' "${results[@]}" | python3 -c "
import statistics,sys
rows=[list(map(float,l.split())) for l in sys.stdin if l.strip()]
names=['detect_ms','resume_ms','steps_lost','accuracy']
print('median over %d runs: ' % len(rows) + ', '.join('%s %g' % (n, statistics.median(c)) for n,c in zip(names, zip(*rows))))"
