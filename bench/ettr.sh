#!/usr/bin/env bash
# Effective training time under a worker node killed every minute (issue 44), live recovery against
# checkpoint recovery: a local cluster (the head and 3 nodes of 2 cpus) trains the same sync job
# (4 workers, checkpoints every 100 steps, sized to take about MINUTES undisturbed) three times in
# turn: undisturbed; with `--recovery live`; with `--recovery checkpoint` — the last two with a node
# process hosting workers SIGKILLed every EVERY seconds and a replacement node joining at once (an
# operator's autoscaler). Prints per run the wall time, restarts, final test accuracy, and the ETTR:
# the undisturbed run's wall time over the run's (the share of the wall time that trained useful
# steps; ByteRobust's effective training time ratio), and the accuracy against the undisturbed run.
# Exits 1 when a run fails or a faulted run ends more than 0.5 points from the undisturbed one.
#   bench/ettr.sh [MINUTES] [EVERY]     (defaults 10 and 60; build/bin/troupe must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
every=${2:-60}
. bench/local_cluster.sh ettr
"$troupe" up --nodes 3 --cpus 2 >/dev/null
python3 - "$troupe" "$minutes" "$every" <<'PY'
import json, os, subprocess, sys, time

troupe, minutes, every = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
home = os.environ["TROUPE_HOME"]

def run(*args, timeout=120):
    return subprocess.run([troupe, *args], capture_output=True, text=True, timeout=timeout)

def status():
    try:
        r = run("status", "--json", "--events", "400", timeout=30)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(r.stdout) if r.returncode == 0 else None

def job_of(view, job):
    return next((j for j in view["jobs"] if j["id"] == job), {})

def join_node():
    info = json.load(open(f"{home}/session/cluster.json"))
    r = run("up", "--address", info["head_address"], "--token", info["token"], "--cpus", "2", timeout=90)
    if r.returncode != 0:
        print("ettr: a replacement node did not join: " + r.stderr.strip(), flush=True)

def kill_a_worker_node(view, job):
    heads = {n["id"] for n in view["nodes"] if n.get("is_head")}
    pids = {n["id"]: n["pid"] for n in view["nodes"]}
    hosts = sorted({a["node"] for a in view["actors"]
                    if a.get("job") == job and a["state"] == "ALIVE" and a["node"] not in heads})
    if not hosts:
        return False
    os.kill(pids[hosts[0]], 9)
    join_node()
    return True

epochs = max(2, int(minutes * 24))  # 4 workers train about 24 epochs a minute on 2 cores

def one(recovery, faults):
    sub = run("submit", "--strategy", "sync", "--workers", "4", "--epochs", str(epochs), "--batch-size", "128",
              "--seed", "11", "--checkpoint-every", "100", "--checkpoint-dir", f"{home}/ckpt-{recovery}-{faults}",
              "--max-restarts", "1000", "--recovery", recovery, "--detach", "--no-progress")
    if sub.returncode != 0:
        sys.exit("ettr: submit failed: " + sub.stderr)
    job = sub.stdout.strip().splitlines()[-1]
    start = time.time()
    next_kill, kills = start + every, 0
    while True:
        time.sleep(0.5)
        view = status()
        if view is None:
            continue
        j = job_of(view, job)
        if j.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        if faults and time.time() >= next_kill and j.get("state") == "RUNNING":
            if kill_a_worker_node(view, job):
                kills += 1
            next_kill = time.time() + every
    wall = time.time() - start
    result = j.get("result") or {}
    recovery_rec = result.get("recovery") or {}
    return {"job": job[:8], "state": j.get("state"), "wall": wall, "kills": kills,
            "restarts": recovery_rec.get("restarts", 0), "accuracy": result.get("test_accuracy", float("nan"))}

runs = [("undisturbed", one("live", False))]
print(f"ettr: {epochs} epochs; undisturbed {runs[0][1]['wall']:.0f} s, accuracy {runs[0][1]['accuracy']:.4f}",
      flush=True)
for recovery in ("live", "checkpoint"):
    r = one(recovery, True)
    runs.append((recovery, r))
    print(f"ettr: {recovery}: {r['kills']} node kills, {r['restarts']} restarts, {r['wall']:.0f} s, "
          f"accuracy {r['accuracy']:.4f}, {r['state']}", flush=True)
base = runs[0][1]
bad = False
print("\n| run | node kills | restarts | wall | ETTR | test accuracy | vs undisturbed |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, r in runs:
    diff = 100 * (r["accuracy"] - base["accuracy"])
    print(f"| {name} | {r['kills']} | {r['restarts']} | {r['wall']:.0f} s | {base['wall'] / r['wall']:.3f} | "
          f"{r['accuracy']:.4f} | {diff:+.2f} points |")
    bad = bad or r["state"] != "SUCCEEDED" or abs(diff) > 0.5
sys.exit(1 if bad else 0)
PY
