//! What a Service's EndpointSlices and Endpoints should contain, given its pods: the decisions
//! of kube-controller-manager's endpointslice and endpoint controllers as pure functions.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort as CorePort, EndpointSubset, ObjectReference, Pod, Service,
    ServicePort,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::pods;

/// `kubernetes.io/service-name`
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `endpointslice.kubernetes.io/managed-by`
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The managed-by value of slices this controller owns (and the only ones it touches).
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// Set (empty) on slices and Endpoints of headless Services, as upstream does.
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// Upstream's `maxEndpointsPerSlice` default.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// The content of one EndpointSlice: the endpoints that share one resolved port list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SliceContent {
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Endpoint>,
}

/// The Service's label selector, or `None` when it has none (then its endpoints are managed by
/// someone else: the API server for `kubernetes`, a user for hand-written Endpoints). An empty
/// map is no selector, as in Go where it is omitted on the wire.
pub fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .filter(|s| !s.is_empty())
}

pub fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

fn publish_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

fn service_ports(svc: &Service) -> &[ServicePort] {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or(&[])
}

fn matches(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.metadata.labels.as_ref();
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// `podutil.ShouldPodBeInEndpoints`: the pod has an IP, is not terminal, and (unless terminating
/// pods are included) is not being deleted.
fn should_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    pods::ip(pod).is_some()
        && !pods::is_terminal(pod)
        && (include_terminating || !pods::is_deleting(pod))
}

/// The pods the Service selects, in a stable order (by name).
fn selected<'a>(svc: &Service, pods: &'a [Pod]) -> Vec<&'a Pod> {
    let Some(sel) = selector(svc) else {
        return Vec::new();
    };
    let ns = svc.metadata.namespace.as_deref();
    let mut out: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == ns && matches(sel, p))
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

fn protocol(p: Option<&String>) -> &str {
    p.map_or("TCP", String::as_str)
}

/// `podutil.FindPort`: a numeric targetPort as is (unset means the Service port, the API
/// default); a named one looked up in the pod's container ports (and sidecar init containers)
/// with the same protocol. `None` when the pod has no such port: the port is skipped for it.
pub fn find_port(pod: &Pod, sp: &ServicePort) -> Option<i32> {
    match &sp.target_port {
        None => Some(sp.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && protocol(p.protocol.as_ref()) == protocol(sp.protocol.as_ref())
                })
                .map(|p| p.container_port)
        }
    }
}

fn target_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// `endpointutil.ShouldSetHostname`: the pod names itself and sits in this Service's subdomain.
fn hostname(pod: &Pod, svc: &Service) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let host = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == svc.metadata.name.as_deref()
        && pod.metadata.namespace == svc.metadata.namespace)
        .then(|| host.to_string())
}

