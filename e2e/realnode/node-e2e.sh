#!/usr/bin/env bash
# `make node-e2e` (NOT part of `make test`): the real node of issue 23. Starts `localkube up
# --node kubelet` (the upstream kubelet, containerd, runc, kube-proxy and CoreDNS of `make
# node-deps`) and checks real outcomes on it, then stops it and checks that nothing is left behind:
#
#   1. the tutorial pattern (tutorial-etcd.yaml): three etcd Pods with --data-dir=/var/etcd/data
#      and no volume form one cluster, each on its own root filesystem (a different overlay
#      device under each member's /var/etcd/data), and the host has no /var/etcd; the members
#      find each other through CoreDNS, and a ClusterIP Service through kube-proxy reaches them,
#      from a Pod and from the host; kubectl logs and exec work through kube-apiserver;
#   2. unless NODE_E2E_CHART=0: the chart installed with its real image (image/build.sh debug) and
#      an EtcdCluster of 3 (cluster-hostpath.yaml: examples/cluster.yaml with the members as root, see there) becoming Available;
#   3. after stop: no process of the node, no mount of its state directory, no cgroup
#      localkube-<N>, the host's /proc/sys tunables the kubelet wants unchanged, the host's
#      nftables ruleset unchanged (kube-proxy's tables were in the node's network namespace).
#
# Prints the times (node Ready, tutorial Pods Ready, EtcdCluster Available, stop) and the RSS of
# the kubelet and containerd. Needs root. Fails at once, saying what to run, when node-deps are
# missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS=${TOOLS:-$ROOT/.tools}
NODE_BIN=${NODE_BIN:-$TOOLS/bin}
BIN=${ETCD_OPERATOR_TOOLS:-$TOOLS/bin}
KUBECTL=$BIN/kubectl
HELM=$BIN/helm
LOCALKUBE=$ROOT/target/debug/localkube
IMAGES=$ROOT/target/image
TIMEOUT=${NODE_E2E_TIMEOUT:-180}
CHART=${NODE_E2E_CHART:-1}
ETCD_MINOR=3.6

fail() { printf '\nnode-e2e: FAILED: %s\n' "$*" >&2; exit 1; }
say() { printf 'node-e2e: %s\n' "$*"; }
elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

[ "$(id -u)" = 0 ] || fail "needs root (containerd, runc, network namespaces)"
for b in containerd containerd-shim-runc-v2 runc ctr kubelet kube-proxy coredns; do
  [ -x "$NODE_BIN/$b" ] || fail "$NODE_BIN/$b is missing: run \`make node-deps\` first (builds runc, containerd, the kubelet, kube-proxy and CoreDNS from the Go module proxy; ~35 min cold, ~2 min with a warm Go cache)"
done
[ -f "$TOOLS/node/pause.tar" ] || fail "$TOOLS/node/pause.tar is missing: run \`make node-deps\` first"
for b in kubectl helm etcd-$ETCD_MINOR kube-apiserver; do
  [ -x "$BIN/$b" ] || fail "$BIN/$b is missing: run \`make deps\` first"
done
[ -x "$LOCALKUBE" ] || fail "$LOCALKUBE is missing: cargo build -p localkube"

# The images the Pods run: the etcd image, and the operators' image for the chart.
images=(--node-image "$TOOLS/node/pause.tar")
ETCD_OPERATOR_TOOLS=$BIN "$ROOT/image/build-etcd.sh" "$ETCD_MINOR" >/dev/null
images+=(--node-image "$IMAGES/etcd-$ETCD_MINOR.tar")
if [ "$CHART" = 1 ]; then
  for op in cluster backup restore; do
    [ -x "$ROOT/target/debug/etcd-$op-operator" ] || fail "target/debug/etcd-$op-operator is missing: cargo build -p etcd-$op-operator (make node-e2e builds them)"
  done
  ETCD_OPERATOR_TOOLS=$BIN "$ROOT/image/build.sh" debug >/dev/null
  images+=(--node-image "$IMAGES/etcd-operator.tar")
fi

STATE=$(mktemp -d /tmp/node-e2e.XXXXXX)
export KUBECONFIG=$STATE/state/kubeconfig
tunables=(/proc/sys/vm/overcommit_memory /proc/sys/vm/panic_on_oom /proc/sys/kernel/panic /proc/sys/kernel/panic_on_oops)
sysctl_before=$(cat "${tunables[@]}")
nft_before=$(nft --stateless list ruleset 2>&1 | sha256sum)
localkube_pid=""

diagnostics() {
  [ -s "$KUBECONFIG" ] || return 0
  "$KUBECTL" get nodes,pods,etcd -A -o wide 2>&1 | sed 's/^/   /' || true
  "$KUBECTL" get events -A --sort-by=.metadata.creationTimestamp 2>&1 | tail -20 | sed 's/^/   /' || true
  tail -20 "$STATE/state/logs/kubelet.log" 2>/dev/null | sed 's/^/   kubelet: /' || true
}

