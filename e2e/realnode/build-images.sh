#!/usr/bin/env bash
# The images the e2e scenarios' Pods run on the real node (`make node-images`; e2e/README.md
# "Real node"), packed the same reproducible way as the others (image/ociimage.py, no pulls) from
# binaries already on the machine, into target/image/:
#   etcd-operator.tar   the operators' image with the workspace's debug binaries (image/build.sh debug)
#   etcd-3.4..3.7.tar   gcr.io/etcd-development/etcd:v<version> of each installed minor (image/build-etcd.sh)
#   seaweedfs.tar       localkube.io/seaweedfs:tools: the tools' static `weed` at /usr/local/bin/weed,
#                       nonroot user (the scenarios' S3 Pod; the tag says "make deps' weed", its
#                       version is the image's org.opencontainers.image.version label)
# Each is rebuilt only when an input is newer than its tarball (the operators rebuild often, weed
# and etcd never), so a second run takes a second. The scenarios' harness imports them all
# (e2e/harness/src/localkube.rs) when LOCALKUBE_NODE=kubelet.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS_BIN=${ETCD_OPERATOR_TOOLS:-$REPO/.tools/bin}
OUT_DIR=${IMAGE_OUT_DIR:-$REPO/target/image}
export ETCD_OPERATOR_TOOLS=$TOOLS_BIN IMAGE_OUT_DIR=$OUT_DIR
mkdir -p "$OUT_DIR"

# True when $1 is missing or older than any of the other paths (symlinks followed).
stale() {
  local out=$1; shift
  [ -f "$out" ] || return 0
  local input
  for input in "$@"; do
    [ "$(readlink -f "$input")" -nt "$out" ] && return 0
  done
  return 1
}

timed() {
  local what=$1 start; shift
  start=$(date +%s.%N)
  "$@" >/dev/null
  awk -v w="$what" -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "node-images: %-14s %6.1f s\n", w, e - s }'
}

operators=()
for op in cluster backup restore; do
  bin=$REPO/target/debug/etcd-$op-operator
  [ -x "$bin" ] || { echo "node-images: $bin missing: cargo build --workspace --bins" >&2; exit 1; }
  operators+=("$bin")
done
if stale "$OUT_DIR/etcd-operator.tar" "${operators[@]}" "$REPO/image/build.sh" "$REPO/image/ociimage.py"; then
  IMAGE_OUT=$OUT_DIR/etcd-operator timed etcd-operator "$REPO/image/build.sh" debug
fi

for minor in 3.4 3.5 3.6 3.7; do
  [ -x "$TOOLS_BIN/etcd-$minor" ] || { echo "node-images: $TOOLS_BIN/etcd-$minor missing: run make deps" >&2; exit 1; }
  if stale "$OUT_DIR/etcd-$minor.tar" "$TOOLS_BIN/etcd-$minor" "$REPO/image/build-etcd.sh"; then
    timed "etcd-$minor" "$REPO/image/build-etcd.sh" "$minor"
  fi
done

weed=$(readlink -f "$TOOLS_BIN/weed")
[ -x "$weed" ] || { echo "node-images: $TOOLS_BIN/weed missing: run make deps" >&2; exit 1; }
if stale "$OUT_DIR/seaweedfs.tar" "$weed" "$REPO/image/ociimage.py" "$0"; then
  # `version 8000GB 4.48 pypi linux amd64` → 4.48. Gzip level 1: 146 MiB of Go binary, a test
  # image (level 6 takes about a minute here, level 1 a third of it).
  version=$("$weed" version 2>/dev/null | awk 'NR == 1 {print $3}')
  timed seaweedfs python3 "$REPO/image/ociimage.py" build --out "$OUT_DIR/seaweedfs" \
    --ref localkube.io/seaweedfs:tools --epoch 0 --file "/usr/local/bin/weed=$weed" \
    --nonroot-user --entrypoint /usr/local/bin/weed --gzip-level 1 \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.title=seaweedfs"
fi
ls -1 "$OUT_DIR"/*.tar | sed 's/^/node-images: /'
