#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium for the browser tests
# (test/browser), installing Debian's chromium package when none is on the
# machine. CHROMIUM, when set, names the browser to use instead.
set -euo pipefail

if [[ -n "${CHROMIUM:-}" ]]; then
	command -v "$CHROMIUM"
	exit 0
fi
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null 2>&1; then
		command -v "$b"
		exit 0
	fi
done

if ! "$(dirname "$0")/apt-install.sh" hack/chromium.sh chromium fonts-dejavu-core; then
	echo "hack/chromium.sh: set CHROMIUM to a Chromium or Chrome binary" >&2
	exit 1
fi
command -v chromium
