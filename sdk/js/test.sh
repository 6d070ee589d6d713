#!/usr/bin/env bash
# Builds, type-checks and tests the TypeScript SDK: unit tests on a fake
# clock, the 1 M-event flood, the wire vectors and the end-to-end tests
# against the running stack (.run/env is read when present). Prints
# "ok  sdk/js" or "FAIL sdk/js" for scripts/test.sh.
set -uo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
if [ -f "$root/.run/env" ]; then set -a; . "$root/.run/env"; set +a; fi

fail() { echo "$1" >&2; echo "FAIL sdk/js"; exit 1; }

command -v node >/dev/null || fail "node is not installed"
[ -d node_modules ] || npm ci --no-audit --no-fund >/dev/null || fail "npm ci failed"
rm -rf dist build
npx --no-install tsc -p tsconfig.json || fail "tsc (library) failed"
npx --no-install tsc -p tsconfig.node.json || fail "tsc (node entry) failed"
npx --no-install tsc -p tsconfig.test.json || fail "tsc (tests) failed"
node --expose-gc --test --test-reporter=dot build/test/ || fail "tests failed"
npm pack --silent --pack-destination build >/dev/null || fail "npm pack failed"
echo "ok  sdk/js"
