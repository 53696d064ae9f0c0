#!/usr/bin/env bash
# `make demo`: the whole story on the local control plane, with the real chart, real etcd and a
# real S3 store (SeaweedFS). Each step prints what a user would type, how long it took, and the
# demo ends with a verdict. Everything it starts is stopped again unless KEEP=1.
#
# Steps: start localkube → helm install the chart → an EtcdCluster of 3 (examples/cluster.yaml)
# → write keys → an EtcdBackup to S3 (examples/backup.yaml) → write more keys → destroy quorum
# (two members' Pods and volumes deleted) → an EtcdRestore (examples/restore.yaml) → check that
# exactly the keys written before the backup are there.
#
# Needs: root (Pods get network namespaces), `make deps` done, `cargo build --workspace --bins`
# done (the Makefile's demo target does both).
#
# DEMO_NODE=kubelet (or LOCALKUBE_NODE=kubelet, as the scenarios take it) runs it on the real
# node (issue 23; `make node-deps` first; NODE_BIN or LOCALKUBE_NODE_BIN_DIR where it put the
# binaries): the upstream kubelet, containerd, kube-proxy and CoreDNS instead of our node agent,
# DNS and proxy, the chart's real image, the etcd image of 3.6 and a SeaweedFS image
# (e2e/realnode/build-images.sh, rebuilt only when their inputs changed), imported into containerd.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="${ETCD_OPERATOR_TOOLS:-$ROOT/.tools/bin}"
STATE="${DEMO_STATE_DIR:-$ROOT/.demo}"
ADDRESS="${DEMO_ADDRESS:-127.0.0.1}"
PORT="${DEMO_PORT:-6543}"
KEEP="${KEEP:-0}"
TIMEOUT="${DEMO_STEP_TIMEOUT:-300}"
LOCALKUBE="$ROOT/target/debug/localkube"
export KUBECONFIG="$STATE/kubeconfig"
export PATH="$TOOLS:$PATH"
KUBECTL="$TOOLS/kubectl"
HELM="$TOOLS/helm"
ETCDCTL="$TOOLS/etcdctl-3.6"
NODE="${DEMO_NODE:-${LOCALKUBE_NODE:-agent}}"
NODE_BIN="${NODE_BIN:-${LOCALKUBE_NODE_BIN_DIR:-$ROOT/.tools/bin}}"
NODE_PAUSE="${NODE_PAUSE:-$(dirname "$NODE_BIN")/node/pause.tar}"

demo_start=$(date +%s.%N)
step_no=0
localkube_pid=""
verdict="FAILED"

say() { printf '%s\n' "$*"; }
elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

# step "title" "what a user types": prints the header; `done_step` prints the duration.
step() {
  step_no=$((step_no + 1))
  step_start=$(date +%s.%N)
  say ""
  say "== [$step_no] $1"
  [ -n "${2:-}" ] && say "   \$ $2"
  return 0
}
done_step() { say "   ok ($(elapsed "$step_start") s)"; }

die() {
  say ""
  say "!! $*"
  diagnostics
  exit 1
}

diagnostics() {
  [ -f "$KUBECONFIG" ] || return 0
  say "---- diagnostics ----"
  "$KUBECTL" get etcd,etcdbackup,etcdrestore,pods,pvc -A -o wide 2>&1 | sed 's/^/   /' || true
  "$KUBECTL" get events -A --sort-by=.metadata.creationTimestamp 2>&1 | tail -30 | sed 's/^/   /' || true
  for d in cluster backup restore; do
    say "   -- logs of the $d operator (tail)"
    "$KUBECTL" logs -n etcd-operator "deploy/etcd-operator-$d" --tail=15 2>&1 | sed 's/^/   /' || true
  done
}

cleanup() {
  local code=$?
  if [ "$KEEP" = "1" ] && [ "$code" = "0" ]; then
    return
  fi
  if [ -n "$localkube_pid" ] && kill -0 "$localkube_pid" 2>/dev/null; then
    say ""
    say "== stopping the local control plane (and every Pod it runs)"
    kill -TERM "$localkube_pid" 2>/dev/null || true
    for _ in $(seq 1 120); do kill -0 "$localkube_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$localkube_pid" 2>/dev/null || true
  fi
  rm -rf "$STATE"
  say ""
  say "== verdict: $verdict (total $(elapsed "$demo_start") s)"
}
trap cleanup EXIT

# etcdctl with the cluster's DNS, through `localkube run` (as an in-cluster client would).
etcdctl() {
  "$LOCALKUBE" run --state-dir "$STATE" -- "$ETCDCTL" --dial-timeout=5s --command-timeout=10s \
    --endpoints "http://main-client.default.svc.cluster.local:2379" "$@"
}

