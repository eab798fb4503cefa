#!/usr/bin/env bash
# Makes sure git is on the machine for make test-gitops (the test's Git
# server is git http-backend, and the test commits and pushes with git),
# installing Debian's git package when it is missing.
set -euo pipefail

if command -v git >/dev/null 2>&1 && git --exec-path >/dev/null 2>&1 && [[ -x "$(git --exec-path)/git-http-backend" ]]; then
	exit 0
fi
exec "$(dirname "$0")/apt-install.sh" hack/git.sh git
