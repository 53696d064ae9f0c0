//! Which listeners and addresses the proxy should hold, from the Services alone (endpoints are
//! read when a connection arrives, so endpoint changes never restart a listener).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};

use crate::model::{ServiceAddress, ServiceView};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
}

/// What a listener on `clusterIP:port` forwards to: the endpoints of this Service port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSpec {
    pub service: ServiceRef,
    /// The Service port's name, matched against the EndpointSlice port names.
    pub port_name: String,
}

pub type Listeners = BTreeMap<SocketAddrV4, ListenerSpec>;

/// One listener per TCP port of every Service with a ClusterIP (headless and ExternalName
/// Services have none; UDP and SCTP ports are not proxied). Two Services claiming the same
/// `ip:port` cannot both be served: the first in namespace/name order wins.
pub fn desired(services: &[ServiceView]) -> Listeners {
    let mut sorted: Vec<&ServiceView> = services.iter().collect();
    sorted.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut listeners = Listeners::new();
    for service in sorted {
        let ServiceAddress::ClusterIps(ips) = &service.address else {
            continue;
        };
        for ip in ips {
            for port in &service.ports {
                let Ok(number) = u16::try_from(port.port) else {
                    continue;
                };
                if port.protocol != "TCP" || number == 0 {
                    continue;
                }
                let spec = ListenerSpec {
                    service: ServiceRef {
                        namespace: service.namespace.clone(),
                        name: service.name.clone(),
                    },
                    port_name: port.name.clone(),
                };
                let addr = SocketAddrV4::new(*ip, number);
                if let Some(winner) = listeners.get(&addr) {
                    tracing::warn!(%addr, winner = ?winner.service, loser = ?spec.service,
                        "two Services claim one ClusterIP port; proxying the first");
                    continue;
                }
                listeners.insert(addr, spec);
            }
        }
    }
    listeners
}

/// The steps from what runs to what should, in the order the I/O layer applies them: stop
/// listeners, add addresses, start listeners, remove addresses no listener uses any more.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub stop: Vec<SocketAddrV4>,
    pub add_addresses: Vec<Ipv4Addr>,
    pub start: Vec<(SocketAddrV4, ListenerSpec)>,
    pub remove_addresses: Vec<Ipv4Addr>,
}

