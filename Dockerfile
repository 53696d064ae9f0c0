# One image for the three operators; each chart Deployment runs its own binary
# (/usr/local/bin/etcd-{cluster,backup,restore}-operator). It also carries the etcdutl of each
# supported etcd minor (etcdutl-3.5, etcdutl-3.6, etcdutl-3.7; `etcdutl` is the default 3.6's):
# the restore's seed Pod runs `etcd-restore-operator prepare-seed` from this image, which
# restores the snapshot with the etcdutl of the cluster's minor (3.5's restores for etcd 3.4,
# which has none; see operators/restore/tests/seed.rs).
#
#   docker build -t ghcr.io/etcd-operator-rs/etcd-operator:0.1.0 .
#   docker push ghcr.io/etcd-operator-rs/etcd-operator:0.1.0
#
# There is no Docker engine on the project's machines: `make image` builds the same image without
# one (image/build.sh), and `make image-test` checks that it matches this file (files, user,
# entrypoint, labels, the etcdutl versions, the Debian release). Change both together.
ARG ETCD35_IMAGE=gcr.io/etcd-development/etcd:v3.5.35
ARG ETCD36_IMAGE=gcr.io/etcd-development/etcd:v3.6.16
ARG ETCD37_IMAGE=gcr.io/etcd-development/etcd:v3.7.3

FROM rust:1-bookworm AS build
# etcd-client's build script compiles etcd's protos.
RUN apt-get update \
 && apt-get install -y --no-install-recommends protobuf-compiler \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
      -p etcd-cluster-operator -p etcd-backup-operator -p etcd-restore-operator

FROM ${ETCD35_IMAGE} AS etcd35
FROM ${ETCD36_IMAGE} AS etcd36
FROM ${ETCD37_IMAGE} AS etcd37

# glibc (the binaries link it), CA certificates (S3 over TLS), no shell, non-root by default.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/etcd-cluster-operator \
                  /src/target/release/etcd-backup-operator \
                  /src/target/release/etcd-restore-operator /usr/local/bin/
COPY --from=etcd35 /usr/local/bin/etcdutl /usr/local/bin/etcdutl-3.5
COPY --from=etcd36 /usr/local/bin/etcdutl /usr/local/bin/etcdutl-3.6
COPY --from=etcd37 /usr/local/bin/etcdutl /usr/local/bin/etcdutl-3.7
COPY --from=etcd36 /usr/local/bin/etcdutl /usr/local/bin/etcdutl
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title=etcd-operator \
      org.opencontainers.image.description="Operators for etcd on Kubernetes: clusters, backups to S3, restores" \
      org.opencontainers.image.source=https://github.com/etcd-operator-rs/etcd-operator \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION} \
      org.opencontainers.image.created=${CREATED}
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/etcd-cluster-operator"]
