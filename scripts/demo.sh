#!/usr/bin/env bash
# README command 1 — the main job: installs what is missing, builds troupe, brings up a local
# cluster (an embedded redis-server, the head and one node process), and trains the Fashion-MNIST
# MLP (784-256-128-10) on it with the sync strategy: 4 trainer actors, global batch 128, 10 epochs,
# gradients all-reduced every step. It prints the progress and the test accuracy, then takes the
# cluster down. Extra arguments go to `troupe submit` (e.g. --workers 2, --epochs 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The main job needs the troupe binary only: the test programs (about 40% of the code) are built
# by the test command (README command 2).
TROUPE_TARGETS=troupe bash scripts/build.sh
troupe=$PWD/build/bin/troupe
export TROUPE_HOME=${TROUPE_HOME:-$(mktemp -d /tmp/troupe-demo.XXXXXX)}
trap '"$troupe" down >/dev/null 2>&1 || true' EXIT
echo
echo "== troupe up: a local cluster (head + 1 node) =="
# Each process offers 4 cpus (what the scheduler accounts), so 4 workers and parameter servers fit
# on any machine.
"$troupe" up --nodes 1 --cpus 4
echo
echo "== troupe submit: MLP 784-256-128-10 on Fashion-MNIST, sync, 4 workers, 10 epochs =="
"$troupe" submit --strategy sync --workers 4 --model mlp --hidden 256,128 --dataset fashion-mnist \
  --epochs 10 --batch-size 128 "$@"
echo
"$troupe" status | sed -n '/^JOBS/,/^$/p'
