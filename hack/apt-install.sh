#!/usr/bin/env bash
# Installs Debian packages for the scripts of hack/ that need a tool the
# machine may lack (chromium.sh, git.sh): apt-get, through sudo when not
# root. Usage: hack/apt-install.sh WHO PACKAGE...; WHO names the caller in
# the messages.
set -euo pipefail

who=${1:?hack/apt-install.sh: name the caller}
shift
if ! command -v apt-get >/dev/null 2>&1; then
	echo "$who: no apt-get to install $*" >&2
	exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
	sudo="sudo"
fi
echo "$who: installing Debian's $*" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "$@" >&2
