# Sourced by the bench/*.sh scripts that bring up a local cluster, after `cd` to the checkout:
# sets $troupe (build/bin/troupe, which must be built), exports a TROUPE_HOME of the script's own
# under /tmp and traps EXIT to take the cluster down (within 60 s) and remove that directory.
#   . bench/local_cluster.sh NAME        (NAME: the script's, for messages and the directory)
troupe=$PWD/build/bin/troupe
[ -x "$troupe" ] || { echo "$1: $troupe not built (scripts/build.sh)" >&2; exit 2; }
TROUPE_HOME=$(mktemp -d "/tmp/troupe-$1.XXXXXX")
export TROUPE_HOME
trap 'timeout 60 "$troupe" down >/dev/null 2>&1 || true; rm -rf "$TROUPE_HOME"' EXIT
