#!/usr/bin/env bash
# Puts mailpit (github.com/axllent/mailpit), a local SMTP server with an
# HTTP API to read what arrived, at $1 (default bin/mailpit), for the email
# tests of internal/notify/channel. It is built from its Go module through
# the module proxy (its web UI's assets are in the module); later runs reuse
# it while its version stamp matches. A cold build takes a few minutes on
# two cores.
set -euo pipefail

dest=${1:-bin/mailpit}
version=${MAILPIT_VERSION:-v1.33.1}
stamp="$dest.version"

if [[ -x $dest && -f $stamp && $(cat "$stamp") == "$version" ]]; then
  exit 0
fi

mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "mailpit: building github.com/axllent/mailpit $version from Go modules" >&2
# Outside this module, so that mailpit's dependencies resolve as its own
# go.mod pins them.
(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath -ldflags=-s "github.com/axllent/mailpit@$version")
mv "$tmp/mailpit" "$dest"
echo "$version" > "$stamp"
