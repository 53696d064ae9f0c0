//! What the localkube node agent derives from a Pod spec, as pure functions: env, command, volume
//! files, resolv.conf and hosts, image map, back-off, probes and pod status.
//!
//! Nothing here does I/O or reads a clock: the node agent observes the world (API objects,
//! processes, probe results, `now`) and passes it in; these functions say what the real kubelet
//! would derive from it, with the kubelet's own reasons and messages, because `kubectl describe`
//! users and tests compare them byte for byte.

pub mod backoff;
pub mod command;
pub mod dns;
pub mod env;
pub mod fieldref;
pub mod image_map;
pub mod probes;
pub mod quantity;
pub mod security;
pub mod status;
pub mod volumes;

use std::collections::BTreeMap;

/// Objects of the pod's namespace that env and volumes read. `None` means "not found" (the
/// kubelet's `IsNotFound`): the caller retries transient API failures itself, before asking.
pub trait Lookups {
    /// A Secret's `data` (already base64-decoded).
    fn secret(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>>;
    /// A ConfigMap's `data` and `binaryData`.
    fn config_map(&self, name: &str) -> Option<ConfigMapData>;
}

/// The two payload maps of a ConfigMap: env reads only `data`, volumes project both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigMapData {
    pub data: BTreeMap<String, String>,
    pub binary_data: BTreeMap<String, Vec<u8>>,
}

/// Node and runtime facts the downward API exposes, gathered by the caller once per pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodContext {
    /// The sandbox's IPs, primary first (`status.podIP`, `status.podIPs`).
    pub pod_ips: Vec<String>,
    /// The node's IPs, primary first (`status.hostIP`, `status.hostIPs`).
    pub host_ips: Vec<String>,
    /// The node's allocatable `cpu` and `memory`: the kubelet reports them for
    /// `resourceFieldRef` limits a container does not set.
    pub node_allocatable: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}
