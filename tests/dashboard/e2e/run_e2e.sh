#!/usr/bin/env bash
# The dashboard's end-to-end test in headless Chromium (CTest: troupe_dashboard_e2e).
#   run_e2e.sh TROUPE_BINARY WORK_DIR
# First checks (check_node_engines.cjs) that the committed package-lock.json's packages accept, by
# their engines.node, Debian 12's Node 18 and the node on PATH; then installs playwright-core from
# the npm registry into WORK_DIR/node_modules with `npm ci --engine-strict` from that lock (pinned to
# 1.61.1: from 1.62 on it needs Node >= 20, which Debian 12 does not ship) when the installed
# version is not the lock's. Then brings a local cluster up (head + 2 nodes) in a TROUPE_HOME of its
# own, submits a sync job, runs dashboard_e2e.cjs against the dashboard `troupe up` printed, and
# takes the cluster down on every path (troupe down, then SIGKILL to whatever the session's pid
# files still name).
# Chromium (/usr/bin/chromium) and node come from Debian (scripts/install-deps.sh): missing is a
# failure, not a skip. Screenshots: WORK_DIR/screenshots.
set -euo pipefail
troupe=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
lock=$here/package-lock.json
chromium=${E2E_CHROMIUM:-/usr/bin/chromium}

fail() { echo "dashboard e2e: FAILED: $*" >&2; exit 1; }
[ -x "$troupe" ] || fail "no troupe binary at $troupe (build first)"
command -v node >/dev/null || fail "node is not installed; run scripts/install-deps.sh (Debian package nodejs)"
timeout 60 node "$here/check_node_engines.cjs" "$lock" \
  || fail "the packages pinned in $lock do not accept this node ($(node --version)) or Debian 12's Node 18 (see above)"
[ -x "$chromium" ] || fail "no Chromium at $chromium; run scripts/install-deps.sh (Debian package chromium)"
mkdir -p "$work/screenshots"

version_of() {  # the version a package.json or the lock's playwright-core entry names, or nothing
  node -e 'try { const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
              console.log(j.packages ? j.packages["node_modules/playwright-core"].version : j.version) } catch (e) {}' "$1" 2>/dev/null || true
}
wanted=$(version_of "$lock")
[ -n "$wanted" ] || fail "$lock names no node_modules/playwright-core version"
installed=$(version_of "$work/node_modules/playwright-core/package.json")
if [ "$installed" != "$wanted" ]; then
  command -v npm >/dev/null || fail "npm is not installed; run scripts/install-deps.sh (Debian package npm)"
  echo "dashboard e2e: installing playwright-core@$wanted (installed: ${installed:-none}) into $work with npm ci from $lock"
  cp "$here/package.json" "$lock" "$work/"
  timeout 300 npm ci --prefix "$work" --engine-strict --no-audit --no-fund --loglevel=error \
    || fail "npm ci of $lock into $work failed (is the npm registry reachable? does npm $(npm --version) accept node $(node --version)?)"
  installed=$(version_of "$work/node_modules/playwright-core/package.json")
  [ "$installed" = "$wanted" ] || fail "npm ci left playwright-core '${installed:-none}' in $work/node_modules, not $wanted"
fi

home=$(mktemp -d /tmp/troupe-e2e.XXXXXX)
export TROUPE_HOME=$home
cleanup() {
  local rc=$?
  timeout 60 "$troupe" down >/dev/null 2>&1 || true
  for f in "$home"/session/pids/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  done
  if [ $rc -ne 0 ]; then
    echo "---- session logs (last lines) ----" >&2
    for l in "$home"/session/logs/*.log; do [ -f "$l" ] && { echo "== $l" >&2; tail -n 15 "$l" >&2; }; done
  fi
  rm -rf "$home"
  exit $rc
}
trap cleanup EXIT

up=$(timeout 120 "$troupe" up --nodes 2 --cpus 2 2>&1) || fail "troupe up: $up"
echo "$up"
url=$(echo "$up" | sed -n 's/.*dashboard: *\(http[^ ]*\).*/\1/p' | head -1)
[ -n "$url" ] || fail "troupe up printed no dashboard URL"
job=$(timeout 120 "$troupe" submit --strategy sync --workers 2 --epochs 40 --batch-size 64 --name e2e --detach 2>&1 | tail -1) \
  || fail "troupe submit: $job"
[[ "$job" =~ ^[0-9a-f]{32}$ ]] || fail "troupe submit --detach printed '$job', not a job id"
# A small hyperparameter search (3 trials, ASHA), for the search page.
search=$(timeout 120 "$troupe" tune --search 'lr=grid(0.001,0.003,0.02)' --hidden 64 --epochs 3 --scheduler asha \
           --reduction-factor 2 --search-dir "$home/search" --detach 2>&1 | tail -1) || fail "troupe tune: $search"
[[ "$search" =~ ^[0-9a-f]{32}$ ]] || fail "troupe tune --detach printed '$search', not a search id"
# An actor that ends without failing: stopped by the user, it must read FINISHED (grey), not DEAD.
finished=$(timeout 60 "$troupe" spawn echo --json 2>/dev/null | tail -1 \
             | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).actor_ids[0]))') \
  || fail "troupe spawn echo failed"
[[ "$finished" =~ ^[0-9a-f]{32}$ ]] || fail "troupe spawn echo --json gave no actor id ('$finished')"
timeout 60 "$troupe" stop "$finished" >/dev/null || fail "troupe stop $finished failed"
# More actors than a page of the actor table (100) holds, needing no CPU, for its pager.
timeout 60 "$troupe" spawn echo --count 120 --cpus 0 --name-prefix page >/dev/null || fail "troupe spawn echo --count 120 failed"
node_pid=$(cat "$home/session/pids/node-2.pid") || fail "no pid file of node-2"
node_id=$(timeout 60 "$troupe" status --json | node -e '
  let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
    const n = JSON.parse(s).nodes.find(n => n.pid === Number(process.argv[1]));
    if (n) console.log(n.id); });' "$node_pid")
[ -n "$node_id" ] || fail "troupe status lists no node with pid $node_pid"

E2E_URL=$url E2E_JOB=$job E2E_KILL_PID=$node_pid E2E_KILL_NODE=$node_id E2E_SHOTS=$work/screenshots \
E2E_FINISHED_ACTOR=$finished E2E_SEARCH=$search E2E_MODULES=$work/node_modules E2E_CHROMIUM=$chromium E2E_DEADLINE_S=420 \
  timeout 450 node "$here/dashboard_e2e.cjs"
echo "dashboard e2e: screenshots in $work/screenshots"
