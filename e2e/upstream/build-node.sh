#!/usr/bin/env bash
# Builds the real node (issue 23; `make node-deps`, NOT part of `make deps`: a cold build takes
# ~30 min on 2 cores): runc, containerd (containerd, containerd-shim-runc-v2, ctr), the kubelet
# and kube-proxy (one module: k8s.io/kubernetes), and CoreDNS from the Go module proxy at the
# versions pinned by the wrapper modules next to this script (runc/, containerd/, kubelet/,
# coredns/; go.sum committed, built with -mod=readonly), the pause image from pause/pause.c, and
# Debian's CNI plugins (containernetworking-plugins, /usr/lib/cni).
#
# Builds into $TOOLS_STORE/node (default $TOOLS/node) and hard-links the binaries into
# $TOOLS/bin; the pause image is $TOOLS/node/pause.tar. Idempotent: each module's stamp records
# its version, the hash of its go.mod/go.sum/*.go, the flags and the Go version; when it matches,
# nothing is rebuilt. A failure prints the command that failed and what to do.
#
#   TOOLS=... e2e/upstream/build-node.sh
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TOOLS=${TOOLS:-$REPO/.tools}
TOOLS_STORE=${TOOLS_STORE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator/tools}
[ "$TOOLS_STORE" = none ] && TOOLS_STORE=$TOOLS
BIN=$TOOLS/bin
STORE=$TOOLS_STORE/node
mkdir -p "$BIN" "$STORE" "$TOOLS/node"
# The pause image's name: containerd's sandbox image (localkube's containerd config pins it).
PAUSE_REF=registry.k8s.io/pause:3.10

log() { printf '[node-deps] %s\n' "$*" >&2; }

. "$HERE/place.sh"

# run WHAT-TO-DO CMD...: runs CMD; on failure prints it, its directory and WHAT-TO-DO, and exits.
run() {
  local advice=$1 rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    printf '[node-deps] FAILED (exit %s) in %s:\n  ' "$rc" "$PWD" >&2
    printf '%q ' "$@" >&2
    printf '\n[node-deps] What to do: %s\n' "$advice" >&2
    exit "$rc"
  fi
}
GO_ADVICE="run that command yourself in that directory. A module that cannot be downloaded: check \
that the Go module proxy is reachable (go env GOPROXY). 'missing go.sum entry' or 'updates to go.mod \
needed': the pinned version changed, run 'go mod tidy' in that module and commit go.mod/go.sum. A Go \
too old for the module's go line: export GOTOOLCHAIN=go1.26.8 or newer."

command -v go >/dev/null || { log "FAILED: no 'go' on PATH. What to do: install Go >= 1.26 and run make node-deps again."; exit 1; }

# --- Debian: libseccomp for runc's cgo build, the CNI plugins, a C compiler and static libc for pause.
need_apt=()
[ -f /usr/include/seccomp.h ] || need_apt+=(libseccomp-dev)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] || need_apt+=(containernetworking-plugins)
command -v gcc >/dev/null || need_apt+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ] || need_apt+=(libc6-dev)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  run "install them yourself (as root): apt-get install ${need_apt[*]}" apt-get update -qq
  run "install them yourself (as root): apt-get install ${need_apt[*]}" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# build_module MODULE VERSION-PATTERN CGO TAGS LDFLAGS PACKAGE:NAME...
