#!/usr/bin/env bash
# Puts Flux's source-controller and kustomize-controller under $1 (default
# bin/flux), with their CRDs in $1/crds, for test/gitops (`make test-gitops`).
# Both are built from their Go modules, through the module proxy (no GitHub
# downloads); later runs reuse what is already there. A cold build takes about
# 20 minutes on two cores.
#
# Each controller's go.mod replaces its api submodule with ./api, a directory
# the module's zip leaves out (it is a module of its own), so neither
# `go install module@version` nor a build of the downloaded copy works as is:
# the build runs in a writable copy with that one replace dropped, so the api
# module comes from the proxy at the version go.mod requires (the one the
# controller was released with). It compiles with hitl's toolchain (go.mod's
# toolchain line), the Go release with the security fixes.
set -euo pipefail

dest=${1:-bin/flux}
# The newest releases whose every dependency the module proxy serves. The
# v1.10 releases of both (the newest) need modules the proxy answers with
# "403 This module version is not available" (github.com/fluxcd/pkg's
# apis/crypto v0.5.0, masktoken v0.10.0, spiffe v0.2.0, artifact v0.27.x,
# http/fetch v0.30.x), as source-controller v1.9.4 to v1.9.6 do (artifact
# v0.18.2 and v0.18.3). Both are of the v1.9 line; kustomize-controller
# v1.9.6 requires source-controller's api v1.9.0, which v1.9.3 serves.
source_version=${FLUX_SOURCE_VERSION:-v1.9.3}
kustomize_version=${FLUX_KUSTOMIZE_VERSION:-v1.9.6}
toolchain=$(awk '$1 == "toolchain" {print $2}' "$(dirname "$0")/../go.mod")

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
stamp="$dest/.versions"
want="source-controller=$source_version kustomize-controller=$kustomize_version"

if [[ -x $dest/source-controller && -x $dest/kustomize-controller && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi

log() { echo "flux-assets: $*" >&2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# build NAME VERSION: builds github.com/fluxcd/NAME at VERSION into $dest/NAME
# and copies its CRDs into $dest/crds.
build() {
  local name=$1 version=$2 module="github.com/fluxcd/$1" dir work="$tmp/$1"
  log "building $name $version from Go modules"
  dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n $dir ]] || { log "cannot download $module@$version"; return 1; }
  # The module cache is read-only; the build edits go.mod and go.sum.
  cp -R "$dir" "$work"
  chmod -R u+w "$work"
  (
    cd "$work"
    go mod edit -dropreplace="$module/api" ${toolchain:+-toolchain="$toolchain"}
    # go.sum has no sums for the api module (it was a local directory);
    # -mod=mod adds them, checked against the checksum database.
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dest/$name" .
  )
  # Files of the module cache are read-only; the copies need not be.
  install -m 0644 "$dir"/config/crd/bases/*.yaml "$dest/crds/"
}

# Other versions (or a half-finished earlier run) are replaced.
rm -rf "$stamp" "$dest/source-controller" "$dest/kustomize-controller" "$dest/crds"
mkdir -p "$dest/crds"
build source-controller "$source_version"
build kustomize-controller "$kustomize_version"
echo "$want" > "$stamp"
log "ready in $dest"