# wait_phase KIND NAME PHASE: polls .status.phase; a Failed object ends the demo at once.
wait_phase() {
  local kind="$1" name="$2" want="$3" deadline=$((SECONDS + TIMEOUT)) phase=""
  while [ $SECONDS -lt $deadline ]; do
    phase=$("$KUBECTL" get "$kind" "$name" -o jsonpath='{.status.phase}' 2>/dev/null || true)
    [ "$phase" = "$want" ] && return 0
    if [ "$phase" = "Failed" ]; then
      die "$kind/$name failed: $("$KUBECTL" get "$kind" "$name" -o jsonpath='{.status.reason}: {.status.message}')"
    fi
    sleep 1
  done
  die "$kind/$name is '$phase', not '$want', after ${TIMEOUT}s"
}

[ "$(id -u)" = "0" ] || { say "make demo needs root: Pods get their own network namespaces"; exit 2; }
for bin in "$LOCALKUBE" "$KUBECTL" "$HELM" "$ETCDCTL" "$TOOLS/etcd-3.5" "$TOOLS/weed"; do
  [ -x "$bin" ] || { say "missing $bin: run 'make deps' and 'cargo build --workspace --bins'"; exit 2; }
done
if [ -e "$STATE" ]; then
  say "$STATE exists (a demo kept with KEEP=1?): stop it and remove the directory first"
  exit 2
fi
mkdir -p "$STATE"

# The node: our node agent, or the real node with the images its Pods run.
node_args=(--node agent)
cluster_yaml="$ROOT/examples/cluster.yaml"
weed_image=busybox weed_path="$TOOLS/weed"
case "$NODE" in
  agent) ;;
  kubelet)
    for bin in containerd containerd-shim-runc-v2 runc ctr kubelet kube-proxy coredns; do
      [ -x "$NODE_BIN/$bin" ] || { say "missing $NODE_BIN/$bin: run 'make node-deps'"; exit 2; }
    done
    [ -f "$NODE_PAUSE" ] || { say "missing $NODE_PAUSE: run 'make node-deps'"; exit 2; }
    say "building the images the Pods run (e2e/realnode/build-images.sh; no registry: imported into containerd)"
    ETCD_OPERATOR_TOOLS=$TOOLS "$ROOT/e2e/realnode/build-images.sh" >/dev/null
    weed_image=localkube.io/seaweedfs:tools weed_path=/usr/local/bin/weed
    node_args=(--node kubelet --node-bin-dir "$NODE_BIN" --node-image "$NODE_PAUSE"
      --node-image "$ROOT/target/image/etcd-operator.tar" --node-image "$ROOT/target/image/etcd-3.6.tar"
      --node-image "$ROOT/target/image/seaweedfs.tar")
    ;;
  *) say "DEMO_NODE is 'agent' (default) or 'kubelet', not '$NODE'"; exit 2 ;;
esac

step "Start the local control plane (API server on etcd, node ($NODE), controllers, DNS)" \
  "localkube up --state-dir $STATE --port $PORT ${node_args[*]:0:2}"
setsid "$LOCALKUBE" up --state-dir "$STATE" --address "$ADDRESS" --port "$PORT" --etcd-binary "$TOOLS/etcd-3.5" \
  --tools-dir "$TOOLS" "${node_args[@]}" >"$STATE/localkube.log" 2>&1 &
localkube_pid=$!
for _ in $(seq 1 240); do
  [ -s "$KUBECONFIG" ] && "$KUBECTL" get --raw /readyz >/dev/null 2>&1 && break
  kill -0 "$localkube_pid" 2>/dev/null || die "localkube exited: $(tail -5 "$STATE/localkube.log")"
  sleep 0.5
done
"$KUBECTL" get --raw /readyz >/dev/null || die "localkube did not become ready"
done_step

step "Install the operators with helm (CRDs, three Deployments, RBAC)" \
  "helm install etcd-operator charts/etcd-operator -n etcd-operator --create-namespace --wait"
"$HELM" install etcd-operator "$ROOT/charts/etcd-operator" -n etcd-operator --create-namespace \
  --wait --timeout "${TIMEOUT}s" | sed 's/^/   /'
done_step

# wait_size N: N ready members and Available (Available alone already holds for the seed by
# itself: every member it has is healthy).
wait_size() {
  "$KUBECTL" wait etcd/main --for=jsonpath='{.status.readyMembers}'="$1" --timeout="${TIMEOUT}s" >/dev/null \
    && "$KUBECTL" wait etcd/main --for=condition=Available --timeout="${TIMEOUT}s" >/dev/null
}

step "Create an EtcdCluster of 3 and wait until all 3 members are ready" \
  "kubectl apply -f ${cluster_yaml#"$ROOT"/} && kubectl wait etcd/main --for=jsonpath='{.status.readyMembers}'=3"
"$KUBECTL" apply -f "$cluster_yaml" | sed 's/^/   /'
wait_size 3 || die "the cluster did not reach 3 ready members"
"$KUBECTL" get etcd main | sed 's/^/   /'
done_step

step "Write 20 keys" "etcdctl --endpoints http://main-client.default.svc:2379 put demo/key-NN value-NN"
for i in $(seq -w 1 20); do etcdctl put "demo/key-$i" "value-$i" >/dev/null || die "put demo/key-$i failed"; done
done_step

