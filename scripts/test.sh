#!/usr/bin/env bash
# Runs every test of mcptask: formatting and vet checks, the Go tests with the
# race detector (real SQLite files, real loopback HTTP), the fault-injection
# suite (faults/), and the official MCP conformance suite against the fixture server (which installs Node 22 and the
# suite into .cache/ on first use; see scripts/conformance.sh).
#
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n=== %s\n' "$*"; }

# Node 22, the interop packages and the conformance suite are installed
# (into .cache/, once) in the background while the Go tests run: the
# downloads wait on the network, not on the 2 cores. One job, in order:
# both installs share Node's folder.
mkdir -p .cache
(scripts/interop.sh --install && scripts/conformance.sh install) >.cache/install.log 2>&1 &
install_pid=$!
installed() {
	if ! wait "$install_pid"; then
		echo "installing the Node tools failed:"
		cat .cache/install.log
		exit 1
	fi
}

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
	echo "these files are not gofmt-formatted:"
	echo "$unformatted"
	exit 1
fi

step "go vet"
go vet ./...

step "go test -race"
go test -race -count=1 -timeout 20m ./...

step "fuzz smoke (seed corpora run above; a short coverage-guided run here)"
# Counted runs (Nx), not timed ones: a timed run whose time ends while a
# worker is busy reports "context deadline exceeded" on a loaded machine.
go test -run '^$' -fuzz '^FuzzParseID$' -fuzztime 100000x ./task
go test -run '^$' -fuzz '^FuzzLiftTaskMessage$' -fuzztime 20000x ./wire/v20251125
go test -run '^$' -fuzz '^FuzzWireRequest$' -fuzztime 2000x .
go test -run '^$' -fuzz '^FuzzDecodeRouted$' -fuzztime 20000x ./wire/ext2026
go test -run '^$' -fuzz '^FuzzParseAdminTokens$' -fuzztime 5000x ./cmd/mcptaskd
go test -run '^$' -fuzz '^FuzzParseEventPos$' -fuzztime 20000x ./store
go test -run '^$' -fuzz '^FuzzTemplate$' -fuzztime 20000x ./source/workflow

step "fault-injection suite (faults/: lost and cut traffic, kill -9, a PostgreSQL restart, a full disk)"
# On its own, after the other tests: it restarts the PostgreSQL server of
# MCPTASK_TEST_POSTGRES_DSN. It prints its seed (MCPTASK_FAULT_SEED
# replays a run) and what it counted; both must show 0 duplicates, 0 lost.
MCPTASK_FAULT_SUITE=1 go test -race -count=1 -timeout 30m -v ./faults 2>&1 | tee .cache/faults.log |
	grep -E '^(fault suite:|--- (FAIL|SKIP)|    --- (FAIL|SKIP)|        --- (FAIL|SKIP)|ok |FAIL|PASS$|panic:)|SKIPPED|_test\.go:[0-9]+:' || true
if ! grep -q '^ok ' .cache/faults.log; then
	echo "the fault-injection suite failed; its output without mcptaskd's log lines (all of it is in .cache/faults.log):"
	grep -v '^ *{"time"' .cache/faults.log | tail -300
	exit 1
fi

step "interop: the mcp-go v1.2.1 client against mcptaskd, its server behind the gateway (interop/mcpgo, a module of its own)"
(cd interop/mcpgo && go test -race -count=1 ./...)

installed
step "interop: the npm clients and servers of interop/*/ (TS SDK v1 and v2 with ext-tasks, Inspector, ai-sdk, mcp-use; TS SDK v2 and fastmcp upstreams)"
scripts/interop.sh

step "conformance suite"
scripts/conformance.sh all

step "all tests passed"
