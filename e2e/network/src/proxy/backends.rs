//! Which endpoints a connection may go to, as kube-proxy chooses them for a Service port with
//! the Cluster traffic policy: the ready endpoints; when none is ready, the ones still serving
//! while terminating (KEP-1669, so connections drain during a rollout); otherwise none, and the
//! connection is rejected.

use std::net::SocketAddrV4;

use crate::model::SliceView;

/// The candidate backends for the Service port named `port_name`, sorted so the round robin
/// walks them in a stable order. kube-proxy uses the first address of each endpoint.
pub fn backends(slices: &[SliceView], port_name: &str) -> Vec<SocketAddrV4> {
    let mut ready = Vec::new();
    let mut terminating = Vec::new();
    for slice in slices {
        let Some(port) = slice
            .ports
            .iter()
            .find(|p| p.name == port_name && p.protocol == "TCP")
            .and_then(|p| u16::try_from(p.port).ok())
            .filter(|p| *p != 0)
        else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let Some(ip) = endpoint.addresses.first() else {
                continue;
            };
            let addr = SocketAddrV4::new(*ip, port);
            if endpoint.ready {
                ready.push(addr);
            } else if endpoint.serving && endpoint.terminating {
                terminating.push(addr);
            }
        }
    }
    let mut chosen = if ready.is_empty() { terminating } else { ready };
    chosen.sort();
    chosen.dedup();
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EndpointView, PortView};
    use std::net::Ipv4Addr;

    fn endpoint(last: u8, ready: bool, serving: bool, terminating: bool) -> EndpointView {
        EndpointView {
            addresses: vec![Ipv4Addr::new(10, 0, 0, last)],
            ready,
            serving,
            terminating,
            hostname: None,
        }
    }

    fn slice(ports: &[(&str, i32, &str)], endpoints: Vec<EndpointView>) -> SliceView {
        SliceView {
            ports: ports
                .iter()
                .map(|(name, port, protocol)| PortView {
                    name: (*name).into(),
                    port: *port,
                    protocol: (*protocol).into(),
                })
                .collect(),
            endpoints,
        }
    }

    fn addr(last: u8, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), port)
    }

    #[test]
    fn backend_table() {
        let cases: Vec<(&str, Vec<SliceView>, &str, Vec<SocketAddrV4>)> = vec![
            (
                "ready only, sorted across slices",
                vec![
                    slice(
                        &[("http", 8080, "TCP")],
                        vec![
                            endpoint(3, true, true, false),
                            endpoint(2, false, false, false),
                        ],
                    ),
                    slice(
                        &[("http", 8080, "TCP")],
                        vec![endpoint(1, true, true, false)],
                    ),
                ],
                "http",
                vec![addr(1, 8080), addr(3, 8080)],
            ),
            (
                "port matched by name",
                vec![slice(
                    &[("client", 2379, "TCP"), ("peer", 2380, "TCP")],
                    vec![endpoint(1, true, true, false)],
                )],
                "peer",
                vec![addr(1, 2380)],
            ),
            (
                "unnamed port",
                vec![slice(
                    &[("", 80, "TCP")],
                    vec![endpoint(1, true, true, false)],
                )],
                "",
                vec![addr(1, 80)],
            ),
            (
                "no matching port name",
                vec![slice(
                    &[("other", 80, "TCP")],
                    vec![endpoint(1, true, true, false)],
                )],
                "http",
                vec![],
            ),
            (
                "UDP port is not a TCP backend",
                vec![slice(
                    &[("dns", 53, "UDP")],
                    vec![endpoint(1, true, true, false)],
                )],
                "dns",
                vec![],
            ),
            (
                "slice without ports",
                vec![slice(&[("", -1, "")], vec![endpoint(1, true, true, false)])],
                "",
                vec![],
            ),
            (
                "terminating-but-serving used only when nothing is ready",
                vec![slice(
                    &[("", 80, "TCP")],
                    vec![
                        endpoint(1, false, true, true),
                        endpoint(2, false, false, true),
                    ],
                )],
                "",
                vec![addr(1, 80)],
            ),
            (
                "ready wins over terminating",
                vec![slice(
                    &[("", 80, "TCP")],
                    vec![
                        endpoint(1, false, true, true),
                        endpoint(2, true, true, false),
                    ],
                )],
                "",
                vec![addr(2, 80)],
            ),
            (
                "not ready and not terminating: rejected",
                vec![slice(
                    &[("", 80, "TCP")],
                    vec![endpoint(1, false, false, false)],
                )],
                "",
                vec![],
            ),
        ];
        for (what, slices, port_name, want) in cases {
            assert_eq!(backends(&slices, port_name), want, "{what}");
        }
    }
}
