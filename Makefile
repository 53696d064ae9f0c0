# The verbs of the etcd operator workspace. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

TOOLS ?= $(CURDIR)/.tools
CHART := charts/etcd-operator
export ETCD_OPERATOR_TOOLS := $(TOOLS)/bin
export CARGO_TERM_COLOR ?= never
# The make verbs build the workspace once from scratch (CI's fresh clone) or after many changes:
# incremental compilation saves nothing there and its cache is GiBs on disk (CI once ran out of
# space building the tests). `cargo` run by hand keeps it.
export CARGO_INCREMENTAL ?= 0

# $(call timed,PHASE,COMMAND): run COMMAND, then print the phase's wall time.
define timed
	@start=$$(date +%s.%N); $(2); \
	awk -v s="$$start" -v e="$$(date +%s.%N)" 'BEGIN { printf "[make] %-10s %7.1f s\n", "$(1)", e - s }'
endef

.PHONY: help
help: ## List the verbs
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{ printf "  make %-11s %s\n", $$1, $$2 }'

.PHONY: deps
deps: ## Install etcd 3.4 (Debian) and 3.5/3.6/3.7 (built from the Go module proxy), SeaweedFS, aws CLI, kubectl+helm pairs, protoc into .tools/
	$(call timed,deps,TOOLS=$(TOOLS) e2e/install-tools.sh)

.PHONY: node-deps
node-deps: ## The real node (issue 23, opt-in, not in deps): runc, containerd, kubelet, kube-proxy, CoreDNS from the Go module proxy, the pause image, Debian's CNI plugins
	$(call timed,node-deps,TOOLS=$(TOOLS) e2e/upstream/build-node.sh)

.PHONY: build
build: ## Build every crate (debug)
	$(call timed,build,cargo build --workspace --all-targets)

.PHONY: fmt
fmt: ## Format the code
	cargo fmt --all

FMT_CHECK := cargo fmt --all -- --check
CLIPPY := cargo clippy --workspace --all-targets -- -D warnings
CHART_LINT := $(TOOLS)/bin/helm lint --strict $(CHART) >/dev/null

.PHONY: lint
lint: ## rustfmt check, clippy with warnings as errors, generated CRDs fresh, helm lint
	$(call timed,fmt,$(FMT_CHECK))
	$(call timed,clippy,$(CLIPPY))
	$(call timed,crds-check,cargo run -q -p etcd-api --bin crdgen -- check $(CHART))
	$(call timed,chart-lint,$(CHART_LINT))

.PHONY: doc
doc: ## The workspace's API docs, warnings (broken or private intra-doc links) as errors
	RUSTDOCFLAGS=-Dwarnings cargo doc -q --no-deps --workspace

.PHONY: crds
crds: ## Regenerate the chart's CRD templates and the API reference from the Rust types
	cargo run -q -p etcd-api --bin crdgen -- write $(CHART)
	cargo run -q -p etcd-api --bin crdgen -- reference > crates/etcd-api/API.md

.PHONY: chart-docs
chart-docs: ## Regenerate the chart's README from the comments in values.yaml
	cargo run -q -p etcd-api --bin crdgen -- chart-readme $(CHART) > $(CHART)/README.md

.PHONY: chart-lint
chart-lint: ## helm lint and helm template the chart with both helm majors
	$(TOOLS)/bin/helm-4.3 lint --strict $(CHART)
	$(TOOLS)/bin/helm-3.17 lint --strict $(CHART)
	$(TOOLS)/bin/helm-4.3 template etcd-operator $(CHART) >/dev/null

