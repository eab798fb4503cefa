#!/usr/bin/env bash
# `make e2e-cluster`: brings up the real node of hack/cluster/node.sh, loads
# hitl's image and the test agent's into its containerd, runs test/cluster
# (hitl installed with the Helm chart, then with dist/install.yaml, each
# checked by the same scenarios) inside the cluster's network namespace, and
# tears everything down, on failure too. The make target builds the inputs;
# arguments go to the test binary (e.g. -test.run TestCluster/install.yaml).
#
# Environment: HITL_IMAGE_ARCHIVE (hitl's image, bin/hitl-image.tar),
# HITL_HELM (the helm binary), HITL_HELM_ARGS (extra helm install arguments,
# e.g. the image), HITL_INSTALL_YAML (dist/install.yaml), HITL_BIN (bin/, with
# kubectl-hitl), plus node.sh's.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export HITL_CLUSTER_STATE=${HITL_CLUSTER_STATE:-/var/tmp/hitl-e2e-cluster}
export PAUSE_IMAGE_ARCHIVE=${PAUSE_IMAGE_ARCHIVE:-$root/bin/cluster/pause.tar}
image_archive=${HITL_IMAGE_ARCHIVE:-$root/bin/hitl-image.tar}
agent_archive=$root/bin/cluster/agent.tar
results=$root/bin/cluster/results.json

log() { echo "e2e-cluster: $*" >&2; }
t0=$(date +%s%N)
secs() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN {printf "%.1f", (b - a) / 1e9}'; }

for f in "$image_archive" "$agent_archive" "$PAUSE_IMAGE_ARCHIVE" "${HITL_INSTALL_YAML:?}" "${HITL_HELM:?}" "$root/bin/cluster/cluster.test"; do
  [[ -e $f ]] || { log "missing $f (make e2e-cluster builds it)"; exit 1; }
done

trap '"$root/hack/cluster/node.sh" down' EXIT
"$root/hack/cluster/node.sh" up
log "node up in $(secs "$t0")s"
sleep 20
log "the idle node's processes, 20 s after it came up:"
"$root/hack/cluster/node.sh" footprint >&2

t1=$(date +%s%N)
for a in "$image_archive" "$agent_archive"; do
  "$root/hack/cluster/node.sh" exec ctr --address "$HITL_CLUSTER_STATE/containerd.sock" -n k8s.io images import "$a" >/dev/null
done
log "images imported in $(secs "$t1")s"

"$root/hack/cluster/node.sh" exec env \
  HITL_BIN="${HITL_BIN:-$root/bin}" \
  HITL_HELM="$HITL_HELM" HITL_HELM_ARGS="${HITL_HELM_ARGS:-}" \
  HITL_CHART="${HITL_CHART:-$root/charts/hitl}" \
  HITL_INSTALL_YAML="$HITL_INSTALL_YAML" \
  HITL_ROLES="$root/config/rbac/examples" \
  HITL_RESULTS="$results" \
  HITL_CLUSTER_STATE="$HITL_CLUSTER_STATE" \
  "$root/bin/cluster/cluster.test" -test.v -test.count=1 -test.timeout 40m "$@"
log "passed; figures in $results; $(secs "$t0")s from no cluster to the end of the suite"
