#!/usr/bin/env bash
# Installs test/mcpclient's Node dependencies (the official TypeScript MCP
# SDK, pinned in its package.json and package-lock.json) with npm ci, for
# make test-mcp-client: when node_modules is missing, or older than the lock
# file. Needs node (20 or later) and npm on PATH.
set -euo pipefail
cd "$(dirname "$0")/../test/mcpclient"

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "hack/mcpclient.sh: no $tool on PATH: install Node.js 20 or later with npm" >&2
		exit 1
	fi
done
# npm ci writes node_modules/.package-lock.json last.
if [[ -f node_modules/.package-lock.json && node_modules/.package-lock.json -nt package-lock.json ]]; then
	exit 0
fi
npm ci --ignore-scripts --no-audit --no-fund >&2
