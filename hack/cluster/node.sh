#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for `make e2e-cluster`:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy (built from Go modules by hack/envtest-assets.sh), containerd,
# runc and the CNI plugins (Debian packages, installed here when missing).
#
#   hack/cluster/node.sh up     start it; prints the admin kubeconfig's path
#   hack/cluster/node.sh down   stop it and remove everything it made
#   hack/cluster/node.sh footprint    the resident memory of its processes
#   hack/cluster/node.sh exec CMD...  run CMD inside the cluster's network
#
# The whole cluster lives in a network namespace this script creates, with no
# default route: the node's address is on a veth pair inside it, the pods on
# a bridge behind it, so no packet of the cluster leaves the machine. Enter it
# with `hack/cluster/node.sh exec` (nsenter; `ip netns exec` would remount
# /sys and hide the cgroup mounts the kubelet needs).
#
# Settings this kind of machine needs (docs/real-node.md): the kubelet runs
# with cgroup v1 allowed and the cgroupfs driver; containerd's CRI restricts
# oom_score_adj, since the sandbox has no CAP_SYS_RESOURCE.
#
# Environment: NODE_BIN (the Kubernetes node binaries, default bin/k8s),
# ENVTEST_BIN (kube-apiserver and etcd, default bin/k8s), HITL_CLUSTER_STATE
# (default /var/tmp/hitl-e2e-cluster), HITL_CLUSTER_LOGS (default
# bin/cluster/logs), PAUSE_IMAGE_ARCHIVE (the pause image to import).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
node_bin=${NODE_BIN:-$root/bin/k8s}
envtest_bin=${ENVTEST_BIN:-$root/bin/k8s}
state=${HITL_CLUSTER_STATE:-/var/tmp/hitl-e2e-cluster}
logs=${HITL_CLUSTER_LOGS:-$root/bin/cluster/logs}
pause_archive=${PAUSE_IMAGE_ARCHIVE:-$root/bin/cluster/pause.tar}

netns=hitl-e2e
node_name=hitl-node
node_ip=10.201.0.1
pod_cidr=10.202.0.0/24
service_cidr=10.203.0.0/24
service_ip=10.203.0.1
cgroup_root=/hitl-e2e
pause_image=hitl.local/pause:1
ns_exec=(nsenter --net=/run/netns/$netns --)

log() { echo "node: $*" >&2; }
since() { echo "$(( $(date +%s%N) / 1000000 - $1 ))ms"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

install_packages() {
  local missing=() p
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v nft >/dev/null || missing+=(nftables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v nsenter >/dev/null || missing+=(util-linux)
  command -v ip >/dev/null || missing+=(iproute2)
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]} with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for p in containerd runc; do command -v $p >/dev/null || { log "$p is still missing"; exit 1; }; done
}

# --- PKI ---------------------------------------------------------------------

# cert NAME CN [O] [SAN]: a client or serving certificate signed by the CA.
cert() {
  local name=$1 cn=$2 org=${3:-} san=${4:-} subj="/CN=$2"
  [[ -n $org ]] && subj="/O=$org/CN=$cn"
  local ext
  ext=$(mktemp)
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n $san ]]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } > "$ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$state/pki/$name.key" -out "$state/pki/$name.csr" -subj "$subj" 2>/dev/null
  openssl x509 -req -in "$state/pki/$name.csr" -CA "$state/pki/ca.crt" -CAkey "$state/pki/ca.key" \
    -CAcreateserial -days 2 -extfile "$ext" -out "$state/pki/$name.crt" 2>/dev/null
  rm -f "$ext" "$state/pki/$name.csr"
}

# kubeconfig NAME: a kubeconfig that authenticates with certificate NAME.
kubeconfig() {
  local name=$1
  cat > "$state/kubeconfig-$name" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: hitl-e2e
  cluster:
    server: https://$node_ip:6443
    certificate-authority: $state/pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $state/pki/$name.crt
    client-key: $state/pki/$name.key
contexts:
- name: $name
  context: {cluster: hitl-e2e, user: $name}
current-context: $name
YAML
  chmod 600 "$state/kubeconfig-$name"
}

make_pki() {
  mkdir -p "$state/pki"
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$state/pki/ca.key" -out "$state/pki/ca.crt" -subj "/CN=hitl-e2e-ca" 2>/dev/null
  openssl genrsa -out "$state/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$state/pki/sa.key" -pubout -out "$state/pki/sa.pub" 2>/dev/null
  cert apiserver kube-apiserver "" \
    "IP:$node_ip,IP:$service_ip,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kubelet "system:node:$node_name" system:nodes
  cert kube-proxy system:kube-proxy
  local n
  for n in admin controller-manager scheduler kubelet kube-proxy; do kubeconfig "$n"; done
  # People who answer questions: no permissions until roles are bound to them.
  for n in alice bob; do cert "$n" "$n"; kubeconfig "$n"; done
}

