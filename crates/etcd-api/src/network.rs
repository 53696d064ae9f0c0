//! `spec.networkPolicy` of an EtcdCluster: the NetworkPolicy the cluster operator keeps per
//! cluster (named `<cluster>`, owned by the EtcdCluster), admitting to the members' Pods
//! - the peer port (2380) only from the cluster's own member Pods;
//! - the client port (2379) from Pods in the cluster's namespace labelled
//!   [`CLIENT_OF_LABEL`]`: <cluster>`, from every Pod in the operators' namespace (the cluster,
//!   backup and restore operators, the scheduled backup Jobs), from the member Pods themselves,
//!   and from the peers in `clients`;
//! - the metrics port (2381, also the readiness probe's with client TLS) from anywhere, or only
//!   from `metrics` and the operators' namespace when given (the cluster operator reads a
//!   joining member's raft progress there).
//!
//! Whether a cluster gets one when `enabled` is unset is the cluster operator's default
//! (`--network-policy`, the chart's `clusterOperator.networkPolicy`: `tls` by default, which
//! means clusters with TLS on).

use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The label that admits a Pod of the cluster's namespace to the client port of cluster
/// `<value>` under the operator's NetworkPolicy.
pub const CLIENT_OF_LABEL: &str = "etcd.operator.rs/client-of";

/// The NetworkPolicy of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Keep a NetworkPolicy (named after the cluster) in front of the members. Unset: the
    /// cluster operator's default (the chart's `clusterOperator.networkPolicy`, by default on
    /// for clusters with `spec.tls`). Turning it off deletes the operator's NetworkPolicy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,

    /// More sources admitted to the client port (2379), as NetworkPolicy `from` peers (Pods in
    /// other namespaces, IP blocks). Always admitted: Pods in the cluster's namespace labelled
    /// `etcd.operator.rs/client-of: <cluster>`, the operators' namespace and the members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<NetworkPolicyPeer>,

    /// Sources admitted to the metrics port (2381), besides every Pod of the operators'
    /// namespace (the cluster operator reads a joining member's raft progress there). Empty:
    /// any source (Prometheus wherever it runs, and the kubelet's readiness probe, which uses
    /// this port with client TLS).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<NetworkPolicyPeer>,
}

/// When a cluster without `spec.networkPolicy.enabled` gets a NetworkPolicy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetworkPolicyDefault {
    /// Clusters with `spec.tls` (peer or client side).
    #[default]
    Tls,
    /// Every cluster.
    Always,
    /// None.
    Never,
}

impl std::str::FromStr for NetworkPolicyDefault {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "tls" => Ok(Self::Tls),
            "always" => Ok(Self::Always),
            "never" => Ok(Self::Never),
            other => Err(format!("{other:?}: expected tls, always or never")),
        }
    }
}

impl crate::EtcdCluster {
    /// Whether the operator keeps a NetworkPolicy for this cluster.
    pub fn wants_network_policy(&self, default: NetworkPolicyDefault) -> bool {
        match self.spec.network_policy.as_ref().and_then(|n| n.enabled) {
            Some(enabled) => enabled,
            None => match default {
                NetworkPolicyDefault::Tls => self.spec.tls.is_some(),
                NetworkPolicyDefault::Always => true,
                NetworkPolicyDefault::Never => false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EtcdCluster, EtcdClusterSpec, TlsSpec};

    fn cluster(tls: bool, enabled: Option<bool>) -> EtcdCluster {
        let mut spec: EtcdClusterSpec = serde_json::from_value(serde_json::json!({"size": 3}))
            .unwrap_or_else(|e| panic!("{e}"));
        spec.tls = tls.then(TlsSpec::default);
        spec.network_policy = enabled.map(|enabled| NetworkPolicySpec {
            enabled: Some(enabled),
            ..NetworkPolicySpec::default()
        });
        EtcdCluster::new("main", spec)
    }

    #[test]
    fn the_spec_wins_else_the_operators_default() {
        use NetworkPolicyDefault::*;
        for (tls, enabled, default, wanted) in [
            (true, None, Tls, true),
            (false, None, Tls, false),
            (false, None, Always, true),
            (true, None, Never, false),
            (true, Some(false), Tls, false),
            (false, Some(true), Never, true),
        ] {
            assert_eq!(
                cluster(tls, enabled).wants_network_policy(default),
                wanted,
                "tls {tls}, enabled {enabled:?}, default {default:?}"
            );
        }
        assert_eq!("tls".parse(), Ok(Tls));
        assert!("sometimes".parse::<NetworkPolicyDefault>().is_err());
    }
}