stop_localkube() {
  [ -n "$localkube_pid" ] || return 0
  local start
  start=$(date +%s.%N)
  kill -TERM "$localkube_pid" 2>/dev/null || true
  wait "$localkube_pid" 2>/dev/null || true
  localkube_pid=""
  say "localkube stopped in $(elapsed "$start") s"
}

cleanup() {
  local rc=$?
  [ "$rc" = 0 ] || diagnostics
  stop_localkube
  [ "$rc" = 0 ] && rm -rf "$STATE"
  [ "$rc" = 0 ] || say "state kept in $STATE (logs in $STATE/state/logs)"
}
trap cleanup EXIT

# A private loopback address per run (the API server itself listens on the node's bridge).
address=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).1
say "localkube up --node kubelet (state $STATE)"
start=$(date +%s.%N)
"$LOCALKUBE" up --state-dir "$STATE/state" --address "$address" --port 6443 \
  --etcd-binary "$BIN/etcd-$ETCD_MINOR" --tools-dir "$BIN" \
  --node kubelet --node-bin-dir "$NODE_BIN" "${images[@]}" >"$STATE/localkube.log" 2>&1 &
localkube_pid=$!
until [ -s "$KUBECONFIG" ]; do
  kill -0 "$localkube_pid" 2>/dev/null || { localkube_pid=""; fail "localkube exited: $(grep -v kube_client "$STATE/localkube.log" | tail -5)"; }
  [ "$(elapsed "$start" | cut -d. -f1)" -lt "$TIMEOUT" ] || fail "localkube did not serve within $TIMEOUT s"
  sleep 0.2
done
say "localkube serving $(elapsed "$start") s after up (control plane, containerd, images imported: $(grep -o 'image imported.*' "$STATE/localkube.log" | sed 's/\x1b\[[0-9;]*m//g' | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^secs=/) { sub("secs=", "", $i); t += $i } } END { printf "%.1f s", t }'))"
serving=$(date +%s.%N)
until "$KUBECTL" get node localkube >/dev/null 2>&1; do
  [ "$(elapsed "$start" | cut -d. -f1)" -lt "$TIMEOUT" ] || fail "the kubelet did not register the Node"
  sleep 0.2
done
"$KUBECTL" wait node/localkube --for=condition=Ready --timeout="${TIMEOUT}s" >/dev/null
say "node Ready $(elapsed "$serving") s after that: $("$KUBECTL" get node localkube -o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}')"
# Pods need their namespace's ServiceAccount, which kube-controller-manager creates shortly after start.
until "$KUBECTL" get serviceaccount default >/dev/null 2>&1; do
  [ "$(elapsed "$serving" | cut -d. -f1)" -lt "$TIMEOUT" ] || fail "no ServiceAccount default/default"
  sleep 0.2
done
network_index=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["index"])' "$STATE/state/network.json")
cgroup=localkube-$network_index

# --- 1. The tutorial pattern.
[ ! -e /var/etcd ] || fail "/var/etcd exists on the host before the test: the check below needs it absent"
start=$(date +%s.%N)
"$KUBECTL" apply -f "$ROOT/e2e/realnode/tutorial-etcd.yaml" >/dev/null
"$KUBECTL" wait pod -l app=tutorial-etcd --for=condition=Ready --timeout="${TIMEOUT}s" >/dev/null
say "tutorial: 3 etcd Pods (--data-dir=/var/etcd/data, no volume) Ready in $(elapsed "$start") s"
members=$("$KUBECTL" exec etcd0 -- etcdctl member list)
[ "$(grep -c ', started, ' <<<"$members")" = 3 ] || fail "expected 3 started members, got: $members"
"$KUBECTL" exec etcd1 -- etcdctl put tutorial-key written-through-etcd1 >/dev/null
got=$("$KUBECTL" exec etcd2 -- etcdctl get --print-value-only tutorial-key)
[ "$got" = written-through-etcd1 ] || fail "etcd2 read '$got' for the key etcd1 wrote"
got=$("$KUBECTL" exec etcd0 -- etcdctl --endpoints=http://etcd-client:2379 get --print-value-only tutorial-key)
[ "$got" = written-through-etcd1 ] || fail "through the ClusterIP Service etcd-client: '$got'"
# From the host: the Service CIDR is routed to the node, where kube-proxy's rules are.
cluster_ip=$("$KUBECTL" get service etcd-client -o jsonpath='{.spec.clusterIP}')
got=$("$BIN/etcdctl-$ETCD_MINOR" --endpoints="http://$cluster_ip:2379" --dial-timeout=5s get --print-value-only tutorial-key)
[ "$got" = written-through-etcd1 ] || fail "from the host through the ClusterIP $cluster_ip: '$got'"
say "tutorial: one cluster of 3 (member list), a write on etcd1 read on etcd2 and through the ClusterIP Service (kube-proxy; from a Pod and from the host)"
# Each member's database on its own root filesystem: the etcd processes of the node's cgroup,
# seen from the host through /proc/PID/root.
devices=()
for procs in $(find "/sys/fs/cgroup/pids/$cgroup/kubepods" -name cgroup.procs); do
  for pid in $(cat "$procs"); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = etcd ] || continue
    devices+=("$(stat -c %d "/proc/$pid/root/var/etcd/data/member/snap/db")")
  done
