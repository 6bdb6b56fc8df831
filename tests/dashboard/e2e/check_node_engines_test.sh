#!/usr/bin/env bash
# CTest troupe_e2e_node_engines (offline, a second or two): check_node_engines.cjs reads npm's
# ranges right (its --self-test table), accepts the committed package-lock.json, and on small
# fixture locks fails for engines.node ">=20" (playwright-core 1.62 and later: Debian 12's Node 18
# cannot run it), for an unreadable range and for a lock without a "packages" map, and passes
# ">=18" and "^18.19.0 || >=20". node comes from Debian (scripts/install-deps.sh): missing is a
# failure, not a skip.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check=$here/check_node_engines.cjs
fail() { echo "node engines test: FAILED: $*" >&2; exit 1; }
command -v node >/dev/null || fail "node is not installed; run scripts/install-deps.sh (Debian package nodejs)"
tmp=$(mktemp -d /tmp/troupe-engines.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

timeout 60 node "$check" --self-test || fail "the range reader's self-test (node $check --self-test)"
timeout 60 node "$check" "$here/package-lock.json" \
  || fail "the committed $here/package-lock.json is refused (see above); pin an older playwright-core"

# lock NAME VERSION ENGINES_JSON: a lockfile v3 with one package, as npm writes it.
lock() {
  cat >"$tmp/$1.json" <<EOF
{ "name": "fixture", "lockfileVersion": 3, "requires": true,
  "packages": {
    "": { "name": "fixture", "dependencies": { "playwright-core": "$2" } },
    "node_modules/playwright-core": { "version": "$2", "engines": $3 } } }
EOF
  echo "$tmp/$1.json"
}
# expect_pass FILE / expect_fail FILE TEXT...: the check's exit status, and what its message names.
expect_pass() {
  timeout 60 node "$check" "$1" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "$1 was refused; it should pass"; }
}
expect_fail() {
  local file=$1; shift
  if timeout 60 node "$check" "$file" >"$tmp/out" 2>&1; then
    cat "$tmp/out" >&2; fail "$file passed; it should be refused"
  fi
  for text in "$@"; do
    grep -qF -- "$text" "$tmp/out" || { cat "$tmp/out" >&2; fail "the refusal of $file does not say '$text'"; }
  done
  echo "refused as it should be: $(head -c 400 "$tmp/out")"
}

expect_fail "$(lock ge20 1.65.1 '{ "node": ">=20" }')" \
  "playwright-core 1.65.1" '">=20"' "18.19.0" "18.20.4" "pin an older release of playwright-core"
expect_fail "$(lock ge18_20_5 1.0.0 '{ "node": "^18.20.5 || >=20" }')" '"^18.20.5 || >=20"' "18.19.0"
expect_fail "$(lock unreadable 1.0.0 '{ "node": ">=eighteen" }')" "cannot read its engines.node" '">=eighteen"'
expect_fail "$(lock array 1.0.0 '["node >=0.8"]')" "is not an object"
echo '{ "name": "fixture", "lockfileVersion": 1, "dependencies": {} }' >"$tmp/v1.json"
expect_fail "$tmp/v1.json" 'no "packages" map'
expect_pass "$(lock ge18 1.61.1 '{ "node": ">=18" }')"
expect_pass "$(lock caret_or 1.0.0 '{ "node": "^18.19.0 || >=20" }')"
expect_pass "$(lock no_node 1.0.0 '{ "npm": ">=9" }')"
echo "node engines test: passed"