# --- network -----------------------------------------------------------------

make_network() {
  ip netns add "$netns"
  "${ns_exec[@]}" ip link set lo up
  "${ns_exec[@]}" ip link add hitl-node0 type veth peer name hitl-node1
  "${ns_exec[@]}" ip addr add "$node_ip/24" dev hitl-node0
  "${ns_exec[@]}" ip link set hitl-node0 up
  "${ns_exec[@]}" ip link set hitl-node1 up
  # Service addresses have no route otherwise; kube-proxy rewrites them.
  "${ns_exec[@]}" ip route add "$service_cidr" dev hitl-node0
  "${ns_exec[@]}" sysctl -qw net.ipv4.ip_forward=1
  mkdir -p "$state/cni/net.d" "$state/cni/ipam"
  cat > "$state/cni/net.d/10-hitl-e2e.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "hitl-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "hitl-cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$state/cni/ipam",
        "ranges": [[{"subnet": "$pod_cidr"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
}

# --- processes -----------------------------------------------------------------

# start NAME CMD...: runs CMD in the cluster's network namespace, logging to
# $logs/NAME.log, and records its PID (nsenter execs CMD: same process).
start() {
  local name=$1
  shift
  "${ns_exec[@]}" "$@" >"$logs/$name.log" 2>&1 &
  echo $! > "$state/pids/$name"
}

alive() { [[ -f $state/pids/$1 ]] && kill -0 "$(cat "$state/pids/$1")" 2>/dev/null; }

# wait_for WHAT SECONDS CMD...: retries CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2 i
  shift 2
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  log "$what not ready after ${secs}s; last lines of the logs:"
  tail -n 20 "$logs"/*.log >&2 || true
  return 1
}

kubectl_admin() { "${ns_exec[@]}" kubectl --kubeconfig "$state/kubeconfig-admin" "$@"; }

write_configs() {
  cat > "$state/containerd.toml" <<TOML
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$state/containerd.sock"
[ttrpc]
  address = "$state/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
TOML
  cat > "$state/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $cgroup_root
containerRuntimeEndpoint: unix://$state/containerd.sock
podLogsDir: $state/pod-logs
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization:
  mode: Webhook
failSwapOn: false
resolvConf: ""
staticPodPath: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
localStorageCapacityIsolation: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
YAML
  cat > "$state/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: $state/kubeconfig-kube-proxy
hostnameOverride: $node_name
clusterCIDR: $pod_cidr
# Pods reach Services whose endpoints are on the same bridge: without
# br_netfilter the replies would skip the reverse NAT, so every Service
# connection is masqueraded to the node.
masqueradeAll: true
bindAddress: $node_ip
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
YAML
}

up() {
  local t0
  t0=$(now_ms)
  if [[ -e /run/netns/$netns || -d $state ]]; then
    log "a cluster (or its leftovers) is there already; stopping it first"
    down
  fi
  install_packages
  local b
  for b in "$envtest_bin/kube-apiserver" "$envtest_bin/etcd" "$node_bin/kube-controller-manager" \
    "$node_bin/kube-scheduler" "$node_bin/kubelet" "$node_bin/kube-proxy" "$pause_archive"; do
    [[ -e $b ]] || { log "missing $b (make e2e-cluster builds it)"; exit 1; }
  done
  mkdir -p "$state/pids" "$state/pod-logs" "$logs"
  rm -f "$logs"/*.log
  ls /run/netns 2>/dev/null | grep '^cni-' > "$state/netns-before" || true
  make_pki
  make_network
  write_configs
  local c
  for c in /sys/fs/cgroup/*/; do
    [[ -d $c && ! -L ${c%/} ]] && mkdir -p "$c${cgroup_root#/}"
  done

  start containerd containerd --config "$state/containerd.toml"
  start etcd "$envtest_bin/etcd" --data-dir "$state/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster default=http://127.0.0.1:2380 --unsafe-no-fsync
  start kube-apiserver "$envtest_bin/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --advertise-address "$node_ip" --bind-address 0.0.0.0 --secure-port 6443 \
    --service-cluster-ip-range "$service_cidr" \
    --tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
    --client-ca-file "$state/pki/ca.crt" \
    --kubelet-client-certificate "$state/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$state/pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$state/pki/sa.pub" \
    --service-account-signing-key-file "$state/pki/sa.key" \
    --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --profiling=false

  # containerd first: the pause image goes in before the kubelet wants it.
  wait_for containerd 30 ctr --address "$state/containerd.sock" version
  ctr --address "$state/containerd.sock" -n k8s.io images import "$pause_archive" >/dev/null
  wait_for kube-apiserver 60 kubectl_admin get --raw /readyz
  log "kube-apiserver ready after $(since "$t0")"

  start kube-controller-manager "$node_bin/kube-controller-manager" \
    --kubeconfig "$state/kubeconfig-controller-manager" \
    --authentication-kubeconfig "$state/kubeconfig-controller-manager" \
    --authorization-kubeconfig "$state/kubeconfig-controller-manager" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --service-account-private-key-file "$state/pki/sa.key" --root-ca-file "$state/pki/ca.crt" \
    --use-service-account-credentials \
    --cluster-signing-cert-file "$state/pki/ca.crt" --cluster-signing-key-file "$state/pki/ca.key" \
    --service-cluster-ip-range "$service_cidr" --profiling=false
  start kube-scheduler "$node_bin/kube-scheduler" \
    --kubeconfig "$state/kubeconfig-scheduler" \
    --authentication-kubeconfig "$state/kubeconfig-scheduler" \
    --authorization-kubeconfig "$state/kubeconfig-scheduler" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false
  start kubelet "$node_bin/kubelet" --config "$state/kubelet.yaml" \
    --kubeconfig "$state/kubeconfig-kubelet" --hostname-override "$node_name" \
    --node-ip "$node_ip" --root-dir "$state/kubelet"
  start kube-proxy "$node_bin/kube-proxy" --config "$state/kube-proxy.yaml"

  wait_for "the Node object" 60 kubectl_admin get node "$node_name"
  wait_for "a Ready node" 90 kubectl_admin wait --for=condition=Ready "node/$node_name" --timeout=1s
  log "node Ready after $(since "$t0")"
  wait_for "the default ServiceAccount" 60 kubectl_admin get serviceaccount default -n default
  for b in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
    alive "$b" || { log "$b exited; see $logs/$b.log"; tail -n 20 "$logs/$b.log" >&2; exit 1; }
  done
  log "cluster up after $(since "$t0"); admin kubeconfig $state/kubeconfig-admin"
}

# stop_pid NAME: SIGTERM, then SIGKILL after 10 s.
stop_pid() {
  local f=$state/pids/$1 pid i
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# The containerd shims of this cluster: processes started with its socket.
shim_pids() {
  local p
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null | grep -q "^[^ ]*containerd-shim[^ ]* .*-address $state/containerd.sock"; then
      echo "${p#/proc/}"
    fi
  done
}

down() {
  local n
  # Workloads first, while the kubelet still runs, so CNI releases addresses.
  if alive kube-apiserver && alive kubelet; then
    kubectl_admin delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1 || true
  fi
  for n in kube-proxy kubelet kube-scheduler kube-controller-manager; do stop_pid "$n"; done
  if alive containerd; then
    local ctr=(ctr --address "$state/containerd.sock" -n k8s.io) t
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true
    done
  fi
  for n in kube-apiserver etcd containerd; do stop_pid "$n"; done
  # Shims outlive containerd.
  for n in $(shim_pids); do kill -9 "$n" 2>/dev/null || true; done
  # Mounts under the cluster's directories (projected volumes, rootfs, shm).
  if [[ -d $state ]]; then
    local m
    for m in $(awk -v s="$state/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r); do
      umount -l "$m" 2>/dev/null || true
    done
  fi
  # Pod network namespaces containerd made for this cluster.
  if [[ -f $state/netns-before ]]; then
    for n in $(ls /run/netns 2>/dev/null | grep '^cni-' || true); do
      if ! grep -qx "$n" "$state/netns-before"; then
        umount -l "/run/netns/$n" 2>/dev/null || true
        rm -f "/run/netns/$n"
      fi
    done
  fi
  # Cgroups of the pods, deepest first.
  local c
  for c in /sys/fs/cgroup/*/"${cgroup_root#/}"; do
    [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  [[ -e /run/netns/$netns ]] && ip netns delete "$netns"
  rm -rf "$state"
  log "down: processes stopped, mounts, network namespaces, cgroups and state removed"
}

# footprint: the resident memory of each process of the cluster.
footprint() {
  local n pid total=0 kb
  for n in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
    pid=$(cat "$state/pids/$n" 2>/dev/null) || continue
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
    total=$((total + kb))
    printf '%-24s %6d MiB\n' "$n" $((kb / 1024))
  done
  printf '%-24s %6d MiB\n' total $((total / 1024))
}

case ${1:-} in
  up) up ;;
  footprint) footprint ;;
  down) down ;;
  exec) shift; exec "${ns_exec[@]}" "$@" ;;
  *) echo "usage: $0 up|down|footprint|exec CMD..." >&2; exit 2 ;;
esac
