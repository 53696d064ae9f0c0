//! The cluster as DNS and the proxy see it: plain data converted from the API objects, so the
//! decisions (which records, which backends) are pure functions over these types.
//!
//! Only IPv4 is modelled: localkube's cluster is single-stack IPv4, so IPv6 and FQDN addresses
//! are skipped the way kube-proxy skips slices of the other family.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties an EndpointSlice to its Service (`discovery.LabelServiceName`).
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// How a Service is addressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceAddress {
    /// A virtual IP (usually one; empty while the API server has not allocated it yet).
    ClusterIps(Vec<Ipv4Addr>),
    /// `clusterIP: None`: DNS names the endpoints themselves.
    Headless,
    /// `type: ExternalName`: a DNS alias, no proxying.
    ExternalName(String),
}

/// A Service port or an EndpointSlice port. `port` is -1 when a slice port has none, as
/// CoreDNS's sentinel for "no declared port" (such entries give A records but no SRV).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortView {
    pub name: String,
    pub port: i32,
    pub protocol: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceView {
    pub namespace: String,
    pub name: String,
    pub address: ServiceAddress,
    pub ports: Vec<PortView>,
    pub publish_not_ready_addresses: bool,
}

/// One endpoint of a slice with its conditions already given their API defaults: a missing
/// `ready` or `serving` means "unknown, treat as ready" (the EndpointConditions doc, followed by
/// both CoreDNS and kube-proxy); a missing `terminating` means false.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointView {
    pub addresses: Vec<Ipv4Addr>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    pub hostname: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceView {
    pub ports: Vec<PortView>,
    pub endpoints: Vec<EndpointView>,
}

/// What the DNS answers and the proxy need to look up, implemented over the reflector stores in
/// production and over fixtures in unit tests.
pub trait ClusterView {
    fn namespace_exists(&self, namespace: &str) -> bool;
    fn service(&self, namespace: &str, name: &str) -> Option<ServiceView>;
    /// Every IPv4 EndpointSlice labelled for this Service.
    fn slices(&self, namespace: &str, service: &str) -> Vec<SliceView>;
    /// Whether a pod of this namespace has this IP (CoreDNS `pods verified`).
    fn pod_has_ip(&self, namespace: &str, ip: Ipv4Addr) -> bool;
}

fn protocol_or_tcp(protocol: Option<&String>) -> String {
    protocol.cloned().unwrap_or_else(|| "TCP".to_owned())
}

