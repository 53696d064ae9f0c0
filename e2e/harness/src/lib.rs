//! The harness of the tests that need Kubernetes (the crates under `e2e/`), on top of
//! `crates/test-support` (etcd, S3, kubectl + helm, ports, processes), which is all the tests of
//! `crates/` and `operators/` use. No crate outside `e2e/` depends on this one.
//!
//! - [`localkube`]: [`LocalKube`], the local control plane (`e2e/localkube`: etcd, the upstream
//!   kube-apiserver, controller-manager and scheduler, our node agent) started for one test on its
//!   own address block, with kubectl and helm against it; [`localkube_binary`] finds the binary.
//! - [`rbac_usage`]: least privilege from the API server's audit log; every [`LocalKube`] keeps
//!   its audit events when it stops, and the `rbac-usage` binary (the last step of `make test`)
//!   compares what each operator used with what the chart grants.
//! - [`history`]: a client history of a key-value store (operations with invocation and response
//!   times, outcome ok, failed or unknown), its [`history::Recorder`], and the
//!   lost-acknowledged-write check. [`linearizability`]: a Porcupine-style checker of such a
//!   history against a register per key (pure). [`kv_workload`]: concurrent etcd clients that
//!   record one and check it at the end (the e2e scenarios' clients).

pub mod history;
pub mod kv_workload;
pub mod linearizability;
pub mod localkube;
pub mod rbac_usage;

pub use localkube::{LocalKube, localkube_binary};
