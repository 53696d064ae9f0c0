//! The NetworkPolicy of a cluster (`spec.networkPolicy`, see `etcd_api::network`): built here,
//! pure; the executor applies it (server-side apply) or deletes it when the cluster no longer
//! wants one.
//!
//! Ingress to the member Pods (selected by the cluster's labels, as the Services select them):
//! - peer port: from the member Pods only;
//! - client port: from the member Pods (etcdctl in a member, a member's own gateway), Pods of
//!   the cluster's namespace labelled `etcd.operator.rs/client-of: <cluster>`, every Pod of the
//!   operators' namespace (the operators and the scheduled backup Jobs), and `spec.clients`;
//! - metrics port: from anywhere, or from `spec.metrics` and every Pod of the operators'
//!   namespace (the cluster operator reads a joining member's raft progress there).
//!
//! Only ingress: the members' egress (to each other, to DNS) is left alone, so a policy of the
//! namespace's own that denies egress still applies.

use std::collections::BTreeMap;

use etcd_api::EtcdCluster;
use etcd_api::network::CLIENT_OF_LABEL;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::build::{self, BuildError};
use crate::naming::{
    CLIENT_PORT, METRICS_PORT, PEER_PORT, SWITCH_CLIENT_TLS_PORT, SWITCH_PEER_TLS_PORT,
};

/// The label every namespace carries with its own name (Kubernetes sets it).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Name of the cluster's NetworkPolicy: the cluster's own.
pub fn name(cluster: &EtcdCluster) -> String {
    cluster.metadata.name.clone().unwrap_or_default()
}

fn port(number: u16) -> Option<Vec<NetworkPolicyPort>> {
    ports(&[number])
}

fn ports(numbers: &[u16]) -> Option<Vec<NetworkPolicyPort>> {
    Some(
        numbers
            .iter()
            .map(|number| NetworkPolicyPort {
                port: Some(IntOrString::Int(i32::from(*number))),
                protocol: Some("TCP".to_owned()),
                ..NetworkPolicyPort::default()
            })
            .collect(),
    )
}

/// The peer ports: 2380, and with peer TLS also 2382, where members of a cluster switched from
/// plaintext serve `https://` peers (during the switch and after it; plan/tls_switch.rs).
fn peer_ports(cluster: &EtcdCluster) -> Vec<u16> {
    let mut numbers = vec![PEER_PORT];
    if cluster.peer_tls() {
        numbers.push(SWITCH_PEER_TLS_PORT);
    }
    numbers
}

/// The client ports: 2379, and 2378 when `switch_port`: some member serves `https://` clients
/// there (a cluster switched from plaintext, during the switch and after it while the port is
/// kept; [`crate::plan::serves_switch_client_port`], as the client Service publishes it). A
/// cluster created with TLS never listens on 2378, so its policy does not admit it.
fn client_ports(switch_port: bool) -> Vec<u16> {
    let mut numbers = vec![CLIENT_PORT];
    if switch_port {
        numbers.push(SWITCH_CLIENT_TLS_PORT);
    }
    numbers
}