# Tests run under cargo-nextest (each test in its own process, in parallel); the harness in
# crates/test-support gives every test its own loopback addresses and ports.
#
# One cargo invocation builds every binary and every test binary. The end-to-end scenarios run
# the operators' binaries through localkube's image map, so every binary is needed, but a
# separate `cargo build --bins` resolves features without the dev-dependencies (etcd-api's tests
# turn on kube's `cel`), so kube and every workspace crate were compiled twice (once per feature
# set: ~150 s of CI's fresh-clone test build). Built together they are compiled once, and nextest
# then finds everything fresh. `make test` runs crdgen and rbac-usage from this build too:
# `cargo run -p <package>` alone would build that package's own feature set again.
#
# The same build is also the lint: clippy-driver is rustc plus clippy's lints, and as the
# workspace's compiler (RUSTC_WORKSPACE_WRAPPER; dependencies still go to plain rustc) it
# compiles the workspace AND denies every rustc and clippy warning (CLIPPY_ARGS is how
# `cargo clippy` passes `-D warnings` to it). A separate `cargo clippy` compiled every crate a
# second time (~210 s of CI's fresh-clone run). Every cargo command of the test verbs carries the
# same two variables: cargo records the compiler in each crate's fingerprint, so a command
# without them would rebuild the workspace with plain rustc. `--all-targets` covers what
# `cargo clippy --all-targets` covered (the benches too). `make lint` keeps `cargo clippy`.
LINTED := RUSTC_WORKSPACE_WRAPPER="$$(command -v clippy-driver || echo 'clippy-driver-is-missing:install-clippy')" \
	CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
BUILD_TESTS := $(LINTED) cargo build --workspace --all-targets
NEXTEST := $(LINTED) cargo nextest run --workspace --no-fail-fast
DOCTESTS := $(LINTED) cargo test --workspace --doc

# The tiers, as nextest filtersets. Every test is in exactly one: unit tests are the crates'
# own (src/) tests, no process started; e2e are the scenarios (operators in Pods on localkube)
# and localkube's own tests (the whole local control plane); integration is everything else
# (tests/ of each crate against real etcd, SeaweedFS, kube-apiserver, Prometheus).
UNIT_TESTS := kind(lib) | kind(bin) | kind(proc-macro)
E2E_TESTS := kind(test) and (package(e2e-scenarios) | package(localkube))
INTEGRATION_TESTS := not ($(UNIT_TESTS)) and not ($(E2E_TESTS))

# The build cache. A fresh clone (CI's) has no target/: it becomes a link to a cache kept
# outside the clone, as Go's build cache is, so a warm machine compiles only the workspace's own
# crates (their artifacts are named by the clone's path; the dependencies' are not) and not the
# ~600 dependencies again. A target/ that exists (a developer's tree) is left as it is;
# CARGO_BUILD_CACHE=none keeps the build inside the clone. Builds in the cache are serialized
# by cargo's lock; two clones must not run their tests at once (their binaries have the same
# names). Past CARGO_BUILD_CACHE_MAX_GIB the cache is emptied first (cargo never prunes it).
CARGO_BUILD_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-operator/cargo-target
CARGO_BUILD_CACHE_MAX_GIB ?= 40

.PHONY: build-cache
build-cache:
	@if [ ! -e target ] && [ ! -L target ] && [ "$(CARGO_BUILD_CACHE)" != none ]; then \
	  mkdir -p "$(CARGO_BUILD_CACHE)"; \
	  mib=$$(du -sm "$(CARGO_BUILD_CACHE)" | cut -f1); \
	  if [ "$$mib" -gt "$$(( $(CARGO_BUILD_CACHE_MAX_GIB) * 1024 ))" ]; then \
	    echo "[make] the build cache $(CARGO_BUILD_CACHE) has $$mib MiB: emptied"; \
	    rm -rf "$(CARGO_BUILD_CACHE)" && mkdir -p "$(CARGO_BUILD_CACHE)" && mib=0; \
	  fi; \
	  ln -s "$(CARGO_BUILD_CACHE)" target; \
	  echo "[make] target -> $(CARGO_BUILD_CACHE) ($$mib MiB cached)"; \
	fi

.PHONY: test-build
test-build: build-cache ## Build and lint every binary and test binary (one cargo invocation: one feature set)
	$(call timed,test-build,$(BUILD_TESTS))

