#!/usr/bin/env bash
# Puts kube-apiserver and etcd for envtest under $1 (default bin/k8s).
# It first tries the envtest release tarball; where that cannot be reached it
# builds both from Go modules, which always works through the module proxy.
# Later runs reuse what is already there.
#
# With --components DEST NAME..., it builds the named Kubernetes binaries
# (kube-controller-manager, kube-scheduler, kubelet, kube-proxy) from the same
# Go modules into DEST instead, each stamped with its version; ones already
# built at this version are kept.
set -euo pipefail

components=()
if [[ ${1:-} == --components ]]; then
  shift
  dest=${1:?--components needs a directory}
  shift
  components=("$@")
fi

dest=${dest:-${1:-bin/k8s}}
k8s_version=${K8S_VERSION:-v1.37.2}
staging_version=${STAGING_VERSION:-v0.37.2}
etcd_version=${ETCD_VERSION:-v3.6.16}

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
stamp="$dest/.versions"
# "stamped" marks a kube-apiserver built with its version in its ldflags;
# earlier builds reported v0.0.0-master and are rebuilt.
want="kube-apiserver=$k8s_version etcd=$etcd_version stamped"

if ((${#components[@]} == 0)) && [[ -x $dest/kube-apiserver && -x $dest/etcd && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi

log() { echo "envtest-assets: $*" >&2; }

try_download() {
  local url="https://github.com/kubernetes-sigs/controller-tools/releases/download/envtest-${k8s_version}/envtest-${k8s_version}-$(go env GOOS)-$(go env GOARCH).tar.gz"
  local tmp
  tmp=$(mktemp -d)
  if curl -fsSL --connect-timeout 5 --max-time 120 -o "$tmp/envtest.tgz" "$url" 2>/dev/null; then
    tar -xzf "$tmp/envtest.tgz" -C "$tmp"
    local dir
    dir=$(dirname "$(find "$tmp" -name kube-apiserver -type f | head -1)")
    # etcd is always built at its pinned version; the tarball's may differ.
    cp "$dir/kube-apiserver" "$dest/kube-apiserver"
    rm -rf "$tmp"
    return 0
  fi
  rm -rf "$tmp"
  return 1
}

# The version kube-apiserver reports (`kubectl version`, /version): what the
# Kubernetes release build stamps, so clients that gate on the server version
# (Helm's kubeVersion, feature checks) see the real one, not v0.0.0-master.
version_ldflags() {
  local v=${k8s_version#v} major minor pkg flags=""
  major=${v%%.*}
  minor=${v#*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

# build_k8s NAME...: builds k8s.io/kubernetes/cmd/NAME for each NAME into $dest
# in one go build, so what they share is compiled once.
build_k8s() {
  local work names=("$@") pkgs=() n
  for n in "${names[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$n"); done
  work=$(mktemp -d)
  log "building ${names[*]} $k8s_version from Go modules (several minutes the first time)"
  (
    cd "$work"
    go mod init hitl.local/envtest-apiserver >/dev/null 2>&1
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    local args=("-require=k8s.io/kubernetes@$k8s_version")
    local m
    for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[A-Za-z0-9._-]*\) => ./staging/.*#\1#p' "$gomod"); do
      args+=("-replace=$m=$m@$staging_version")
    done
    go mod edit "${args[@]}"
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      printf '\t_ "%s"\n' "${pkgs[@]}"
      printf ')\n'
    } > tools.go
    GOFLAGS=-mod=mod go get "${pkgs[@]/%/@$k8s_version}" >/dev/null
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags="-s $(version_ldflags)" -o "$dest/" "${pkgs[@]}"
  )
  rm -rf "$work"
}

build_etcd() {
  local work
  work=$(mktemp -d)
  log "building etcd $etcd_version from Go modules"
  (
    cd "$work"
    go mod init hitl.local/envtest-etcd >/dev/null 2>&1
    cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@$etcd_version" >/dev/null
    GOFLAGS=-mod=mod go mod tidy >/dev/null
    CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dest/etcd" .
  )
  rm -rf "$work"
}

if ((${#components[@]} > 0)); then
  missing=()
  for n in "${components[@]}"; do
    if [[ ! -x $dest/$n || $(cat "$dest/.$n.version" 2>/dev/null) != "$k8s_version" ]]; then
      rm -f "$dest/$n" "$dest/.$n.version"
      missing+=("$n")
    fi
  done
  ((${#missing[@]} == 0)) && exit 0
  build_k8s "${missing[@]}"
  for n in "${missing[@]}"; do echo "$k8s_version" > "$dest/.$n.version"; done
  log "${missing[*]} ready in $dest"
  exit 0
fi

# Other versions (or a half-finished earlier run) are replaced.
rm -f "$stamp" "$dest/kube-apiserver" "$dest/etcd"
try_download || build_k8s kube-apiserver
build_etcd
"$dest/etcd" --version >/dev/null
echo "$want" > "$stamp"
log "ready in $dest"
