#!/usr/bin/env bash
# Installs every Debian package troupe needs to build, run and test. Idempotent: a package already
# present is skipped, and nothing is fetched when everything is there. Used by both README commands
# and by .ci/run. Needs root (or sudo) for apt-get.
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config git
  libcaf-dev libssl-dev libhiredis-dev libmsgpack-cxx-dev libspdlog-dev catch2 redis-server
  libopenblas-dev libcli11-dev nlohmann-json3-dev zlib1g-dev libxxhash-dev libbenchmark-dev libyaml-cpp-dev
  libcpp-httplib-dev libzip-dev libarchive-dev libpng-dev libjpeg62-turbo-dev libhdf5-dev libsentencepiece-dev
  python3-numpy python3-pil python3-h5py
  libtorch-dev python3-torch
  dataset-fashion-mnist
  libgloo-dev libopenmpi-dev openmpi-bin iperf3 prometheus
  chromium nodejs
  openssh-client openssh-server
  slurmctld slurmd slurm-client munge tcpdump
)
# libtorch-dev: the torchscript model (models/torch/, PyTorch's C++ library); python3-torch scripts
# its tests' modules (Debian's /usr/bin/python3 has it, whichever python3 comes first on PATH).
# openssh-server: the ssh provider's test (tests/cluster/ssh_real_test.cc) runs a real sshd on loopback.
# slurmctld, slurmd, munge: `troupe up --slurm`'s test (tests/cluster/slurm_real_test.cc) runs a real
# two-node Slurm (the daemons in network namespaces; nothing is started as a system service).
# tcpdump: the --tls test captures the link between two namespaces and looks for secrets in it.
# The dashboard's browser test (tests/dashboard/e2e) runs Debian's chromium through playwright-core,
# the one thing the README's commands take from outside Debian: `npm ci` installs it from the npm
# registry into the build tree, pinned by tests/dashboard/e2e/package-lock.json to 1.61.1 because
# 1.62 and later need Node >= 20 and Debian 12's nodejs is 18 (a check before the install says so).
# npm comes with nodejs from some sources (nodesource) and is a package of its own in Debian
# (9.2.0, which reads that lockfile v3): installed only when missing.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
