#!/usr/bin/env bash
# Effective training time under a worker node killed every minute (issue 44), live recovery against
# checkpoint recovery: a local cluster (the head and 3 nodes of 2 cpus) trains the same sync job
# (4 workers, checkpoints every 100 steps, sized to take about MINUTES undisturbed) three times in
# turn: undisturbed; with `--recovery live`; with `--recovery checkpoint` — the last two with a node
# process hosting workers SIGKILLed every EVERY seconds and a replacement node joining at once (an
# operator's autoscaler). Prints per run the wall time, restarts, final test accuracy, and the ETTR:
# the undisturbed run's wall time over the run's (the share of the wall time that trained useful
# steps; ByteRobust's effective training time ratio), and the accuracy against the undisturbed run;
# and each kill's cost split from the polls and the job's events (medians over the kills): detect,
# resume (the first step again), stalled (until the step count passed where it was at the kill),
# the pace after that against the undisturbed pace, and the wall time lost.
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
    next_kill, kills = start + every, []
    samples = []  # (time, the job's step count), every poll
    while True:
        time.sleep(0.5)
        view = status()
        if view is None:
            continue
        j = job_of(view, job)
        samples.append((time.time(), j.get("step", 0)))
        if j.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        if faults and time.time() >= next_kill and j.get("state") == "RUNNING":
            at = time.time()
            if kill_a_worker_node(view, job):
                kills.append(at)
            next_kill = time.time() + every
    wall = time.time() - start
    result = j.get("result") or {}
    recovery_rec = result.get("recovery") or {}
    events = []
    if kills:
        r = run("status", "--json", "--events", "5000", timeout=60)
        if r.returncode == 0:
            events = [e for e in json.loads(r.stdout).get("events", []) if e.get("subject") == job]
    return {"job": job[:8], "state": j.get("state"), "wall": wall, "kills": kills, "samples": samples,
            "events": events, "steps": j.get("step", 0),
            "restarts": recovery_rec.get("restarts", 0), "accuracy": result.get("test_accuracy", float("nan"))}

def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

def split_kills(r, pace):
    """Each kill's wall time, from the polls and the job's events: detect (kill to job_restarting),
    resume (kill to job_resumed: the first step again), stalled (kill to the step count passing
    where it was at the kill: the steps retrained included), the pace after that until the next
    kill against the undisturbed pace, and lost: the interval's wall time less what the undisturbed
    run needed for the same net steps."""
    def first_event(kind, after):
        ts = [e["time_ms"] / 1000 for e in r["events"] if e["kind"] == kind and e["time_ms"] / 1000 >= after]
        return min(ts) - after if ts else None
    def step_at(t):
        before = [st for (ts, st) in r["samples"] if ts <= t]
        return before[-1] if before else 0
    rows = []
    ends = r["kills"][1:] + [r["samples"][-1][0]]
    for k, end in zip(r["kills"], ends):
        at_kill = step_at(k)
        passed = [ts for (ts, st) in r["samples"] if k < ts <= end and st > at_kill]
        stalled = passed[0] - k if passed else end - k
        after = end - (k + stalled)
        pace_after = (step_at(end) - at_kill) / after if after > 1 else None
        lost = (end - k) - (step_at(end) - at_kill) / pace
        rows.append({"detect": first_event("job_restarting", k), "resume": first_event("job_resumed", k),
                     "stalled": stalled, "pace": pace_after / pace if pace_after else None, "lost": lost})
    return rows

runs = [("undisturbed", one("live", False))]
print(f"ettr: {epochs} epochs; undisturbed {runs[0][1]['wall']:.0f} s, accuracy {runs[0][1]['accuracy']:.4f}",
      flush=True)
for recovery in ("live", "checkpoint"):
    r = one(recovery, True)
    runs.append((recovery, r))
    print(f"ettr: {recovery}: {len(r['kills'])} node kills, {r['restarts']} restarts, {r['wall']:.0f} s, "
          f"accuracy {r['accuracy']:.4f}, {r['state']}", flush=True)
base = runs[0][1]
pace = base["steps"] / base["wall"]  # the undisturbed run's steps a second
bad = False
print(f"\nEach kill's cost (median over the kills; pace: steps a second after the stall, over the undisturbed {pace:.1f})")
print("| run | detect | resume (first step) | stalled (back where it was) | pace after | lost a kill |")
print("|---|---:|---:|---:|---:|---:|")
for name, r in runs[1:]:
    rows = split_kills(r, pace)
    def cell(key, fmt):
        m = median([x[key] for x in rows])
        return "n/a" if m is None else fmt.format(m)
    print(f"| {name} | {cell('detect', '{:.2f} s')} | {cell('resume', '{:.2f} s')} | {cell('stalled', '{:.1f} s')} | "
          f"{cell('pace', '{:.2f}x')} | {cell('lost', '{:.1f} s')} |")
print("\n| run | node kills | restarts | wall | ETTR | test accuracy | vs undisturbed |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, r in runs:
    diff = 100 * (r["accuracy"] - base["accuracy"])
    print(f"| {name} | {len(r['kills'])} | {r['restarts']} | {r['wall']:.0f} s | {base['wall'] / r['wall']:.3f} | "
          f"{r['accuracy']:.4f} | {diff:+.2f} points |")
    bad = bad or r["state"] != "SUCCEEDED" or abs(diff) > 0.5
sys.exit(1 if bad else 0)
PY