step "Start an S3 store (SeaweedFS in a Pod, Service s3.storage) and its bucket" \
  "kubectl apply -f <seaweedfs Pod + Service>; aws s3 mb s3://etcd-backups"
"$KUBECTL" create namespace storage >/dev/null
sed -e "s|@WEED@|$weed_path|" -e "s|image: busybox|image: $weed_image|" "$ROOT/e2e/demo/s3.yaml" \
  | "$KUBECTL" apply -n storage -f - | sed 's/^/   /'
"$KUBECTL" wait -n storage pod/s3 --for=condition=Ready --timeout="${TIMEOUT}s" >/dev/null \
  || die "the S3 Pod did not become Ready"
# The S3 port opens before the filer behind it serves: retry until the bucket is made.
made="" last=""
for _ in $(seq 1 90); do
  if last=$(AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo "$LOCALKUBE" run --state-dir "$STATE" -- \
    "$TOOLS/aws" --endpoint-url http://s3.storage.svc.cluster.local:8333 --region us-east-1 \
    s3 mb s3://etcd-backups 2>&1); then made=1; break; fi
  sleep 1
done
[ -n "$made" ] || die "could not create the bucket: $last"
done_step

step "Back up the cluster to S3 and wait for Succeeded" \
  "kubectl apply -f examples/s3-secret.yaml -f examples/backup.yaml"
"$KUBECTL" apply -f "$ROOT/examples/s3-secret.yaml" -f "$ROOT/examples/backup.yaml" | sed 's/^/   /'
wait_phase etcdbackup main-manual-1 Succeeded
say "   artifact: $("$KUBECTL" get etcdbackup main-manual-1 -o jsonpath='{.status.artifact.uri} ({.status.artifact.sizeBytes} bytes, revision {.status.artifact.revision})')"
done_step

step "Write 5 more keys (after the backup: a restore does not bring them back)" \
  "etcdctl put demo/late-N value"
for i in 1 2 3 4 5; do etcdctl put "demo/late-$i" "after-backup" >/dev/null || die "put demo/late-$i failed"; done
done_step

step "Destroy quorum: delete two members' Pods and their volumes" \
  "kubectl delete pod main-1 main-2 --grace-period=0 --force; kubectl delete pvc main-1 main-2"
"$KUBECTL" delete pvc main-1 main-2 --wait=false 2>&1 | sed 's/^/   /'
"$KUBECTL" delete pod main-1 main-2 --grace-period=0 --force 2>&1 | grep -v '^Warning' | sed 's/^/   /'
"$KUBECTL" wait etcd/main --for=condition=Available=false --timeout="${TIMEOUT}s" >/dev/null \
  || die "the cluster did not report the lost quorum"
say "   $("$KUBECTL" get etcd main -o jsonpath='{range .status.conditions[?(@.type=="Degraded")]}Degraded: {.reason}: {.message}{end}')"
done_step

step "Restore from the backup and wait until the cluster is back at full size" \
  "kubectl apply -f examples/restore.yaml"
"$KUBECTL" apply -f "$ROOT/examples/restore.yaml" | sed 's/^/   /'
wait_phase etcdrestore main-restore-1 Succeeded
wait_size 3 || die "the restored cluster is not at 3 ready members"
"$KUBECTL" get etcd main | sed 's/^/   /'
"$KUBECTL" get pvc -L etcd.operator.rs/retained-by-restore | sed 's/^/   /'
done_step

step "Check the data: exactly the 20 keys written before the backup" \
  "etcdctl get demo/ --prefix --keys-only"
keys=$(etcdctl get demo/ --prefix --keys-only | sed '/^$/d')
expected=$(for i in $(seq -w 1 20); do echo "demo/key-$i"; done)
if [ "$keys" != "$expected" ]; then
  die "keys after the restore differ: got $(echo "$keys" | wc -l) keys: $(echo "$keys" | tr '\n' ' ')"
fi
for i in 01 10 20; do
  value=$(etcdctl get "demo/key-$i" --print-value-only)
  [ "$value" = "value-$i" ] || die "demo/key-$i is '$value', not 'value-$i'"
done
say "   20 keys, values checked; the 5 keys written after the backup are gone, as they should be"
done_step

verdict="PASSED"
if [ "$KEEP" = "1" ]; then
  say ""
  say "== the environment keeps running (KEEP=1):"
  say "   export KUBECONFIG=$KUBECONFIG PATH=$TOOLS:\$PATH"
  say "   kubectl get etcd,etcdbackup,etcdrestore,pods"
  say "   $LOCALKUBE run --state-dir $STATE -- $ETCDCTL --endpoints http://main-client.default.svc:2379 get demo/ --prefix"
  say "   stop it: kill $localkube_pid; then rm -rf $STATE"
  say "== verdict: $verdict (total $(elapsed "$demo_start") s)"
fi