fn pods(labels: BTreeMap<String, String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(labels),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// The NetworkPolicy of `cluster`, whose operators run in `operator_namespace`; `switch_port`:
/// admit 2378 too (`client_ports`).
pub fn network_policy(
    cluster: &EtcdCluster,
    operator_namespace: &str,
    switch_port: bool,
) -> Result<NetworkPolicy, BuildError> {
    let members = build::cluster_labels(cluster);
    let spec = cluster.spec.network_policy.clone().unwrap_or_default();
    let operators = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_owned(),
                operator_namespace.to_owned(),
            )])),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    };
    let mut clients = vec![
        pods(members.clone()),
        pods(BTreeMap::from([(
            CLIENT_OF_LABEL.to_owned(),
            name(cluster),
        )])),
        operators.clone(),
    ];
    clients.extend(spec.clients);
    let metrics = NetworkPolicyIngressRule {
        // No `from`: any source.
        from: (!spec.metrics.is_empty()).then(|| {
            let mut from = spec.metrics;
            from.push(operators);
            from
        }),
        ports: port(METRICS_PORT),
    };
    Ok(NetworkPolicy {
        metadata: build::owned_meta(cluster, &name(cluster))?,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(members.clone()),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    from: Some(vec![pods(members)]),
                    ports: ports(&peer_ports(cluster)),
                },
                NetworkPolicyIngressRule {
                    from: Some(clients),
                    ports: ports(&client_ports(switch_port)),
                },
                metrics,
            ]),
            egress: None,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_api::EtcdClusterSpec;
    use etcd_api::network::NetworkPolicySpec as Spec;
    use serde_json::json;

    fn cluster(network_policy: Option<Spec>) -> EtcdCluster {
        let mut spec: EtcdClusterSpec =
            serde_json::from_value(json!({"size": 3, "tls": {"peer": {}}})).unwrap();
        spec.network_policy = network_policy;
        let mut cluster = EtcdCluster::new("main", spec);
        cluster.metadata.namespace = Some("db".into());
        cluster.metadata.uid = Some("uid-1".into());
        cluster
    }

    fn members() -> serde_json::Value {
        json!({"podSelector": {"matchLabels": {
            "app.kubernetes.io/instance": "main",
            "app.kubernetes.io/managed-by": "etcd-cluster-operator",
            "app.kubernetes.io/name": "etcd",
            "etcd.operator.rs/cluster": "main",
        }}})
    }

    #[test]
    fn peers_only_from_members_clients_from_labelled_pods_and_the_operators() {
        let policy = network_policy(&cluster(None), "etcd-operator", false).unwrap();
        let value = serde_json::to_value(&policy).unwrap();
        assert_eq!(value["metadata"]["name"], "main");
        assert_eq!(value["metadata"]["namespace"], "db");
        let owner = &value["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["name"], &owner["controller"]),
            (&json!("EtcdCluster"), &json!("main"), &json!(true))
        );
        assert_eq!(value["spec"]["podSelector"], members()["podSelector"]);
        assert_eq!(value["spec"]["policyTypes"], json!(["Ingress"]));
        assert_eq!(
            value["spec"]["ingress"],
            json!([
                // Peer TLS: 2382 too, where a cluster switched from plaintext serves peers.
                {"from": [members()], "ports": [
                    {"port": 2380, "protocol": "TCP"},
                    {"port": 2382, "protocol": "TCP"},
                ]},
                {"from": [
                    members(),
                    {"podSelector": {"matchLabels": {"etcd.operator.rs/client-of": "main"}}},
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "etcd-operator"}}},
                ], "ports": [{"port": 2379, "protocol": "TCP"}]},
                {"ports": [{"port": 2381, "protocol": "TCP"}]},
            ])
        );
        assert!(value["spec"].get("egress").is_none());
    }

    #[test]
    fn extra_clients_and_a_metrics_source_from_the_spec() {
        let prometheus: NetworkPolicyPeer = serde_json::from_value(json!({
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
        }))
        .unwrap();
        let apps: NetworkPolicyPeer = serde_json::from_value(json!({
            "namespaceSelector": {"matchLabels": {"team": "apps"}},
            "podSelector": {"matchLabels": {"etcd": "main"}}
        }))
        .unwrap();
        let policy = network_policy(
            &cluster(Some(Spec {
                enabled: Some(true),
                clients: vec![apps.clone()],
                metrics: vec![prometheus.clone()],
            })),
            "ops",
            false,
        )
        .unwrap();
        let ingress = policy.spec.unwrap().ingress.unwrap();
        let clients = ingress[1].from.clone().unwrap();
        assert_eq!(clients.len(), 4);
        assert_eq!(clients[3], apps);
        // The operators' namespace too: the cluster operator reads joining members' metrics.
        assert_eq!(ingress[2].from, Some(vec![prometheus, clients[2].clone()]));
    }

    /// 2378 is admitted exactly where a member serves it (a cluster switched from plaintext),
    /// as the client Service publishes it: a cluster created with client TLS never listens
    /// there, so its policy must not open it.
    #[test]
    fn the_switch_client_port_only_where_members_serve_it() {
        let mut spec: EtcdClusterSpec =
            serde_json::from_value(json!({"size": 3, "tls": {"client": {}}})).unwrap();
        spec.network_policy = None;
        let mut client_tls = EtcdCluster::new("main", spec);
        client_tls.metadata.namespace = Some("db".into());
        client_tls.metadata.uid = Some("uid-1".into());
        let client_ports = |switch_port: bool| -> Vec<i32> {
            let policy = network_policy(&client_tls, "ops", switch_port).unwrap();
            policy.spec.unwrap().ingress.unwrap()[1]
                .ports
                .clone()
                .unwrap()
                .into_iter()
                .filter_map(|p| match p.port {
                    Some(IntOrString::Int(port)) => Some(port),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(client_ports(false), [2379], "created with client TLS");
        assert_eq!(client_ports(true), [2379, 2378], "switched, 2378 served");
    }

    #[test]
    fn needs_the_clusters_identity() {
        let mut no_uid = cluster(None);
        no_uid.metadata.uid = None;
        assert!(network_policy(&no_uid, "ops", false).is_err());
    }
}
