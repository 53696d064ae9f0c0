#!/usr/bin/env bash
# Builds the operators' image without Docker (`make image`): the three operator binaries, the
# etcdutl of each etcd minor the Dockerfile copies (3.5, 3.6, 3.7; `etcdutl` is 3.6's), the
# shared libraries they load and Debian's CA bundle, user 65532, as the Dockerfile's image.
#
#   image/build.sh [release|debug]        (default release; debug is what `make image-test` packs)
#
# Writes $IMAGE_OUT (default target/image/etcd-operator, an OCI layout) and $IMAGE_OUT.tar, and
# prints the manifest digest. The operator binaries must be built (make image builds them), the
# etcdutl binaries installed (make deps: $ETCD_OPERATOR_TOOLS, default .tools/bin).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${1:-release}
TOOLS_BIN=${ETCD_OPERATOR_TOOLS:-$REPO/.tools/bin}
OUT=${IMAGE_OUT:-$REPO/target/image/etcd-operator}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/Cargo.toml" | head -1)
REF=${IMAGE_REF:-ghcr.io/etcd-operator-rs/etcd-operator:$VERSION}
# Reproducible per commit: every timestamp is the commit's (SOURCE_DATE_EPOCH wins when set).
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct)}
REVISION=$(git -C "$REPO" rev-parse HEAD)
CREATED=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)

files=()
for op in cluster backup restore; do
  files+=(--file "/usr/local/bin/etcd-$op-operator=$REPO/target/$PROFILE/etcd-$op-operator")
done
for minor in 3.5 3.6 3.7; do
  bin=$TOOLS_BIN/etcdutl-$minor
  [ -x "$bin" ] || { echo "image/build.sh: $bin missing: run make deps" >&2; exit 1; }
  files+=(--file "/usr/local/bin/etcdutl-$minor=$bin")
done

mkdir -p "$(dirname "$OUT")"
# The labels are the Dockerfile's LABELs (image/test_image.py checks they match).
exec python3 "$REPO/image/ociimage.py" build --out "$OUT" --ref "$REF" --epoch "$EPOCH" \
  "${files[@]}" --hardlink /usr/local/bin/etcdutl=/usr/local/bin/etcdutl-3.6 \
  --with-libs --ca-certificates --nonroot-user --user 65532:65532 \
  --entrypoint /usr/local/bin/etcd-cluster-operator \
  --label org.opencontainers.image.title=etcd-operator \
  --label "org.opencontainers.image.description=Operators for etcd on Kubernetes: clusters, backups to S3, restores" \
  --label org.opencontainers.image.source=https://github.com/etcd-operator-rs/etcd-operator \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.revision=$REVISION" \
  --label "org.opencontainers.image.created=$CREATED" \
  ${IMAGE_GZIP_LEVEL:+--gzip-level "$IMAGE_GZIP_LEVEL"}
