#!/usr/bin/env bash
# The test suite behind `make test` (the Makefile starts the stack and sources
# .run/env first). Three phases:
#   1. every module's tests with -race (integration tests need the stack:
#      THREATVIEW_REQUIRE_SERVICES=1 turns a missing service into a failure);
#   2. every fuzz target, briefly (FUZZTIME, default 5s each);
#   3. the fault tests (build tag `fault`): they kill and restart shared parts
#      of the stack, so they run one package at a time, after everything else.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export THREATVIEW_REQUIRE_SERVICES=1
STACK=scripts/stack.sh

echo "== phase 1: go test -race in every module"
bash "$STACK" gotest -race -count=1 -timeout 15m

echo "== phase 1b: the archiver's S3 target against a real S3 server (versitygw, built once into .run/bin)"
bash scripts/s3.sh start
( set -a; . .run/s3.env; set +a; cd services/retention && go test -race -count=1 -tags s3 ./store/ )
bash scripts/s3.sh stop

echo "== phase 2: fuzz targets, ${FUZZTIME:-5s} each"
FUZZTIME="${FUZZTIME:-5s}" bash "$STACK" fuzz

echo "== phase 3: fault tests (kill and restart parts of the stack)"
bash "$STACK" gotest -tags fault -count=1 -p 1 -run Fault -timeout 20m
# The fault tests leave every part running again; make sure of it.
bash "$STACK" up >/dev/null
echo "make test: all phases passed"
