#!/usr/bin/env bash
# Builds the etcd images the tests can run as containers (`make image`), the same way as the
# operators' image, from the etcd binaries `make deps` installed: what gcr.io/etcd-development/etcd
# ships (etcd, etcdctl, etcdutl in /usr/local/bin, /var/etcd and /var/lib/etcd, CMD etcd, root
# user, distroless's /etc/passwd with nonroot 65532, CA bundle) under the same name and tag, so a Pod's `image:` finds it without a registry.
#
#   image/build-etcd.sh MINOR...          (3.4 3.5 3.6 3.7; default all four)
#
# Writes target/image/etcd-<minor>/ (OCI layout) and .tar; 3.4 is Debian's etcd-server 3.4.23
# (dynamically linked: its glibc comes along, found with ldd; 3.4 has no etcdutl).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
TOOLS_BIN=${ETCD_OPERATOR_TOOLS:-$REPO/.tools/bin}
OUT_DIR=${IMAGE_OUT_DIR:-$REPO/target/image}
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct)}
[ $# -gt 0 ] || set -- 3.4 3.5 3.6 3.7

for minor in "$@"; do
  etcd=$TOOLS_BIN/etcd-$minor
  [ -x "$etcd" ] || { echo "image/build-etcd.sh: $etcd missing: run make deps" >&2; exit 1; }
  version=$("$etcd" --version | sed -n 's/^etcd Version: //p')
  files=(--file "/usr/local/bin/etcd=$etcd" --file "/usr/local/bin/etcdctl=$TOOLS_BIN/etcdctl-$minor")
  [ ! -x "$TOOLS_BIN/etcdutl-$minor" ] || files+=(--file "/usr/local/bin/etcdutl=$TOOLS_BIN/etcdutl-$minor")
  mkdir -p "$OUT_DIR"
  printf 'etcd-%s %s ' "$minor" "$version"
  python3 "$REPO/image/ociimage.py" build --out "$OUT_DIR/etcd-$minor" \
    --ref "gcr.io/etcd-development/etcd:v$version" --epoch "$EPOCH" "${files[@]}" \
    --dir /var/etcd --dir /var/lib/etcd --with-libs --ca-certificates --nonroot-user --workdir /var/lib/etcd --cmd /usr/local/bin/etcd \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.title=etcd" \
    --label "org.opencontainers.image.description=etcd $version, built from the Go module proxy (3.4: Debian's)" \
    ${IMAGE_GZIP_LEVEL:+--gzip-level "$IMAGE_GZIP_LEVEL"}
done
