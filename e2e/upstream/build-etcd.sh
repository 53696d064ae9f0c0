#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl for each etcd minor the tests run, from the Go module proxy,
# at the versions pinned by the wrapper modules next to this script (etcd-3.5/, etcd-3.6/,
# etcd-3.7/: a go.mod requiring every go.etcd.io/etcd/* module at one version, because the etcd
# modules' own replace lines do not apply to a consumer, and a tools.go importing the three mains).
#
# Builds into $TOOLS_STORE/etcd/<version> (default $TOOLS: install-tools.sh passes its store
# outside the clone), hard-links $TOOLS/etcd/<version>/{etcd,etcdctl,etcdutl} to them and links
# $TOOLS/bin/etcd-<minor>, etcdctl-<minor>, etcdutl-<minor> to those. Idempotent: a stamp file
# next to the built binaries records the version, the hash of the module's go.mod/go.sum and the
# Go version; when it matches, nothing is rebuilt.
#
#   TOOLS=... e2e/upstream/build-etcd.sh [minor ...]      (default: every etcd-* module here)
#
# GOCACHE/GOMODCACHE are Go's defaults unless set: keep them between runs (a cold build of one
# minor takes minutes on 2 cores, a warm one seconds; figures in e2e/README.md).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TOOLS=${TOOLS:-$REPO/.tools}
TOOLS_STORE=${TOOLS_STORE:-$TOOLS}
BIN=$TOOLS/bin
mkdir -p "$BIN"

. "$HERE/place.sh"

log() { printf '[deps/etcd] %s\n' "$*" >&2; }

# Runs a command; on failure prints the exact command, its directory and what to do, then exits.
run() {
  local rc=0
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    {
      printf '[deps/etcd] FAILED (exit %s) in %s:\n  ' "$rc" "$PWD"
      printf '%q ' "$@"
      printf '\n[deps/etcd] What to do: run that command yourself in that directory. If a module\n'
      printf '[deps/etcd] cannot be downloaded, check that the Go module proxy is reachable\n'
      printf '[deps/etcd] (go env GOPROXY; go mod download -x). If go.sum does not match, the pinned\n'
      printf '[deps/etcd] version changed: run `go mod tidy` in that module and commit go.mod/go.sum.\n'
      printf '[deps/etcd] If Go is too old for the module'"'"'s go line, install a newer Go or set\n'
      printf '[deps/etcd] GOTOOLCHAIN=go1.26.10 (served by the proxy).\n'
    } >&2
    exit "$rc"
  fi
}

command -v go >/dev/null || {
  log "FAILED: no 'go' on PATH. What to do: install Go >= 1.26 (e.g. /usr/local/go/bin) and rerun make deps."
  exit 1
}

build_minor() { # minor, e.g. 3.6
  local minor=$1 mod=$HERE/etcd-$1
  [ -f "$mod/go.mod" ] || { log "FAILED: no module $mod/go.mod"; exit 1; }
  local version
  version=$(sed -n 's#^[[:space:]]*go.etcd.io/etcd/server/v3 \(v[0-9.]*\)$#\1#p' "$mod/go.mod")
  [ -n "$version" ] || { log "FAILED: $mod/go.mod requires no go.etcd.io/etcd/server/v3"; exit 1; }
  local dest=$TOOLS_STORE/etcd/$version installed=$TOOLS/etcd/$version stamp
  stamp="$version $(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1) $(go env GOVERSION)"
  if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$stamp" ] \
    && [ -x "$dest/etcd" ] && [ -x "$dest/etcdctl" ] && [ -x "$dest/etcdutl" ]; then
    log "etcd $version: up to date ($dest)"
  else
    mkdir -p "$dest"
    rm -f "$dest/.stamp"
    local pkg name start
    for pkg in go.etcd.io/etcd/server/v3:etcd go.etcd.io/etcd/etcdctl/v3:etcdctl go.etcd.io/etcd/etcdutl/v3:etcdutl; do
      name=${pkg##*:}
      start=$(date +%s%N)
      # -mod=readonly: the pinned go.sum must already cover everything (no silent re-resolution).
      (cd "$mod" && run env CGO_ENABLED=0 go build -mod=readonly -trimpath \
        -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-proxy-$version" \
        -o "$dest/$name.tmp" "${pkg%%:*}")
      mv -f "$dest/$name.tmp" "$dest/$name"
      local ms=$((($(date +%s%N) - start) / 1000000))
      log "etcd $version: built $name in $((ms / 1000)).$((ms % 1000 / 100)) s"
    done
    printf '%s' "$stamp" >"$dest/.stamp"
  fi
  local b
  mkdir -p "$installed"
  for b in etcd etcdctl etcdutl; do
    place "$dest/$b" "$installed/$b"
    ln -sfn "$installed/$b" "$BIN/$b-$minor"
  done
}

if [ $# -eq 0 ]; then
  set -- $(cd "$HERE" && ls -d etcd-* | sed 's/^etcd-//')
fi
for minor in "$@"; do build_minor "$minor"; done