.PHONY: unit
unit: test-build ## Unit tests (no process started) and doc tests
	$(call timed,unit,$(NEXTEST) -E '$(UNIT_TESTS)')
	$(call timed,doctests,$(DOCTESTS))

.PHONY: integration
integration: deps test-build ## Integration tests: each crate against real etcd, S3, kube-apiserver
	$(call timed,integration,$(NEXTEST) -E '$(INTEGRATION_TESTS)')

.PHONY: e2e
e2e: deps test-build ## End-to-end: the chart and operators on localkube, then rbac-usage on their audit log
	rm -rf target/audit   # the e2e runs' audit events, read by rbac-usage below
	$(call timed,e2e,$(NEXTEST) -E '$(E2E_TESTS)')
	$(call timed,rbac-usage,target/debug/rbac-usage $(CHART) examples/scheduled-backup.yaml)

# Quarantined from `make test` (run them with `make quarantined`; each has an issue to fix it):
# a nextest filterset, e.g. `test(name_a) | test(name_b)`; `none()` when nothing is quarantined.
# None today: the certificate-renewal scenario quarantined for issue 19 (120-second certificates
# whose 40 s margin a loaded machine did not keep) now makes certificates due by writing ones
# near their end, with the operator's real lifetimes (tls.rs, due_certificates_are_renewed).
QUARANTINED := none()

.PHONY: quarantined
quarantined: deps test-build ## The quarantined tests (timing defects under load being fixed; see the Makefile)
	$(call timed,quarantined,$(NEXTEST) --no-tests=warn -E '$(QUARANTINED)')

# `make test` runs the three tiers as ONE nextest run (no filter: the union of the tiers), so
# the short tests fill the cores while the long scenarios wait; run one after another, the
# e2e tier alone would leave a core idle in its tail.
.PHONY: test
test: deps build-cache ## Install what tests need, build and lint once, and run every test (all three tiers)
	$(call timed,fmt,$(FMT_CHECK))
	$(call timed,test-build,$(BUILD_TESTS))
	$(call timed,crds-check,target/debug/crdgen check $(CHART))
	$(call timed,chart-lint,$(CHART_LINT))
	rm -rf target/audit   # the e2e runs' audit events, read by rbac-usage below
	$(call timed,tests,$(NEXTEST) -E 'not ($(QUARANTINED))')
	$(call timed,doctests,$(DOCTESTS))
	$(call timed,rbac-usage,target/debug/rbac-usage $(CHART) examples/scheduled-backup.yaml)

# The operators' image without Docker (image/build.sh, image/ociimage.py): an OCI layout in
# target/image/etcd-operator/ and the same as target/image/etcd-operator.tar (`ctr images import`,
# `skopeo copy oci-archive:`, `docker load`). Reproducible: the same commit and binaries give the
# same digest. Release binaries: a cold release build took 82 min wall (31 min CPU) on the shared
# 2-core machine at load 11-22 (make image, 2026-11-26); the packing 12 s, the image 54 MiB. The etcd
# images (image/build-etcd.sh) are packed the same way from make deps' etcd binaries.
OPERATOR_PACKAGES := -p etcd-cluster-operator -p etcd-backup-operator -p etcd-restore-operator

.PHONY: image
image: ## Build the operators' OCI image (release) and the etcd images into target/image/ without Docker; needs make deps
	$(call timed,image-build,cargo build --release --locked $(OPERATOR_PACKAGES))
	$(call timed,image,image/build.sh release)
	$(call timed,etcd-images,image/build-etcd.sh)

# `make test` runs the same script as a test (e2e/scenarios/tests/image.rs, in the third slot
# beside the scenarios): packing and unpacking ~350 MiB of debug binaries twice, and the four
# etcd images, ~50 s here on an idle machine (28 s user + 14 s sys).
.PHONY: image-test
image-test: ## As root: build the image (debug binaries) twice, compare, run each binary inside it as 65532, check it against the Dockerfile; the etcd images
	$(call timed,image-build,$(LINTED) cargo build $(OPERATOR_PACKAGES))
	$(call timed,image-test,IMAGE_PROFILE=debug python3 image/test_image.py)

