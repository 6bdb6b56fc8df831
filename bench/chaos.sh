#!/usr/bin/env bash
# A bounded chaos run (issue 27): a local cluster (the head and 3 nodes of 2 cpus, the embedded
# GCS) trains a long sync job (4 workers, checkpoints every 100 steps); every 20-40 s one of these
# is SIGKILLed, the kinds in turn in an order the seed shuffles:
#   node   a node process hosting a worker (a replacement node joins right after, as an operator's
#          autoscaler would; the job restarts from its checkpoint on what is there)
#   redis  the embedded redis-server (nobody restarts it but the head's watchdog)
#   head   the head process, started again at once with `troupe up --restart-head` (as systemd
#          would); its own node's workers die with it
# After MINUTES no more faults; the job must end SUCCEEDED and be accounted exactly once
# (`data_accounted`). Prints one line per fault (what, when, detection, recovery) and a Markdown
# table for docs/benchmarks.md:
#   detect   node: kill -> job_restarting; redis: kill -> gcs_restarted; head: kill -> job_adopted
#   recover  kill -> the job's step count moves past where it stood at the kill
#   restart  whether the fault cost the job a restart (restart attempts before -> after)
# Exits 1 when the job fails or its data is not accounted exactly once.
#   bench/chaos.sh [SEED] [MINUTES]     (defaults 1 and 5; build/bin/troupe must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-1}
minutes=${2:-5}
. bench/local_cluster.sh chaos
"$troupe" up --nodes 3 --cpus 2 >/dev/null
status=0
python3 - "$troupe" "$seed" "$minutes" <<'EOF' || status=$?
import json, os, random, re, signal, statistics, subprocess, sys, time

troupe, seed, minutes = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
home = os.environ["TROUPE_HOME"]
rng = random.Random(seed)
now_ms = lambda: int(time.time() * 1000)

def run(*args, timeout=120):
    return subprocess.run([troupe, *args], capture_output=True, text=True, timeout=timeout)

def status():
    """troupe status --json, or None while the GCS or the session cannot be read."""
    try:
        r = run("status", "--json", "--events", "1000", timeout=30)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(r.stdout) if r.returncode == 0 else None

