#!/usr/bin/env bash
# README command 1 — the main job: installs what is missing, builds troupe, and trains the
# Fashion-MNIST MLP (784-256-128-10) on one CPU worker for 10 epochs, printing the test accuracy.
# Extra arguments go to `troupe train` (e.g. --device cuda, --epochs 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
echo
echo "== troupe train: MLP 784-256-128-10 on Fashion-MNIST, one CPU worker, 10 epochs =="
exec build/bin/troupe train --model mlp --hidden 256,128 --dataset fashion-mnist --epochs 10 --batch-size 128 "$@"
