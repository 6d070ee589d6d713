#!/usr/bin/env bash
# The test suite behind `make test` (the Makefile starts the stack and sources
# .run/env first). Phases:
#   1. every module's tests with -race (integration tests need the stack:
#      THREATVIEW_REQUIRE_SERVICES=1 turns a missing service into a failure);
#   1b. the archiver's S3 target, the alerts s3 forwarder and the audit trail's checkpoints against a real S3 server (scripts/s3.sh);
#   1c. the container images (scripts/images.sh test);
#   1a. the reference's promise, alone (e2e/reference: 105 req/s at p95 <= 20 ms);
#   1d. the chart installed into a real API server (scripts/k8s.sh, charts/install_test.go);
#   1e. the TypeScript and Java SDKs (sdk/js/test.sh, sdk/java/test.sh);
#   2. every fuzz target, briefly (FUZZTIME, default 5s each);
#   3. the fault tests (build tag `fault`): they kill and restart shared parts
#      of the stack, so they run one package at a time, after everything else.
# It ends with one line counting the test packages that passed and failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export THREATVIEW_REQUIRE_SERVICES=1
STACK=scripts/stack.sh
mkdir -p .run
LOG=.run/test-results.log
: >"$LOG"
rc=0

# The Kubernetes binaries of phase 1d (about 10 minutes of compiling on a
# fresh machine) build at the lowest priority during phase 1, on the CPU its
# tests leave idle; phase 1a waits for the build, so the reference guard
# runs alone.
nice -n 19 bash scripts/k8s.sh build >.run/k8s-build.log 2>&1 &
k8s_build=$!

echo "== phase 1: go test -race in every module"
bash "$STACK" gotest -race -count=1 -timeout 15m 2>&1 | tee -a "$LOG" || rc=1

k8s_rc=0
wait "$k8s_build" || k8s_rc=$?

echo "== phase 1a: the reference's promise (105 req/s at p95 <= 20 ms through the real stack), alone"
# Alone, so the other packages' load does not stand in for a stall (e2e/reference).
( cd e2e && go test -tags reference -count=1 -v -run . -timeout 5m ./reference/ ) 2>&1 | tee -a "$LOG" | grep -E '^(---|ok|FAIL|=== RUN|\s+reference_test)' || rc=1

echo "== phase 1b: the archiver's S3 target, the alerts s3 forwarder and the audit trail's checkpoints against a real S3 server (versitygw, built once into .run/bin)"
bash scripts/s3.sh start
( set -a; . .run/s3.env; set +a; cd services/retention && go test -race -count=1 -tags s3 ./store/ ) 2>&1 | tee -a "$LOG" || rc=1
( set -a; . .run/s3.env; set +a; cd services/alerts && go test -race -count=1 -tags s3 -run S3 ./forward/ ) 2>&1 | tee -a "$LOG" || rc=1
( set -a; . .run/env; . .run/s3.env; set +a; export THREATVIEW_REQUIRE_SERVICES=1; cd services/auditlogger && go test -race -count=1 -tags s3 -run S3 ./trail/s3store/ ./cmd/auditverify/ ) 2>&1 | tee -a "$LOG" || rc=1
bash scripts/s3.sh stop

echo "== phase 1c: container images (make images, then run each image's binary from its own files)"
bash scripts/images.sh test 2>&1 | tee -a "$LOG" || rc=1

echo "== phase 1d: the chart installed into a real Kubernetes API server (binaries built once into .run/k8s/bin)"
tail -n 5 .run/k8s-build.log
if [ "$k8s_rc" -eq 0 ]; then
  ( cd charts && THREATVIEW_K8S_BIN="$PWD/../.run/k8s/bin" go test -tags k8s -count=1 -run TestInstall -timeout 20m . ) 2>&1 | tee -a "$LOG" || rc=1
else
  echo "FAIL scripts/k8s.sh build" | tee -a "$LOG"; rc=1
fi

echo "== phase 1e: the client SDKs (TypeScript and Java): unit tests and end-to-end against the running collector"
for sdk in js java; do
  bash "sdk/$sdk/test.sh" 2>&1 | tee -a "$LOG" | tail -n 20 || rc=1
done

echo "== phase 2: fuzz targets, ${FUZZTIME:-5s} each"
FUZZTIME="${FUZZTIME:-5s}" bash "$STACK" fuzz 2>&1 | tee -a "$LOG" || rc=1

echo "== phase 3: fault tests (kill and restart parts of the stack)"
mapfile -t fault_dirs < <(grep -rl --include='*_test.go' '^//go:build fault' services e2e | xargs -n1 dirname | sort -u)
# 30 minutes a package: e2e/fault holds the backlog test (through the broker,
# drained and checked) beside the suite.
# The backlog test holds 600 MB here (twice the 304 MB at which the broker
# used to give out; `make chaos` runs the full 1.5 GB): it was about 5 of
# CI's minutes at full size.
export THREATVIEW_FAULT_BACKLOG_MB="${THREATVIEW_FAULT_BACKLOG_MB:-600}"
for d in "${fault_dirs[@]}"; do
  (cd "$d" && go test -tags fault -count=1 -run Fault -timeout 30m .) 2>&1 | tee -a "$LOG" || rc=1
done
# The fault tests leave every part running again; make sure of it.
bash "$STACK" up >/dev/null

passed=$(grep -cE '^ok ' "$LOG" | tr -d ' ' || true)
failed=$(grep -cE '^FAIL[[:space:]]' "$LOG" | tr -d ' ' || true)
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
# Test packages and fuzz runs; the plain closing line CI reads.
echo "tests: ${passed} passed, ${failed} failed"
exit "$rc"
