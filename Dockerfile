# One image for the three operators; each chart Deployment runs its own binary
# (/usr/local/bin/etcd-{cluster,backup,restore}-operator). It also carries etcd 3.5's etcdutl:
# the restore's seed Pod runs `etcd-restore-operator prepare-seed` from this image, which
# restores the snapshot with etcdutl (3.5's etcdutl restores 3.4 snapshots for etcd 3.4 too;
# see operators/restore/tests/seed.rs).
#
#   docker build -t ghcr.io/etcd-operator-rs/etcd-operator:0.1.0 .
#   docker push ghcr.io/etcd-operator-rs/etcd-operator:0.1.0
#
# There is no Docker engine on the project's machines; the local control plane maps this image
# name to the workspace's own build instead (e2e/README.md, "Images map to binaries").
ARG ETCD_IMAGE=gcr.io/etcd-development/etcd:v3.5.1

FROM rust:1-bookworm AS build
# etcd-client's build script compiles etcd's protos.
RUN apt-get update \
 && apt-get install -y --no-install-recommends protobuf-compiler \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
      -p etcd-cluster-operator -p etcd-backup-operator -p etcd-restore-operator

FROM ${ETCD_IMAGE} AS etcd

# glibc (the binaries link it), CA certificates (S3 over TLS), no shell, non-root by default.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/etcd-cluster-operator \
                  /src/target/release/etcd-backup-operator \
                  /src/target/release/etcd-restore-operator /usr/local/bin/
COPY --from=etcd /usr/local/bin/etcdutl /usr/local/bin/etcdutl
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/etcd-cluster-operator"]