impl ServiceView {
    /// `None` for an object without name or namespace (never stored by a real API server).
    pub fn from_service(service: &Service) -> Option<ServiceView> {
        let namespace = service.metadata.namespace.clone()?;
        let name = service.metadata.name.clone()?;
        let spec = service.spec.as_ref();
        let address = match spec {
            Some(spec) if spec.type_.as_deref() == Some("ExternalName") => {
                ServiceAddress::ExternalName(spec.external_name.clone().unwrap_or_default())
            }
            Some(spec) => {
                let ips: Vec<&String> = match (&spec.cluster_ips, &spec.cluster_ip) {
                    (Some(ips), _) if !ips.is_empty() => ips.iter().collect(),
                    (_, Some(ip)) => vec![ip],
                    _ => Vec::new(),
                };
                if ips.first().is_some_and(|ip| ip.as_str() == "None") {
                    ServiceAddress::Headless
                } else {
                    ServiceAddress::ClusterIps(
                        ips.iter().filter_map(|ip| ip.parse().ok()).collect(),
                    )
                }
            }
            None => ServiceAddress::ClusterIps(Vec::new()),
        };
        let ports = spec
            .and_then(|s| s.ports.as_ref())
            .map(|ports| {
                ports
                    .iter()
                    .map(|p| PortView {
                        name: p.name.clone().unwrap_or_default(),
                        port: p.port,
                        protocol: protocol_or_tcp(p.protocol.as_ref()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(ServiceView {
            namespace,
            name,
            address,
            ports,
            publish_not_ready_addresses: spec
                .and_then(|s| s.publish_not_ready_addresses)
                .unwrap_or(false),
        })
    }

    pub fn is_headless(&self) -> bool {
        self.address == ServiceAddress::Headless
    }
}

/// The Service a slice belongs to, or `None` for slices without the label.
pub fn slice_service_name(slice: &EndpointSlice) -> Option<&str> {
    slice
        .metadata
        .labels
        .as_ref()?
        .get(SERVICE_NAME_LABEL)
        .map(String::as_str)
}

impl SliceView {
    /// `None` for slices that are not IPv4 (IPv6 and FQDN slices are ignored).
    pub fn from_slice(slice: &EndpointSlice) -> Option<SliceView> {
        if slice.address_type != "IPv4" {
            return None;
        }
        let ports = match &slice.ports {
            Some(ports) if !ports.is_empty() => ports
                .iter()
                .map(|p| PortView {
                    name: p.name.clone().unwrap_or_default(),
                    port: p.port.unwrap_or(-1),
                    protocol: protocol_or_tcp(p.protocol.as_ref()),
                })
                .collect(),
            _ => vec![PortView {
                name: String::new(),
                port: -1,
                protocol: String::new(),
            }],
        };
        let endpoints = slice
            .endpoints
            .iter()
            .map(|e| {
                let conditions = e.conditions.as_ref();
                EndpointView {
                    addresses: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
                    ready: conditions.and_then(|c| c.ready).unwrap_or(true),
                    serving: conditions.and_then(|c| c.serving).unwrap_or(true),
                    terminating: conditions.and_then(|c| c.terminating).unwrap_or(false),
                    hostname: e.hostname.clone().filter(|h| !h.is_empty()),
                }
            })
            .collect();
        Some(SliceView { ports, endpoints })
    }
}

/// The IPv4 addresses of a pod (`status.podIPs`, else `status.podIP`).
pub fn pod_ips(pod: &Pod) -> Vec<Ipv4Addr> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    match (&status.pod_ips, &status.pod_ip) {
        (Some(ips), _) if !ips.is_empty() => {
            ips.iter().filter_map(|ip| ip.ip.parse().ok()).collect()
        }
        (_, Some(ip)) => ip.parse().ok().into_iter().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "etcd", "namespace": "default"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn service_addresses() {
        let cases = [
            (
                json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]}),
                ServiceAddress::ClusterIps(vec![Ipv4Addr::new(10, 96, 0, 10)]),
            ),
            (
                json!({"clusterIP": "10.96.0.11"}),
                ServiceAddress::ClusterIps(vec![Ipv4Addr::new(10, 96, 0, 11)]),
            ),
            (
                json!({"clusterIP": "None", "clusterIPs": ["None"]}),
                ServiceAddress::Headless,
            ),
            (json!({"clusterIP": "None"}), ServiceAddress::Headless),
            (json!({}), ServiceAddress::ClusterIps(vec![])),
            (
                json!({"clusterIPs": ["fd00::1"]}),
                ServiceAddress::ClusterIps(vec![]),
            ),
            (
                json!({"type": "ExternalName", "externalName": "example.com"}),
                ServiceAddress::ExternalName("example.com".into()),
            ),
        ];
        for (spec, want) in cases {
            let view = ServiceView::from_service(&service(spec.clone())).unwrap();
            assert_eq!(view.address, want, "{spec}");
        }
    }

    #[test]
    fn service_ports_default_to_tcp_and_empty_name() {
        let view = ServiceView::from_service(&service(json!({
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "ports": [{"port": 2379}, {"name": "peer", "port": 2380, "protocol": "UDP"}],
        })))
        .unwrap();
        assert!(view.publish_not_ready_addresses);
        assert_eq!(
            view.ports,
            vec![
                PortView {
                    name: "".into(),
                    port: 2379,
                    protocol: "TCP".into()
                },
                PortView {
                    name: "peer".into(),
                    port: 2380,
                    protocol: "UDP".into()
                },
            ]
        );
    }

    #[test]
    fn slice_conditions_take_api_defaults() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "etcd-abc", "namespace": "default",
                "labels": {"kubernetes.io/service-name": "etcd"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"]},
                {"addresses": ["10.0.0.2"], "hostname": "etcd-1",
                    "conditions": {"ready": false, "serving": true, "terminating": true}},
                {"addresses": ["not-an-ip"], "hostname": ""},
            ],
        }))
        .unwrap();
        assert_eq!(slice_service_name(&slice), Some("etcd"));
        let view = SliceView::from_slice(&slice).unwrap();
        assert_eq!(
            view.ports,
            vec![PortView {
                name: "".into(),
                port: -1,
                protocol: "".into()
            }]
        );
        assert_eq!(
            view.endpoints,
            vec![
                EndpointView {
                    addresses: vec![Ipv4Addr::new(10, 0, 0, 1)],
                    ready: true,
                    serving: true,
                    terminating: false,
                    hostname: None
                },
                EndpointView {
                    addresses: vec![Ipv4Addr::new(10, 0, 0, 2)],
                    ready: false,
                    serving: true,
                    terminating: true,
                    hostname: Some("etcd-1".into())
                },
                EndpointView {
                    addresses: vec![],
                    ready: true,
                    serving: true,
                    terminating: false,
                    hostname: None
                },
            ]
        );
    }

    #[test]
    fn non_ipv4_slices_are_ignored() {
        for address_type in ["IPv6", "FQDN"] {
            let slice: EndpointSlice = serde_json::from_value(json!({
                "metadata": {"name": "x"}, "addressType": address_type, "endpoints": [],
            }))
            .unwrap();
            assert_eq!(SliceView::from_slice(&slice), None);
        }
    }

    #[test]
    fn pod_ips_prefer_the_list() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}]},
        }))
        .unwrap();
        assert_eq!(pod_ips(&pod), vec![Ipv4Addr::new(10, 0, 0, 9)]);
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": "p"}, "status": {"podIP": "10.0.0.8"}}),
        )
        .unwrap();
        assert_eq!(pod_ips(&pod), vec![Ipv4Addr::new(10, 0, 0, 8)]);
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert!(pod_ips(&pod).is_empty());
    }
}