def pid_of(role):
    try:
        return int(open(f"{home}/session/pids/{role}.pid").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0

def job_of(view, job):
    return next((j for j in view["jobs"] if j["id"] == job), {})

def events(view, kind, subject=None):
    return [e for e in view["events"] if e["kind"] == kind and (subject is None or e.get("subject") == subject)]

# Long enough to outlast the faults (4 workers train about 30 epochs a minute on 2 cores), and a
# budget of restarts that every fault could spend.
epochs = max(10, int(minutes * 45))
sub = run("submit", "--strategy", "sync", "--workers", "4", "--epochs", str(epochs), "--batch-size", "128",
          "--checkpoint-every", "100", "--checkpoint-dir", f"{home}/ckpt", "--max-restarts", "1000",
          "--detach", "--no-progress")
if sub.returncode != 0:
    sys.exit("chaos.sh: submit failed: " + sub.stderr)
job = sub.stdout.strip().splitlines()[-1]
print(f"chaos: seed {seed}, {minutes:g} min of faults, job {job[:8]} (sync, 4 workers, {epochs} epochs)", flush=True)

def wait_step(above, limit_s):
    """ms (since the epoch) when the job's step passed `above`, or None."""
    end = time.time() + limit_s
    while time.time() < end:
        v = status()
        if v is not None:
            j = job_of(v, job)
            if j.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return now_ms() if j.get("state") == "SUCCEEDED" else None
            if j.get("step", 0) > above:
                return now_ms()
        time.sleep(0.1)
    return None

def first_event_after(kind, since, subject=None, limit_s=60):
    end = time.time() + limit_s
    while time.time() < end:
        v = status()
        if v is not None:
            hits = [e["time_ms"] for e in events(v, kind, subject) if e["time_ms"] >= since]
            if hits:
                return min(hits)
        time.sleep(0.1)
    return None

def restarts_of(view):
    return len(events(view, "job_restarting", job))

def join_node():
    info = json.load(open(f"{home}/session/cluster.json"))
    r = run("up", "--address", info["head_address"], "--token", info["token"], "--cpus", "2", timeout=90)
    if r.returncode != 0:
        print("chaos: a replacement node did not join: " + r.stderr.strip(), flush=True)

faults, kinds = [], []
start = time.time()
while time.time() - start < minutes * 60:
    time.sleep(rng.uniform(20, 40))
    view = status()
    if view is None or job_of(view, job).get("state") != "RUNNING":
        continue
    if not kinds:  # every kind in turn, in a seeded order, so a short run still sees each
        kinds = ["node", "redis", "head"]
        rng.shuffle(kinds)
    kind = kinds.pop()
    step = job_of(view, job).get("step", 0)
    before = restarts_of(view)
    if kind == "node":
        heads = {n["id"] for n in view["nodes"] if n.get("is_head")}
        pids = {n["id"]: n["pid"] for n in view["nodes"]}
        hosts = sorted({a["node"] for a in view["actors"]
                        if a.get("job") == job and a["state"] == "ALIVE" and a["node"] not in heads})
        if not hosts:
            continue
        target = rng.choice(hosts)
        victim = pids[target]
    elif kind == "redis":
        victim, target = pid_of("redis"), "redis-server"
    else:
        victim, target = pid_of("head"), "head"
    killed = now_ms()
    os.kill(victim, signal.SIGKILL)
    if kind == "node":
        detected = first_event_after("job_restarting", killed, job)
        join_node()
    elif kind == "redis":
        detected = first_event_after("gcs_restarted", killed)
    else:
        for _ in range(100):  # the pid must be gone before --restart-head takes over
            try:
                os.kill(victim, 0)
                time.sleep(0.05)
            except ProcessLookupError:
                break
        r = run("up", "--restart-head", "--cpus", "2", timeout=90)
        if r.returncode != 0:
            sys.exit("chaos.sh: up --restart-head failed: " + r.stderr)
        detected = first_event_after("job_adopted", killed, job)
    moved = wait_step(step, 300)
    after = status()
    spent = (restarts_of(after) - before) if after else -1
    f = {"at_s": round((killed / 1000) - start), "kind": kind, "target": target, "step": step,
         "detect_ms": (detected - killed) if detected else None,
         "recover_ms": (moved - killed) if moved else None, "restarts": spent}
    faults.append(f)
    print("chaos: " + json.dumps(f), flush=True)

print("chaos: no more faults; waiting for the job to end", flush=True)
state, view = None, None
for _ in range(3600):
    view = status()
    state = job_of(view, job).get("state") if view else None
    if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
        break
    time.sleep(0.5)
accounted = None
for _ in range(60):
    view = status() or view
    hits = events(view, "data_accounted", job) + events(view, "data_accounting_failed", job)
    if hits:
        accounted = hits[0]
        break
    time.sleep(0.5)

def cell(v):
    return "-" if v is None else str(v)
print()
print("| # | at (s) | fault | step | detected (ms) | recovered (ms) | restarts spent |")
print("|---|---|---|---|---|---|---|")
for i, f in enumerate(faults, 1):
    print(f"| {i} | {f['at_s']} | kill -9 {f['target']} ({f['kind']}) | {f['step']} | {cell(f['detect_ms'])} | "
          f"{cell(f['recover_ms'])} | {f['restarts']} |")
for kind in ("node", "redis", "head"):
    rec = [f["recover_ms"] for f in faults if f["kind"] == kind and f["recover_ms"] is not None]
    det = [f["detect_ms"] for f in faults if f["kind"] == kind and f["detect_ms"] is not None]
    if rec:
        print(f"chaos: {kind}: {len(rec)} faults, median detect {statistics.median(det) if det else '-'} ms, "
              f"median recover {statistics.median(rec)} ms")
j = job_of(view, job) if view else {}
acc = j.get("result", {}).get("test_accuracy")
print(f"chaos: job {job[:8]} {state}, test accuracy {acc}, {restarts_of(view) if view else '?'} restarts; "
      f"accounting: {accounted['kind'] + ': ' + accounted['message'] if accounted else 'none recorded'}")
ok = state == "SUCCEEDED" and accounted is not None and accounted["kind"] == "data_accounted"
sys.exit(0 if ok else 1)
EOF
exit $status
