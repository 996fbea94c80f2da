#!/usr/bin/env bash
# Runs every test of mcptask: formatting and vet checks, the Go tests with the
# race detector (real SQLite files, real loopback HTTP), and the official MCP
# conformance suite against the fixture server (which installs Node 22 and the
# suite into .cache/ on first use; see scripts/conformance.sh).
#
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n=== %s\n' "$*"; }

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

step "interop: TypeScript SDK client against mcptaskd (HTTP and stdio)"
scripts/interop.sh

step "conformance suite"
scripts/conformance.sh all

step "all tests passed"
