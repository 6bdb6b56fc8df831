#!/usr/bin/env bash
# What Prometheus scraping costs the head (docs/benchmarks.md, issue 28): a local cluster (head + 2
# nodes) with ACTORS echo actors alive (no CPU each, so any number fits), then ROUNDS rounds of
# SECONDS seconds idle and SECONDS seconds scraping GET /metrics once a second, side by side. The
# head's CPU time is read from /proc/<pid>/stat (utime + stime) at the ends of each period. Prints
# the median scrape latency and size, the head's CPU % (of one core) idle and while scraped, their
# ratio and the head CPU per scrape; then the latency of /api/actors pages (100 each, by cursor, with
# and without a filter) through all the actors, and of /api/cluster with and without the actor entries.
#   bench/metrics_scrape.sh [ACTORS] [SECONDS] [ROUNDS]   (defaults 1000, 30, 3; build/bin/troupe built)
set -euo pipefail
cd "$(dirname "$0")/.."
actors=${1:-1000}
seconds=${2:-30}
rounds=${3:-3}
. bench/local_cluster.sh metrics_scrape
up=$(timeout 120 "$troupe" up --nodes 2 --cpus 2 2>&1) || { echo "metrics_scrape: troupe up failed: $up" >&2; exit 1; }
url=$(echo "$up" | sed -n 's/.*dashboard: *\(http[^ ]*\).*/\1/p' | head -1)
head_pid=$(echo "$up" | sed -n 's/.*head: .*(pid \([0-9]*\)).*/\1/p' | head -1)
[ -n "$url" ] && [ -n "$head_pid" ] || { echo "metrics_scrape: troupe up printed no dashboard or head pid: $up" >&2; exit 1; }
start=$(date +%s%3N)
timeout 300 "$troupe" spawn echo --count "$actors" --cpus 0 >/dev/null \
  || { echo "metrics_scrape: troupe spawn echo --count $actors --cpus 0 failed" >&2; exit 1; }
echo "cluster: head pid $head_pid, dashboard $url; $actors echo actors spawned in $(( $(date +%s%3N) - start )) ms"
python3 - "$url" "$head_pid" "$actors" "$seconds" "$rounds" <<'PY'
import json, os, statistics, sys, time, urllib.request
url, pid, actors, seconds, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tick = os.sysconf("SC_CLK_TCK")

def get(path):
    t = time.perf_counter()
    with urllib.request.urlopen(url + path, timeout=10) as r:
        body = r.read()
    return body, time.perf_counter() - t

def cpu_seconds():  # the head's utime + stime (fields 14 and 15 of /proc/<pid>/stat)
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

deadline = time.monotonic() + 120
while True:  # every actor ALIVE, or give up naming how many are
    alive = json.loads(get("/api/actors?state=ALIVE&limit=1")[0])["total"]
    if alive >= actors: break
    if time.monotonic() > deadline: sys.exit("metrics_scrape: only %d of %d actors ALIVE after 120 s" % (alive, actors))
    time.sleep(0.5)

def period(scrape):  # the head's CPU fraction of one core over `seconds`; scrapes once a second if asked
    lat, size = [], []
    c0, t0 = cpu_seconds(), time.monotonic()
    for i in range(seconds):
        time.sleep(max(0.0, t0 + i - time.monotonic()))
        if scrape:
            body, s = get("/metrics")
            if b"troupe_up 1" not in body: sys.exit("metrics_scrape: a scrape without troupe_up 1")
            lat.append(s); size.append(len(body))
    time.sleep(max(0.0, t0 + seconds - time.monotonic()))
    return (cpu_seconds() - c0) / (time.monotonic() - t0), lat, size

idle, busy, lat, size = [], [], [], []
for r in range(rounds):
    i = period(False)[0]; b, l, s = period(True)
    idle.append(i); busy.append(b); lat += l; size += s
    print("round %d: head CPU idle %.2f%%, scraped %.2f%%, scrape median %.1f ms" % (r + 1, 100 * i, 100 * b, 1000 * statistics.median(l)))
mi, mb = statistics.median(idle), statistics.median(busy)
print("/metrics at %d actors: median %.1f ms (p90 %.1f ms), %d bytes, %d scrapes" % (
    actors, 1000 * statistics.median(lat), 1000 * sorted(lat)[int(0.9 * (len(lat) - 1))], statistics.median(size), len(lat)))
print("head CPU (%% of one core, median of %d x %d s): idle %.2f%%, scraped every second %.2f%%, ratio %.2f; %.1f ms of head CPU per scrape" % (
    rounds, seconds, 100 * mi, 100 * mb, mb / mi if mi > 0 else float("inf"), 1000 * (mb - mi)))

def pages(query):  # every page of 100 by cursor; the latency of each and the ids seen
    ms, ids, after = [], [], ""
    while True:
        body, s = get("/api/actors?limit=100" + query + ("&after=" + after if after else ""))
        j = json.loads(body); ms.append(1000 * s); ids += [a["id"] for a in j["actors"]]
        if "next" not in j: return ms, ids
        after = j["next"]
for name, query in (("no filter (keys + the page's records)", ""), ("state=ALIVE (every record matched)", "&state=ALIVE")):
    ms = []
    for _ in range(5):
        m, ids = pages(query); ms += m
        if len(ids) != len(set(ids)) or len(ids) < actors: sys.exit("metrics_scrape: pages gave %d ids, %d distinct" % (len(ids), len(set(ids))))
    print("/api/actors pages of 100, %s: median %.1f ms over %d pages" % (name, statistics.median(ms), len(ms)))
for path, name in (("/api/cluster", "every actor"), ("/api/cluster?actors=0", "no actor entries: the page's stream")):
    cl = [get(path) for _ in range(10)]
    print("%s (%s): median %.1f ms, %d bytes" % (path, name, 1000 * statistics.median(s for _, s in cl), len(cl[-1][0])))
PY
