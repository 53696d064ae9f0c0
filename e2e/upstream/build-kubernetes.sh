#!/usr/bin/env bash
# Builds the upstream control plane the e2e harness runs (kube-apiserver, kube-controller-manager,
# kube-scheduler) from the Go module proxy, at the version pinned in kubernetes/go.mod, into
# $TOOLS_STORE/kubernetes (default: $BIN; install-tools.sh passes its store outside the clone) and
# hard-links them into $BIN (default .tools/bin). Idempotent: a binary whose stamp names the
# pinned version and this module's go.sum is not rebuilt. Called by e2e/install-tools.sh (`make deps`).
#
# Why a module of our own: k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them
# with `replace => ./staging/...`, which only applies inside its own repository; kubernetes/go.mod
# maps each to the published v0.37.x instead (regenerate with gen-kubernetes-module.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$HERE/../../.tools/bin}
MODULE=$HERE/kubernetes
mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd) # the build runs in the module's directory
if [ -n "${TOOLS_STORE:-}" ]; then STORE=$TOOLS_STORE/kubernetes; else STORE=$BIN; fi
mkdir -p "$STORE"
STORE=$(cd "$STORE" && pwd)

log() { printf '[deps] %s\n' "$*" >&2; }

. "$HERE/place.sh"
fail() {
  log "FAILED: $1"
  log "$2"
  exit 1
}

command -v go >/dev/null || fail "go: command not found" \
  "Install Go 1.26+ (the Go toolchain at /usr/local/go on the project's machines) and run make deps again."

VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$MODULE/go.mod")
[ -n "$VERSION" ] || fail "reading the pinned version from $MODULE/go.mod" "The go.mod must have 'require k8s.io/kubernetes vX.Y.Z'."
MINOR=$(echo "$VERSION" | cut -d. -f2)
STAMP_ID="$VERSION $(sha256sum "$MODULE/go.sum" | cut -c1-16)"

# As upstream's hack/lib/version.sh sets them, so `kubectl version` shows the real version.
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$MINOR"
  LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
  out=$STORE/$cmd
  if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$STAMP_ID" ]; then
    place "$out" "$BIN/$cmd"
    continue
  fi
  log "go build k8s.io/kubernetes/cmd/$cmd@$VERSION (cold: minutes on 2 cores; cached afterwards)"
  start=$(date +%s)
  build=(go build -trimpath -ldflags "$LDFLAGS" -o "$out.tmp" "k8s.io/kubernetes/cmd/$cmd")
  if ! (cd "$MODULE" && CGO_ENABLED=0 GOFLAGS=-mod=mod "${build[@]}"); then
    fail "(cd $MODULE && CGO_ENABLED=0 ${build[*]})" \
      "Check that the Go module proxy is reachable (go env GOPROXY) and that go.mod/go.sum are intact (git diff e2e/upstream/kubernetes); a Go too old for the module's go line: export GOTOOLCHAIN=go1.26.8 or newer."
  fi
  mv "$out.tmp" "$out"
  echo "$STAMP_ID" > "$out.stamp"
  place "$out" "$BIN/$cmd"
  log "built $cmd $VERSION in $(( $(date +%s) - start )) s"
done