fn node_name(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

/// The slices' content: endpoints grouped by their resolved port list, at most
/// [`MAX_ENDPOINTS_PER_SLICE`] per slice. Terminating pods are kept with
/// `terminating: true`; `ready` is never true for them unless the Service publishes not-ready
/// addresses. A Service without matching pods gets one empty placeholder slice, as upstream.
pub fn slices(svc: &Service, pods: &[Pod]) -> Vec<SliceContent> {
    let publish = publish_not_ready(svc);
    let mut groups: BTreeMap<String, SliceContent> = BTreeMap::new();
    for pod in selected(svc, pods) {
        if !should_be_in_endpoints(pod, true) {
            continue;
        }
        let Some(ip) = pods::ip(pod) else { continue };
        let ports: Vec<EndpointPort> = service_ports(svc)
            .iter()
            .filter_map(|sp| {
                find_port(pod, sp).map(|port| EndpointPort {
                    name: Some(sp.name.clone().unwrap_or_default()),
                    port: Some(port),
                    protocol: Some(protocol(sp.protocol.as_ref()).to_string()),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        let serving = publish || pods::is_ready(pod);
        let terminating = pods::is_deleting(pod);
        let endpoint = Endpoint {
            addresses: vec![ip.to_string()],
            conditions: Some(EndpointConditions {
                ready: Some(publish || (serving && !terminating)),
                serving: Some(serving),
                terminating: Some(terminating),
            }),
            hostname: hostname(pod, svc),
            node_name: node_name(pod),
            target_ref: Some(target_ref(pod)),
            ..Default::default()
        };
        let key = port_key(&ports);
        groups
            .entry(key)
            .or_insert_with(|| SliceContent {
                ports,
                endpoints: Vec::new(),
            })
            .endpoints
            .push(endpoint);
    }
    let mut out = Vec::new();
    for group in groups.into_values() {
        for chunk in group.endpoints.chunks(MAX_ENDPOINTS_PER_SLICE) {
            out.push(SliceContent {
                ports: group.ports.clone(),
                endpoints: chunk.to_vec(),
            });
        }
    }
    if out.is_empty() {
        out.push(SliceContent::default());
    }
    out
}

fn port_key(ports: &[EndpointPort]) -> String {
    ports
        .iter()
        .map(|p| {
            format!(
                "{}/{}/{}",
                p.name.as_deref().unwrap_or(""),
                p.port.unwrap_or(0),
                p.protocol.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The core/v1 Endpoints subsets (endpoint controller): per pod, one address per resolvable
/// Service port, ready ones in `addresses`, the rest in `notReadyAddresses`; terminating pods
/// only with `publishNotReadyAddresses`. Subsets with the same ports merge (`RepackSubsets`).
/// A headless Service without ports lists its pods with no ports.
pub fn endpoints_subsets(svc: &Service, pods: &[Pod]) -> Vec<EndpointSubset> {
    let publish = publish_not_ready(svc);
    let svc_ports = service_ports(svc);
    // port list key -> (ports, ready, not ready)
    type Group = (Vec<CorePort>, Vec<EndpointAddress>, Vec<EndpointAddress>);
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for pod in selected(svc, pods) {
        if !should_be_in_endpoints(pod, publish) {
            continue;
        }
        let Some(ip) = pods::ip(pod) else { continue };
        let ports: Vec<CorePort> = svc_ports
            .iter()
            .filter_map(|sp| {
                find_port(pod, sp).map(|port| CorePort {
                    name: sp.name.clone().filter(|n| !n.is_empty()),
                    port,
                    protocol: Some(protocol(sp.protocol.as_ref()).to_string()),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        if ports.is_empty() && !(svc_ports.is_empty() && is_headless(svc)) {
            continue;
        }
        let address = EndpointAddress {
            ip: ip.to_string(),
            hostname: hostname(pod, svc),
            node_name: node_name(pod),
            target_ref: Some(target_ref(pod)),
        };
        let key = ports
            .iter()
            .map(|p| format!("{:?}/{}/{:?}", p.name, p.port, p.protocol))
            .collect::<Vec<_>>()
            .join(",");
        let group = groups
            .entry(key)
            .or_insert_with(|| (ports, Vec::new(), Vec::new()));
        if publish || pods::is_ready(pod) {
            group.1.push(address);
        } else {
            group.2.push(address);
        }
    }
    groups
        .into_values()
        .map(|(ports, mut ready, mut not_ready)| {
            ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            not_ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect()
}

/// The labels of a Service's slices: the Service's own, the headless marker, and the two
/// labels that tie a slice to its Service and to this controller.
pub fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = endpoints_labels(svc);
    labels.insert(
        LABEL_SERVICE_NAME.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    labels
}

/// The labels of a Service's Endpoints: the Service's own plus the headless marker.
pub fn endpoints_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.metadata.labels.clone().unwrap_or_default();
    labels.remove(LABEL_SERVICE_NAME);
    labels.remove(LABEL_MANAGED_BY);
    if is_headless(svc) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    } else {
        labels.remove(LABEL_HEADLESS);
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::fixtures::{deleting, pod};
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn svc(publish: bool, ports: Vec<ServicePort>) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                labels: Some([("team".to_string(), "a".to_string())].into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some([("app".to_string(), "web".to_string())].into()),
                ports: Some(ports),
                publish_not_ready_addresses: Some(publish),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn sport(name: &str, port: i32, target: IntOrString) -> ServicePort {
        ServicePort {
            name: Some(name.into()),
            port,
            protocol: Some("TCP".into()),
            target_port: Some(target),
            ..Default::default()
        }
    }

    fn with_named_port(mut p: Pod, name: &str, port: i32) -> Pod {
        p.spec = Some(PodSpec {
            node_name: Some("localkube".into()),
            containers: vec![Container {
                name: "c".into(),
                ports: Some(vec![ContainerPort {
                    name: Some(name.into()),
                    container_port: port,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        });
        p
    }

    fn conds(e: &Endpoint) -> (bool, bool, bool) {
        let c = e.conditions.clone().unwrap_or_default();
        (
            c.ready.unwrap_or(false),
            c.serving.unwrap_or(false),
            c.terminating.unwrap_or(false),
        )
    }

    #[test]
    fn endpoint_conditions_follow_readiness_termination_and_publish_not_ready() {
        let app = [("app", "web")];
        // (pod, publishNotReady) -> Some((ready, serving, terminating)) or None (not listed)
        type Conditions = Option<(bool, bool, bool)>;
        let cases: Vec<(Pod, bool, Conditions)> = vec![
            (
                pod("a", &app, Some("10.0.0.1"), true),
                false,
                Some((true, true, false)),
            ),
            (
                pod("a", &app, Some("10.0.0.1"), false),
                false,
                Some((false, false, false)),
            ),
            (
                pod("a", &app, Some("10.0.0.1"), false),
                true,
                Some((true, true, false)),
            ),
            (
                deleting(pod("a", &app, Some("10.0.0.1"), true)),
                false,
                Some((false, true, true)),
            ),
            (
                deleting(pod("a", &app, Some("10.0.0.1"), true)),
                true,
                Some((true, true, true)),
            ),
            (pod("a", &app, None, true), true, None),
            (
                pod("a", &[("app", "other")], Some("10.0.0.1"), true),
                false,
                None,
            ),
        ];
        for (i, (p, publish, want)) in cases.into_iter().enumerate() {
            let s = svc(publish, vec![sport("http", 80, IntOrString::Int(8080))]);
            let got = slices(&s, &[p]);
            assert_eq!(got.len(), 1, "case {i}");
            assert_eq!(got[0].endpoints.first().map(conds), want, "case {i}");
        }
    }

    #[test]
    fn terminal_pods_are_not_endpoints() {
        let mut p = pod("a", &[("app", "web")], Some("10.0.0.1"), true);
        if let Some(s) = p.status.as_mut() {
            s.phase = Some("Succeeded".into());
        }
        let s = svc(true, vec![sport("http", 80, IntOrString::Int(8080))]);
        assert!(slices(&s, &[p.clone()])[0].endpoints.is_empty());
        assert!(endpoints_subsets(&s, &[p]).is_empty());
    }

    #[test]
    fn endpoint_fields_and_hostname_only_in_own_subdomain() {
        let mut p = pod("web-0", &[("app", "web")], Some("10.0.0.7"), true);
        if let Some(spec) = p.spec.as_mut() {
            spec.hostname = Some("web-0".into());
            spec.subdomain = Some("web".into());
        }
        let s = svc(false, vec![sport("http", 80, IntOrString::Int(8080))]);
        let got = slices(&s, std::slice::from_ref(&p));
        let e = &got[0].endpoints[0];
        assert_eq!(e.addresses, vec!["10.0.0.7".to_string()]);
        assert_eq!(e.hostname.as_deref(), Some("web-0"));
        assert_eq!(e.node_name.as_deref(), Some("localkube"));
        let r = e.target_ref.clone().unwrap_or_default();
        assert_eq!(
            (
                r.kind.as_deref(),
                r.name.as_deref(),
                r.namespace.as_deref(),
                r.uid.as_deref()
            ),
            (Some("Pod"), Some("web-0"), Some("ns"), Some("uid-web-0"))
        );
        if let Some(spec) = p.spec.as_mut() {
            spec.subdomain = Some("other".into());
        }
        assert_eq!(slices(&s, &[p])[0].endpoints[0].hostname, None);
    }

    #[test]
    fn named_target_ports_resolve_per_pod_and_group_slices() {
        let a = with_named_port(
            pod("a", &[("app", "web")], Some("10.0.0.1"), true),
            "http",
            8080,
        );
        let b = with_named_port(
            pod("b", &[("app", "web")], Some("10.0.0.2"), true),
            "http",
            9090,
        );
        let c = with_named_port(
            pod("c", &[("app", "web")], Some("10.0.0.3"), true),
            "other",
            1,
        );
        let s = svc(
            false,
            vec![sport("web", 80, IntOrString::String("http".into()))],
        );
        let got = slices(&s, &[a, b, c]);
        let summary: Vec<(Vec<Option<i32>>, Vec<String>)> = got
            .iter()
            .map(|g| {
                (
                    g.ports.iter().map(|p| p.port).collect(),
                    g.endpoints.iter().map(|e| e.addresses[0].clone()).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (vec![], vec!["10.0.0.3".to_string()]),
                (vec![Some(8080)], vec!["10.0.0.1".to_string()]),
                (vec![Some(9090)], vec!["10.0.0.2".to_string()]),
            ]
        );
        assert_eq!(got[1].ports[0].name.as_deref(), Some("web"));
        assert_eq!(got[1].ports[0].protocol.as_deref(), Some("TCP"));
    }

    #[test]
    fn no_pods_gives_one_empty_placeholder_slice() {
        let s = svc(false, vec![sport("http", 80, IntOrString::Int(8080))]);
        assert_eq!(slices(&s, &[]), vec![SliceContent::default()]);
    }

    #[test]
    fn endpoints_split_ready_and_not_ready_addresses() {
        let app = [("app", "web")];
        let pods = vec![
            pod("b", &app, Some("10.0.0.2"), false),
            pod("a", &app, Some("10.0.0.1"), true),
            deleting(pod("c", &app, Some("10.0.0.3"), true)),
        ];
        let s = svc(false, vec![sport("", 80, IntOrString::Int(8080))]);
        let subsets = endpoints_subsets(&s, &pods);
        assert_eq!(subsets.len(), 1);
        let ips = |v: &Option<Vec<EndpointAddress>>| {
            v.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>()
        };
        assert_eq!(ips(&subsets[0].addresses), vec!["10.0.0.1"]);
        assert_eq!(ips(&subsets[0].not_ready_addresses), vec!["10.0.0.2"]);
        let port = &subsets[0]
            .ports
            .as_ref()
            .map(|p| p[0].clone())
            .unwrap_or_default();
        assert_eq!((port.name.clone(), port.port), (None, 8080));

        let published = endpoints_subsets(
            &svc(true, vec![sport("", 80, IntOrString::Int(8080))]),
            &pods,
        );
        assert_eq!(
            ips(&published[0].addresses),
            vec!["10.0.0.1", "10.0.0.2", "10.0.0.3"]
        );
        assert_eq!(published[0].not_ready_addresses, None);
    }

    #[test]
    fn services_without_selector_select_nothing() {
        let mut s = svc(false, vec![]);
        if let Some(spec) = s.spec.as_mut() {
            spec.selector = Some(BTreeMap::new());
        }
        assert_eq!(selector(&s), None);
        assert!(endpoints_subsets(&s, &[pod("a", &[], Some("10.0.0.1"), true)]).is_empty());
    }

    #[test]
    fn labels_carry_service_labels_and_headless_marker() {
        let mut s = svc(false, vec![]);
        if let Some(spec) = s.spec.as_mut() {
            spec.cluster_ip = Some("None".into());
        }
        let l = slice_labels(&s);
        assert_eq!(l.get("team").map(String::as_str), Some("a"));
        assert_eq!(l.get(LABEL_HEADLESS).map(String::as_str), Some(""));
        assert_eq!(l.get(LABEL_SERVICE_NAME).map(String::as_str), Some("web"));
        assert_eq!(
            l.get(LABEL_MANAGED_BY).map(String::as_str),
            Some(CONTROLLER_NAME)
        );
    }
}
