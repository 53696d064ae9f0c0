//! localkube: a small, faithful Kubernetes control plane on a real etcd for the end-to-end
//! tests and the demo (design.md §5, ../shared/docs/local-control-plane.md). This crate holds
//! the API server; the pure algorithms it relies on (patches, schemas, server-side apply,
//! selectors and RBAC, protobuf bodies) live in `e2e/machinery/*`. Deviations from Kubernetes
//! are listed in e2e/README.md.

pub mod admission;
pub mod api;
pub mod authn;
pub mod authz;
pub mod bootstrap;
pub mod builtin_types;
pub mod components;
pub mod crd;
pub mod defaults;
pub mod etcd;
pub mod events;
pub mod fieldmanager;
pub mod images;
pub mod logs;
pub mod patching;
pub mod pki;
pub mod pods;
pub mod run;
pub mod scale;
pub mod server;
pub mod services;
pub mod shim;
pub mod store;
pub mod strategy;
pub mod table;
pub mod up;
pub mod upstream;