# Every failpoint of the three operators that a spec change, a backup or a restore reaches,
# before and after its side effect: crash there, restart without it, check the outcome and the
# clients' history (e2e/scenarios/tests/chaos.rs). `make test` runs a subset.
.PHONY: chaos
chaos: deps build-cache ## Crash each operator at its failpoints, restart it, check the outcome and the clients' history; one table
	$(call timed,test-build,$(BUILD_TESTS))   # the chart's operators run these binaries
	$(call timed,chaos,CHAOS_FULL=1 $(NEXTEST) -E 'package(e2e-scenarios) & binary(chaos)' --no-capture)

# Each bench prints its own tables and appends its headline figures to BENCH_RESULTS (JSON
# lines, crates/test-support/src/bench.rs); bench-report then prints them all as one table. The
# path is made absolute (also when given on the command line) because cargo runs each bench in
# its package's directory.
BENCH_RESULTS ?= target/bench/results.jsonl

.PHONY: bench
bench: override export BENCH_RESULTS := $(abspath $(BENCH_RESULTS))
# The benches that run localkube run the chart's operators from the binaries next to it: release
# builds, as the image ships them (debug ones measured the debug build's SDK and proxy, not ours).
bench: export LOCALKUBE_BIN := $(CURDIR)/target/release/localkube
bench: deps build-cache ## Benchmarks: figures and ratios against baselines measured in the same run, one table at the end
	mkdir -p "$(dir $(BENCH_RESULTS))" && : > "$(BENCH_RESULTS)"
	cargo build -q --release --workspace --bins   # localkube and the operators the benches run
	$(call timed,bench-cluster,cargo bench --workspace --bench cluster)
	$(call timed,bench-restore,cargo bench --workspace --bench restore)
	$(call timed,bench-backup,cargo bench --workspace --bench backup)
	$(call timed,bench-scale,cargo bench --workspace --bench scale)
	$(call timed,bench-repair,cargo bench --workspace --bench repair)
	cargo run -q -p test-support --bin bench-report -- "$(BENCH_RESULTS)"

.PHONY: localkube
localkube: deps build-cache ## Run the local control plane in the foreground (state in .localkube/, Ctrl-C stops it)
	cargo build -q --workspace --bins   # the operator image maps to these binaries
	target/debug/localkube up --state-dir .localkube --etcd-binary $(TOOLS)/bin/etcd-3.5 --tools-dir $(TOOLS)/bin

.PHONY: node-e2e
node-e2e: build-cache ## As root, after node-deps: localkube on the upstream kubelet+containerd+kube-proxy+CoreDNS; the tutorial etcd Pods, the chart's real image, an EtcdCluster of 3 (not in make test)
	cargo build -q -p localkube $(OPERATOR_PACKAGES)   # localkube; the operators the image packs
	$(call timed,node-e2e,TOOLS=$(TOOLS) e2e/realnode/node-e2e.sh)

# The images the scenarios' Pods run on the real node (e2e/realnode/build-images.sh): the operators'
# (debug binaries), etcd 3.4-3.7, SeaweedFS; each rebuilt only when its inputs changed. Then, as root:
#   LOCALKUBE_NODE=kubelet LOCALKUBE_NODE_BIN_DIR=$(TOOLS)/bin cargo nextest run -p e2e-scenarios --test NAME
.PHONY: node-images
node-images: build-cache ## After node-deps: the images the e2e scenarios run on the real node, into target/image (not in make test)
	cargo build -q --workspace --bins   # the operators the image packs
	$(call timed,node-images,e2e/realnode/build-images.sh)

.PHONY: demo
demo: deps build-cache ## The whole story end to end (KEEP=1 leaves it running); needs root
	cargo build -q --workspace --bins   # localkube, and the operators the chart's image maps to
	$(call timed,demo,e2e/demo.sh)
