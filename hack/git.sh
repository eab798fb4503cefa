#!/usr/bin/env bash
# Makes sure git is on the machine for make test-gitops (the test's Git
# server is git http-backend, and the test commits and pushes with git),
# installing Debian's git package when it is missing.
set -euo pipefail

if command -v git >/dev/null 2>&1 && git --exec-path >/dev/null 2>&1 && [[ -x "$(git --exec-path)/git-http-backend" ]]; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "hack/git.sh: no git (with git-http-backend) and no apt-get to install it" >&2
	exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
	sudo="sudo"
fi
echo "hack/git.sh: installing Debian's git package" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends git >&2