# Builds each PACKAGE of the wrapper module MODULE into $STORE/NAME, unless the stamp matches.
build_module() {
  local module=$1 require=$2 cgo=$3 tags=$4 ldflags=$5
  shift 5
  local mod=$HERE/$module version stamp
  version=$(awk -v m="$require" '($1 == "require" && $2 == m) { print $3 }' "$mod/go.mod")
  [ -n "$version" ] || { log "FAILED: $mod/go.mod has no 'require $require vX.Y.Z'"; exit 1; }
  stamp="$module $version $(cat "$mod/go.mod" "$mod/go.sum" "$mod"/*.go | sha256sum | cut -c1-16) cgo=$cgo tags=$tags $(go env GOVERSION) $ldflags"
  local all_built=1 spec
  for spec in "$@"; do
    [ -x "$STORE/${spec##*:}" ] || all_built=0
  done
  if [ "$all_built" = 1 ] && [ "$(cat "$STORE/$module.stamp" 2>/dev/null)" = "$stamp" ]; then
    log "$module $version: up to date ($STORE)"
  else
    rm -f "$STORE/$module.stamp"
    local start name
    for spec in "$@"; do
      name=${spec##*:}
      log "go build ${spec%:*}@$version (nice; cold: many minutes on 2 cores, cached afterwards)"
      start=$(date +%s)
      (cd "$mod" && run "$GO_ADVICE" env CGO_ENABLED="$cgo" nice -n 10 go build -mod=readonly -trimpath \
        ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$STORE/$name.tmp" "${spec%:*}")
      mv -f "$STORE/$name.tmp" "$STORE/$name"
      log "built $name $version in $(( $(date +%s) - start )) s"
    done
    echo "$stamp" > "$STORE/$module.stamp"
  fi
  for spec in "$@"; do
    place "$STORE/${spec##*:}" "$BIN/${spec##*:}"
  done
}

RUNC_VERSION=$(awk '$1 == "require" && $2 == "github.com/opencontainers/runc" { print $3 }' "$HERE/runc/go.mod")
# runc: cgo for libseccomp (seccomp profiles; the kubelet's RuntimeDefault needs it).
build_module runc github.com/opencontainers/runc 1 seccomp "-s -w -X main.version=${RUNC_VERSION#v}" \
  github.com/opencontainers/runc:runc
CONTAINERD_VERSION=$(awk '$1 == "require" && $2 == "github.com/containerd/containerd/v2" { print $3 }' "$HERE/containerd/go.mod")
build_module containerd github.com/containerd/containerd/v2 0 "" \
  "-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION#v}" \
  github.com/containerd/containerd/v2/cmd/containerd:containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2:containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr:ctr
# The kubelet: the control plane's versions and version stamp (build-kubernetes.sh).
KUBE_VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$HERE/kubelet/go.mod")
KUBE_MINOR=$(echo "$KUBE_VERSION" | cut -d. -f2)
KUBE_LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  KUBE_LDFLAGS+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$KUBE_MINOR"
  KUBE_LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
build_module kubelet k8s.io/kubernetes 0 "" "$KUBE_LDFLAGS" k8s.io/kubernetes/cmd/kubelet:kubelet \
  k8s.io/kubernetes/cmd/kube-proxy:kube-proxy
# CoreDNS: upstream's coremain with the plugins localkube's Corefile uses (coredns/main.go).
build_module coredns github.com/coredns/coredns 0 "" "-s -w" etcd-operator.e2e/upstream/coredns:coredns

# --- The pause image: no registry here, so registry.k8s.io/pause is made from pause/pause.c,
# static (the image holds that one file), user 65535 as upstream's.
pause_stamp="$(sha256sum "$HERE/pause/pause.c" "$REPO/image/ociimage.py" | sha256sum | cut -c1-16) $PAUSE_REF $(gcc -dumpfullversion)"
if [ -f "$STORE/pause.tar" ] && [ "$(cat "$STORE/pause.stamp" 2>/dev/null)" = "$pause_stamp" ]; then
  log "pause image: up to date ($STORE/pause.tar)"
else
  rm -f "$STORE/pause.stamp"
  run "install gcc and libc6-dev (static libc): apt-get install gcc libc6-dev" \
    gcc -static -O2 -o "$STORE/pause" "$HERE/pause/pause.c"
  run "check image/ociimage.py (python3 image/ociimage.py build --help)" \
    python3 "$REPO/image/ociimage.py" build --out "$STORE/pause-image" --ref "$PAUSE_REF" --epoch 0 \
    --file "/pause=$STORE/pause" --entrypoint /pause --user 65535:65535 >/dev/null
  mv -f "$STORE/pause-image.tar" "$STORE/pause.tar"
  rm -rf "$STORE/pause-image"
  echo "$pause_stamp" > "$STORE/pause.stamp"
  log "built the pause image $PAUSE_REF"
fi
place "$STORE/pause.tar" "$TOOLS/node/pause.tar"

# --- Report: each binary's version (a broken binary fails here).
set +o pipefail
for b in runc containerd ctr kubelet kube-proxy; do
  printf '[node-deps] %-10s %s\n' "$b" "$("$BIN/$b" --version 2>&1 | head -1)" >&2
done
printf '[node-deps] %-10s %s\n' coredns "$("$BIN/coredns" -version 2>&1 | head -1)" >&2
printf '[node-deps] %-10s %s\n' pause "$TOOLS/node/pause.tar ($PAUSE_REF)" >&2
printf '[node-deps] %-10s %s\n' cni "/usr/lib/cni (Debian containernetworking-plugins $(dpkg-query -W -f='${Version}' containernetworking-plugins 2>/dev/null))" >&2
