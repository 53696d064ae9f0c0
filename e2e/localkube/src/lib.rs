//! localkube: the local Kubernetes of the end-to-end tests and the demo (design.md §5). `localkube
//! up` runs etcd and the upstream kube-apiserver, kube-controller-manager and kube-scheduler
//! (built by `make deps`), and joins them, as the one node, our node agent (e2e/node), cluster DNS
//! and Service proxy (e2e/network). Deviations from Kubernetes are listed in e2e/README.md.

pub mod components;
pub mod etcd;
pub mod images;
pub mod pki;
pub mod realnode;
pub mod run;
pub mod services;
pub mod shim;
pub mod up;
pub mod upstream;
