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

if ! command -v apt-get >/dev/null 2>&1; then
	echo "hack/chromium.sh: no chromium on PATH and no apt-get to install it; set CHROMIUM to a Chromium or Chrome binary" >&2
	exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
	sudo="sudo"
fi
echo "hack/chromium.sh: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
command -v chromium