/// A listener whose spec changed (the port was renamed) is stopped and started again.
pub fn diff(running: &Listeners, held: &BTreeSet<Ipv4Addr>, desired: &Listeners) -> Changes {
    let wanted_ips: BTreeSet<Ipv4Addr> = desired.keys().map(|addr| *addr.ip()).collect();
    Changes {
        stop: running
            .iter()
            .filter(|(addr, spec)| desired.get(addr) != Some(spec))
            .map(|(addr, _)| *addr)
            .collect(),
        add_addresses: wanted_ips.difference(held).copied().collect(),
        start: desired
            .iter()
            .filter(|(addr, spec)| running.get(addr) != Some(spec))
            .map(|(addr, spec)| (*addr, spec.clone()))
            .collect(),
        remove_addresses: held.difference(&wanted_ips).copied().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PortView;

    fn port(name: &str, port: i32, protocol: &str) -> PortView {
        PortView {
            name: name.into(),
            port,
            protocol: protocol.into(),
        }
    }

    fn service(name: &str, address: ServiceAddress, ports: Vec<PortView>) -> ServiceView {
        ServiceView {
            namespace: "default".into(),
            name: name.into(),
            address,
            ports,
            publish_not_ready_addresses: false,
        }
    }

    fn spec(name: &str, port_name: &str) -> ListenerSpec {
        ListenerSpec {
            service: ServiceRef {
                namespace: "default".into(),
                name: name.into(),
            },
            port_name: port_name.into(),
        }
    }

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 96, 0, last)
    }

    #[test]
    fn desired_listeners_cover_tcp_ports_of_cluster_ip_services() {
        let services = [
            service(
                "api",
                ServiceAddress::ClusterIps(vec![ip(1)]),
                vec![port("https", 443, "TCP"), port("dns", 53, "UDP")],
            ),
            service(
                "etcd",
                ServiceAddress::ClusterIps(vec![ip(2)]),
                vec![port("client", 2379, "TCP"), port("peer", 2380, "TCP")],
            ),
            service(
                "headless",
                ServiceAddress::Headless,
                vec![port("", 80, "TCP")],
            ),
            service(
                "alias",
                ServiceAddress::ExternalName("example.com".into()),
                vec![port("", 80, "TCP")],
            ),
            service(
                "pending",
                ServiceAddress::ClusterIps(vec![]),
                vec![port("", 80, "TCP")],
            ),
        ];
        let want: Listeners = [
            (SocketAddrV4::new(ip(1), 443), spec("api", "https")),
            (SocketAddrV4::new(ip(2), 2379), spec("etcd", "client")),
            (SocketAddrV4::new(ip(2), 2380), spec("etcd", "peer")),
        ]
        .into_iter()
        .collect();
        assert_eq!(desired(&services), want);
    }

    #[test]
    fn the_first_service_keeps_a_contested_port() {
        let services = [
            service(
                "b",
                ServiceAddress::ClusterIps(vec![ip(5)]),
                vec![port("", 80, "TCP")],
            ),
            service(
                "a",
                ServiceAddress::ClusterIps(vec![ip(5)]),
                vec![port("", 80, "TCP")],
            ),
        ];
        let got = desired(&services);
        assert_eq!(got.len(), 1);
        assert_eq!(got[&SocketAddrV4::new(ip(5), 80)], spec("a", ""));
    }

    #[test]
    fn diff_table() {
        let a80 = SocketAddrV4::new(ip(1), 80);
        let a81 = SocketAddrV4::new(ip(1), 81);
        let b80 = SocketAddrV4::new(ip(2), 80);
        let l = |entries: &[(SocketAddrV4, ListenerSpec)]| {
            entries.iter().cloned().collect::<Listeners>()
        };
        let s = |ips: &[Ipv4Addr]| ips.iter().copied().collect::<BTreeSet<_>>();
        let cases = [
            // From nothing: add the address, then start.
            (
                l(&[]),
                s(&[]),
                l(&[(a80, spec("x", ""))]),
                Changes {
                    add_addresses: vec![ip(1)],
                    start: vec![(a80, spec("x", ""))],
                    ..Changes::default()
                },
            ),
            // Steady state: nothing to do.
            (
                l(&[(a80, spec("x", ""))]),
                s(&[ip(1)]),
                l(&[(a80, spec("x", ""))]),
                Changes::default(),
            ),
            // A second port on a held address: no address change.
            (
                l(&[(a80, spec("x", ""))]),
                s(&[ip(1)]),
                l(&[(a80, spec("x", "")), (a81, spec("x", "b"))]),
                Changes {
                    start: vec![(a81, spec("x", "b"))],
                    ..Changes::default()
                },
            ),
            // Renamed port: restart.
            (
                l(&[(a80, spec("x", ""))]),
                s(&[ip(1)]),
                l(&[(a80, spec("x", "web"))]),
                Changes {
                    stop: vec![a80],
                    start: vec![(a80, spec("x", "web"))],
                    ..Changes::default()
                },
            ),
            // Service deleted: stop and release the address.
            (
                l(&[(a80, spec("x", "")), (b80, spec("y", ""))]),
                s(&[ip(1), ip(2)]),
                l(&[(b80, spec("y", ""))]),
                Changes {
                    stop: vec![a80],
                    remove_addresses: vec![ip(1)],
                    ..Changes::default()
                },
            ),
            // An address whose add failed earlier is retried.
            (
                l(&[]),
                s(&[]),
                l(&[(b80, spec("y", ""))]),
                Changes {
                    add_addresses: vec![ip(2)],
                    start: vec![(b80, spec("y", ""))],
                    ..Changes::default()
                },
            ),
        ];
        for (i, (running, held, want_listeners, want)) in cases.into_iter().enumerate() {
            assert_eq!(diff(&running, &held, &want_listeners), want, "case {i}");
        }
    }
}
