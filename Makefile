# Threat View: local stack and tests. Everything runs through scripts/stack.sh;
# state lives in .run/ (git-ignored).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

STACK := scripts/stack.sh
FUZZTIME ?= 30s

.PHONY: help up down status test test-s3 bench chaos fuzz clean migrate images images-test sdk

help: ## list targets
	@echo "Threat View targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 18

up: ## install packages if missing, start Postgres/MariaDB/ActiveMQ, migrate, start services
	$(STACK) up

down: ## stop everything the stack started (by pid file)
	$(STACK) down

status: ## one line per component: pid, state, address
	$(STACK) status

migrate: ## build and run the migrate command against all databases
	$(STACK) migrate

test: ## make up, then scripts/test.sh if present, else go test -race in every module
	$(STACK) up
	set -a; . .run/env; set +a; export THREATVIEW_REQUIRE_SERVICES=1; \
	if [ -x scripts/test.sh ]; then scripts/test.sh; \
	elif [ -f scripts/test.sh ]; then bash scripts/test.sh; \
	else $(STACK) gotest -race -count=1; fi

test-s3: ## make up, start the local S3 server (scripts/s3.sh), run the archiver's S3 tests
	$(STACK) up
	bash scripts/s3.sh start
	set -a; . .run/env; . .run/s3.env; set +a; export THREATVIEW_REQUIRE_SERVICES=1; \
	cd services/retention && go test -race -count=1 -tags s3 ./store/

sdk: ## build both client SDKs: sdk/js/dist (TypeScript, ESM) and sdk/java/build/threatview-sdk.jar
	cd sdk/js && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run build
	bash sdk/java/build.sh

images: ## OCI image archives of every command into .run/images (PUSH=registry/prefix pushes them)
	PUSH="$(PUSH)" VERSION="$(VERSION)" bash scripts/images.sh build

images-test: ## make up, make images, then run every image's binary from its own files
	$(STACK) up
	set -a; . .run/env; set +a; export THREATVIEW_REQUIRE_SERVICES=1; bash scripts/images.sh test

bench: ## load benchmark (scripts/bench.sh)
	@set -a; . .run/env; set +a; bash scripts/bench.sh

chaos: ## failure tests (scripts/chaos.sh)
	@set -a; . .run/env; set +a; bash scripts/chaos.sh

fuzz: ## run every Fuzz target for FUZZTIME (default 30s); scripts/fuzz.sh if present
	@if [ -f scripts/fuzz.sh ]; then bash scripts/fuzz.sh; \
	else FUZZTIME=$(FUZZTIME) $(STACK) fuzz; fi

clean: ## stop everything and delete .run/
	$(STACK) clean
