# TokenGate — the two commands a newcomer needs are `make dev` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

DATA        ?= $(CURDIR)/.data
DEV_PG_PORT ?= 54329
TEST_PG_PORT ?= 54339
SWIFT_FLAGS ?= -Xswiftc -warnings-as-errors

.PHONY: help deps build release test test-sanitized fuzz lint dev bench fleet soak failover image image-test clean

help:
	@echo "make dev    build and run TokenGate on 127.0.0.1:8080 with PostgreSQL, a development provider and a sample API"
	@echo "make test   lint, build and run every test against a throwaway PostgreSQL"
	@echo "make bench  release build + wrk against TokenGate and nginx (see bench/)"
	@echo "make fleet  rolling restarts and a key rotation of 3 instances behind nginx under load (bench/fleet/)"
	@echo "make failover [FAILOVER_ARGS=--sync]  a Patroni switchover, a crashed primary and a lost node under load (bench/failover.sh)"
	@echo "make soak [SOAK_MINUTES=10]  steady load on 2 instances; fails when memory, descriptors or rows keep growing"
	@echo "make test-sanitized [SANITIZER=address|thread]  every test under a sanitizer (own build folder, minutes)"
	@echo "make fuzz [FUZZ_SECONDS=30]  every parser of outside input under libFuzzer + AddressSanitizer"
	@echo "make image  the container image tokengate:local with Podman (Debian root filesystem + release binary)"
	@echo "make image-test  build the image in a throwaway Podman storage and run the login flow through it (CI)"

deps:
	@scripts/deps.sh

build: deps
	swift build $(SWIFT_FLAGS)

# As the container image builds it: Swift's runtime and Foundation linked in statically, the
# whole program optimized once more when it is linked.
release: deps
	swift build -c release --static-swift-stdlib --experimental-lto-mode=full

# Formatting, the API description, and the module graph: no module imports what
# docs/architecture.md's graph forbids (scripts/check-imports.py, with its self-test). The deploy
# files offline: hadolint, kubernetes-validate, systemd-analyze (scripts/deploy-lint.sh;
# DeployFilesTests shows that each check fails on a copy broken for it).
lint: deps
	swift format lint --strict --recursive --parallel Package.swift Sources Tests
	scripts/check-imports.py --self-test
	scripts/check-imports.py
	python3 -m openapi_spec_validator openapi.yaml openapi-admin.yaml
	scripts/deploy-lint.sh

# Tests run against a real PostgreSQL cluster that lives only for this run. They run one at a time
# (--no-parallel; about 2.5 minutes on 2 cores, docs/testing.md): many suites start real servers,
# processes and threads, and on a 2-core machine all of them at once make wall-clock margins thin. A run that hangs is stopped
# after 15 minutes and fails. Then schemathesis checks a running TokenGate's answers against
# openapi.yaml (scripts/schemathesis.sh, about 1.5 minutes).
test: deps lint
	swift build --build-tests $(SWIFT_FLAGS)
	@set -euo pipefail; \
	  dir=$$(mktemp -d /tmp/tokengate-test-pg.XXXXXX); chmod 755 "$$dir"; \
	  trap 'scripts/pg.sh stop "$$dir/pg"; rm -rf "$$dir"' EXIT; \
	  url=$$(scripts/pg.sh start "$$dir/pg" $(TEST_PG_PORT)); \
	  TOKENGATE_TEST_DATABASE_URL="$$url" timeout 900 swift test --skip-build --no-parallel 2>&1 | tee "$$dir/test.log"; \
	  grep -qE "Test run with [1-9][0-9]* tests? .*passed" "$$dir/test.log"; \
	  scripts/schemathesis.sh "$$url"

# The whole suite under a sanitizer, in a build folder of its own. Leak reports are off: the only
# leaks seen come from XCTest and Foundation's Thread/Process in test support. AddressSanitizer's
# quarantine (freed memory held back to catch use after free) is 4 MiB instead of 256: the
# streaming tests measure that resident memory stays flat (within 16 MiB), which a 256 MiB
# quarantine hides and an 8 MiB one, with shadow memory and redzones on top, came within 0.3 MiB of.
SANITIZER ?= address
test-sanitized: deps
	@set -euo pipefail; \
	  dir=$$(mktemp -d /tmp/tokengate-test-pg.XXXXXX); chmod 755 "$$dir"; \
	  trap 'scripts/pg.sh stop "$$dir/pg"; rm -rf "$$dir"' EXIT; \
	  url=$$(scripts/pg.sh start "$$dir/pg" $(TEST_PG_PORT)); \
	  TOKENGATE_TEST_DATABASE_URL="$$url" ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=4 \
	    timeout 1800 swift test --sanitize=$(SANITIZER) --scratch-path .build-$(SANITIZER) --no-parallel

# libFuzzer targets, one per parser of outside input (forms and queries, JWS, token responses,
# proxy paths): each replays its seed corpus (fuzz/corpus/), then fuzzes for FUZZ_SECONDS with
# AddressSanitizer in its own build folder (.build-fuzz); a crash fails (scripts/fuzz.sh).
FUZZ_SECONDS ?= 30
fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

# PostgreSQL (under .data/), the development OpenID provider, a sample API and TokenGate, with
# the curl walkthrough printed; Ctrl-C stops everything (scripts/dev.sh).
dev: deps build
	@scripts/dev.sh

bench: deps
	bench/run.sh

# N instances on one PostgreSQL behind nginx, simulated devices and a table of invariants
# (bench/fleet/README.md): `fleet` rolls the instances with SIGTERM and rotates the keys under
# load; `soak` runs a steady load on 2 instances and fails when a series (memory, descriptors,
# connections) grows faster than its bound. Release build, loopback only, stops by itself.
SOAK_MINUTES ?= 10
fleet: deps
	bench/fleet.sh rolling

soak: deps
	bench/fleet.sh soak $(SOAK_MINUTES)

# Two instances on a Patroni cluster (etcd, a primary and a streaming replica; scripts/patroni.sh
# installs Patroni and etcd when missing) through a switchover, a crashed postmaster and a lost
# node under the fleet's load, and the invariants of a failover (docs/scaling.md, "PostgreSQL
# failover"). Debug build, loopback only, stops by itself. FAILOVER_ARGS=--sync: synchronous_mode.
failover: deps
	bench/failover.sh $(FAILOVER_ARGS)

# The container image with Podman, no registry: a Debian 12 root filesystem from Debian packages
# (deploy/container/rootfs.sh, mmdebstrap) and the release binary built here, tagged
# tokengate:local (scripts/image.sh build; installs podman, runc and mmdebstrap when missing).
image: deps
	scripts/image.sh build

# The image built in a throwaway Podman storage, then run read-only as user 10001 against a
# throwaway PostgreSQL and oidc-provider-mock: migrate, serve, /healthz, /readyz, the walkthrough
# of `make dev`, SIGTERM → exit 0; everything removed afterwards (scripts/image.sh test). CI runs
# it after `make test`: 6.6 minutes from a fresh clone on 2 cores, 5.7 of them the release build.
image-test: deps
	timeout 3600 scripts/image.sh test

clean:
	-scripts/pg.sh stop $(DATA)/pg
	rm -rf .build $(DATA)
