//! Cluster DNS for `cluster.local` and the userspace ClusterIP proxy of localkube.
//!
//! Both learn the cluster the way CoreDNS's `kubernetes` plugin and kube-proxy do: from
//! watches of Services and `discovery.k8s.io/v1` EndpointSlices (plus Pods and Namespaces for
//! DNS), kept in kube-runtime reflector stores and read at query or connection time, so a
//! change is visible without any restart.
//!
//! - [`run_dns`]: an authoritative server for the cluster domain (hickory-server), answering
//!   A/SRV/SOA/NS with CoreDNS's record shapes, NXDOMAIN/NODATA and readiness rules, and
//!   forwarding other names to the host's nameserver (or refusing them).
//! - [`run_proxy`]: a TCP listener on every `clusterIP:port`, forwarding each connection to a
//!   ready endpoint in round robin, like kube-proxy's old userspace mode.
//!
//! Not implemented (the cluster does not need them yet): reverse (PTR) zones, which go to the
//! upstream like any other outside name; IPv6 (AAAA is always NODATA); UDP Services and
//! `sessionAffinity: ClientIP` in the proxy; NodePorts and external IPs.

mod cluster;
mod dns;
mod error;
mod model;
mod proxy;

pub use dns::{DnsOptions, run_dns};
pub use error::Error;
pub use proxy::{ServiceAddresses, run_proxy};