done
[ "${#devices[@]}" = 3 ] || fail "expected 3 etcd processes in the node's cgroup, found ${#devices[@]}"
[ "$(printf '%s\n' "${devices[@]}" | sort -u | wc -l)" = 3 ] || fail "the members' /var/etcd/data share a filesystem: devices ${devices[*]}"
[ ! -e /var/etcd ] || fail "the host has a /var/etcd now: a container wrote to the host's filesystem"
say "tutorial: each member's /var/etcd/data on its own filesystem (devices ${devices[*]}), none on the host"
"$KUBECTL" logs etcd0 --tail=1 | grep -q '"level"' || fail "kubectl logs etcd0 returned no etcd log line"
"$KUBECTL" delete -f "$ROOT/e2e/realnode/tutorial-etcd.yaml" --wait=false >/dev/null

# --- 2. The chart with its real image, an EtcdCluster of 3.
if [ "$CHART" = 1 ]; then
  start=$(date +%s.%N)
  "$HELM" install etcd-operator "$ROOT/charts/etcd-operator" -n etcd-operator --create-namespace \
    --wait --timeout "${TIMEOUT}s" >/dev/null
  say "chart: helm install --wait done in $(elapsed "$start") s (image $("$KUBECTL" -n etcd-operator get deploy -o jsonpath='{.items[0].spec.template.spec.containers[0].image}'))"
  start=$(date +%s.%N)
  "$KUBECTL" apply -f "$ROOT/e2e/realnode/cluster-hostpath.yaml" >/dev/null
  "$KUBECTL" wait etcd/main --for=jsonpath='{.status.readyMembers}'=3 --timeout="${TIMEOUT}s" >/dev/null
  "$KUBECTL" wait etcd/main --for=condition=Available --timeout="${TIMEOUT}s" >/dev/null
  say "chart: EtcdCluster main of 3 Available with 3 ready members in $(elapsed "$start") s"
fi

# --- Resources, then stop and check nothing is left.
# node_pids_named COMM: the pids of the node's own processes (containerd, kubelet, shims) named COMM.
node_pids_named() {
  local p
  for p in $(cat "/sys/fs/cgroup/pids/$cgroup/node/cgroup.procs"); do
    if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$1" ]; then echo "$p"; fi
  done
}
rss_mb() { awk '/VmRSS/ { total += $2 } END { printf "%d MB", total / 1024 }' $(printf '/proc/%s/status ' "$@"); }
shims=$(node_pids_named containerd-shim)
say "RSS: kubelet $(rss_mb $(node_pids_named kubelet)), containerd $(rss_mb $(node_pids_named containerd)), kube-proxy $(rss_mb $(node_pids_named kube-proxy)), CoreDNS $(rss_mb $(node_pids_named coredns)), $(wc -w <<<"$shims") containerd shims $(rss_mb $shims) together"
node_pids=$(cat $(find "/sys/fs/cgroup/pids/$cgroup" -name cgroup.procs))
stop_localkube
for pid in $node_pids; do
  [ ! -e "/proc/$pid" ] || [ "$(awk '/^State/ { print $2 }' "/proc/$pid/status")" = Z ] \
    || fail "process $pid ($(cat "/proc/$pid/comm")) of the node still runs after stop"
done
! mount | grep -q "$STATE" || fail "mounts of $STATE left behind: $(mount | grep "$STATE")"
! ls -d /sys/fs/cgroup/*/"$cgroup" >/dev/null 2>&1 || fail "cgroup $cgroup left behind"
[ "$(cat "${tunables[@]}")" = "$sysctl_before" ] || fail "the host's kernel tunables changed"
[ "$(nft --stateless list ruleset 2>&1 | sha256sum)" = "$nft_before" ] || fail "the host's nftables ruleset changed"
! ip link show "lknode$network_index" >/dev/null 2>&1 || fail "the node's veth lknode$network_index is left on the host"
say "stopped: no node process, mount, cgroup or veth left; the host's /proc/sys tunables and nftables ruleset unchanged"
say "PASSED"
