//! Table-driven answers over a fixture cluster, without a server.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use hickory_proto::rr::{Name, RecordType};

use super::answer::{Outcome, Snapshot, Zone, answer};
use crate::model::{ClusterView, EndpointView, PortView, ServiceAddress, ServiceView, SliceView};

#[derive(Default)]
struct Fixture {
    namespaces: Vec<&'static str>,
    services: Vec<ServiceView>,
    slices: HashMap<(String, String), Vec<SliceView>>,
    pods: Vec<(&'static str, Ipv4Addr)>,
}

impl ClusterView for Fixture {
    fn namespace_exists(&self, namespace: &str) -> bool {
        self.namespaces.contains(&namespace)
    }
    fn service(&self, namespace: &str, name: &str) -> Option<ServiceView> {
        self.services
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
            .cloned()
    }
    fn slices(&self, namespace: &str, service: &str) -> Vec<SliceView> {
        self.slices
            .get(&(namespace.to_owned(), service.to_owned()))
            .cloned()
            .unwrap_or_default()
    }
    fn pod_has_ip(&self, namespace: &str, ip: Ipv4Addr) -> bool {
        self.pods.contains(&(namespace, ip))
    }
}

fn ip(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

fn port(name: &str, port: i32) -> PortView {
    PortView {
        name: name.into(),
        port,
        protocol: "TCP".into(),
    }
}

fn endpoint(address: Ipv4Addr, ready: bool, hostname: Option<&str>) -> EndpointView {
    EndpointView {
        addresses: vec![address],
        ready,
        serving: ready,
        terminating: false,
        hostname: hostname.map(Into::into),
    }
}

fn service(
    name: &str,
    address: ServiceAddress,
    ports: Vec<PortView>,
    publish: bool,
) -> ServiceView {
    ServiceView {
        namespace: "default".into(),
        name: name.into(),
        address,
        ports,
        publish_not_ready_addresses: publish,
    }
}

fn fixture() -> Fixture {
    let mut f = Fixture {
        namespaces: vec!["default", "kube-system"],
        pods: vec![("default", ip(10, 0, 0, 1))],
        ..Fixture::default()
    };
    f.services = vec![
        service(
            "web",
            ServiceAddress::ClusterIps(vec![ip(10, 96, 0, 10)]),
            vec![port("http", 80)],
            false,
        ),
        service(
            "etcd",
            ServiceAddress::Headless,
            vec![port("client", 2379), port("peer", 2380)],
            false,
        ),
        service(
            "etcd-pub",
            ServiceAddress::Headless,
            vec![port("peer", 2380)],
            true,
        ),
        service("empty", ServiceAddress::Headless, vec![], false),
        service(
            "alias",
            ServiceAddress::ExternalName("example.com".into()),
            vec![],
            false,
        ),
        service(
            "inner",
            ServiceAddress::ExternalName("web.default.svc.cluster.local".into()),
            vec![],
            false,
        ),
    ];
    let mut slices = |name: &str, slice: SliceView| {
        f.slices
            .entry(("default".into(), name.into()))
            .or_default()
            .push(slice);
    };
    slices(
        "web",
        SliceView {
            ports: vec![port("http", 8080)],
            endpoints: vec![
                endpoint(ip(10, 0, 0, 1), true, None),
                endpoint(ip(10, 0, 0, 2), false, None),
            ],
        },
    );
    slices(
        "etcd",
        SliceView {
            ports: vec![port("client", 2379), port("peer", 2380)],
            endpoints: vec![
                endpoint(ip(10, 0, 0, 10), true, Some("etcd-0")),
                endpoint(ip(10, 0, 0, 11), false, Some("etcd-1")),
            ],
        },
    );
    slices(
        "etcd",
        SliceView {
            ports: vec![port("client", 2379), port("peer", 2380)],
            endpoints: vec![endpoint(ip(10, 0, 0, 12), true, None)],
        },
    );
    slices(
        "etcd-pub",
        SliceView {
            ports: vec![port("peer", 2380)],
            endpoints: vec![endpoint(ip(10, 0, 0, 20), false, Some("etcd-0"))],
        },
    );
    f
}

fn zone() -> Zone {
    Zone {
        origin: Name::from_ascii("cluster.local.").unwrap(),
        nameserver: Some(ip(10, 88, 0, 1)),
    }
}

fn render(outcome: &Outcome) -> Vec<String> {
    match outcome {
        Outcome::Records {
            answers,
            additionals,
        } => answers
            .iter()
            .map(ToString::to_string)
            .chain(additionals.iter().map(|r| format!("+ {r}")))
            .collect(),
        Outcome::Chase { cname, target } => vec![format!("CHASE {cname} -> {target}")],
        Outcome::NoData => vec!["NODATA".into()],
        Outcome::NxDomain => vec!["NXDOMAIN".into()],
        Outcome::ServFail => vec!["SERVFAIL".into()],
        Outcome::Refused => vec!["REFUSED".into()],
    }
}

fn ask(f: &Fixture, synced: bool, name: &str, qtype: RecordType) -> Vec<String> {
    let snapshot = Snapshot {
        view: f,
        synced,
        serial: 42,
    };
    render(&answer(
        &zone(),
        &Name::from_ascii(name).unwrap(),
        qtype,
        &snapshot,
    ))
}

#[test]
fn answers_follow_coredns() {
    use RecordType::*;
    let f = fixture();
    let cases: Vec<(&str, RecordType, Vec<&str>)> = vec![
        // ClusterIP Service, case preserved in the owner name.
        (
            "web.default.svc.cluster.local.",
            A,
            vec!["web.default.svc.cluster.local. 5 IN A 10.96.0.10"],
        ),
        (
            "Web.Default.svc.cluster.local.",
            A,
            vec!["Web.Default.svc.cluster.local. 5 IN A 10.96.0.10"],
        ),
        ("web.default.svc.cluster.local.", AAAA, vec!["NODATA"]),
        ("web.default.svc.cluster.local.", MX, vec!["NODATA"]),
        ("web.default.svc.cluster.local.", TXT, vec!["NODATA"]),
        // Unknown names.
        ("nope.default.svc.cluster.local.", A, vec!["NXDOMAIN"]),
        ("nope.default.svc.cluster.local.", AAAA, vec!["NXDOMAIN"]),
        ("nope.default.svc.cluster.local.", TXT, vec!["NXDOMAIN"]),
        ("web.nope.svc.cluster.local.", A, vec!["NXDOMAIN"]),
        ("nope.cluster.local.", A, vec!["NXDOMAIN"]),
        (
            "etcd-0.etcd.default.svc.cluster.local.default.svc.cluster.local.",
            A,
            vec!["NXDOMAIN"],
        ),
        (
            "etcd-0.etcd.default.svc.cluster.local.svc.cluster.local.",
            A,
            vec!["NXDOMAIN"],
        ),
        // Names that exist without records.
        ("default.svc.cluster.local.", A, vec!["NODATA"]),
        ("nope.svc.cluster.local.", A, vec!["NXDOMAIN"]),
        ("svc.cluster.local.", A, vec!["NODATA"]),
        ("cluster.local.", A, vec!["NODATA"]),
        // Headless: ready endpoints only.
        (
            "etcd.default.svc.cluster.local.",
            A,
            vec![
                "etcd.default.svc.cluster.local. 5 IN A 10.0.0.10",
                "etcd.default.svc.cluster.local. 5 IN A 10.0.0.12",
            ],
        ),
        ("etcd.default.svc.cluster.local.", AAAA, vec!["NODATA"]),
        (
            "etcd-0.etcd.default.svc.cluster.local.",
            A,
            vec!["etcd-0.etcd.default.svc.cluster.local. 5 IN A 10.0.0.10"],
        ),
        (
            "etcd-1.etcd.default.svc.cluster.local.",
            A,
            vec!["NXDOMAIN"],
        ),
        (
            "etcd-1.etcd.default.svc.cluster.local.",
            AAAA,
            vec!["NXDOMAIN"],
        ),
        (
            "10-0-0-12.etcd.default.svc.cluster.local.",
            A,
            vec!["10-0-0-12.etcd.default.svc.cluster.local. 5 IN A 10.0.0.12"],
        ),
        // Endpoint names work for ClusterIP Services too; a not-ready one does not exist.
        (
            "10-0-0-1.web.default.svc.cluster.local.",
            A,
            vec!["10-0-0-1.web.default.svc.cluster.local. 5 IN A 10.0.0.1"],
        ),
        (
            "10-0-0-2.web.default.svc.cluster.local.",
            A,
            vec!["NXDOMAIN"],
        ),
        // publishNotReadyAddresses: not-ready endpoints are published.
        (
            "etcd-pub.default.svc.cluster.local.",
            A,
            vec!["etcd-pub.default.svc.cluster.local. 5 IN A 10.0.0.20"],
        ),
        (
            "etcd-0.etcd-pub.default.svc.cluster.local.",
            A,
            vec!["etcd-0.etcd-pub.default.svc.cluster.local. 5 IN A 10.0.0.20"],
        ),
        // A headless Service without endpoints does not exist (etcd fails to resolve its peers).
        ("empty.default.svc.cluster.local.", A, vec!["NXDOMAIN"]),
        ("empty.default.svc.cluster.local.", AAAA, vec!["NXDOMAIN"]),
        // SRV.
        (
            "_peer._tcp.etcd.default.svc.cluster.local.",
            SRV,
            vec![
                "_peer._tcp.etcd.default.svc.cluster.local. 5 IN SRV 0 50 2380 etcd-0.etcd.default.svc.cluster.local.",
                "_peer._tcp.etcd.default.svc.cluster.local. 5 IN SRV 0 50 2380 10-0-0-12.etcd.default.svc.cluster.local.",
                "+ etcd-0.etcd.default.svc.cluster.local. 5 IN A 10.0.0.10",
                "+ 10-0-0-12.etcd.default.svc.cluster.local. 5 IN A 10.0.0.12",
            ],
        ),
        (
            "_PEER._TCP.etcd.default.svc.cluster.local.",
            SRV,
            vec![
                "_PEER._TCP.etcd.default.svc.cluster.local. 5 IN SRV 0 50 2380 etcd-0.etcd.default.svc.cluster.local.",
                "_PEER._TCP.etcd.default.svc.cluster.local. 5 IN SRV 0 50 2380 10-0-0-12.etcd.default.svc.cluster.local.",
                "+ etcd-0.etcd.default.svc.cluster.local. 5 IN A 10.0.0.10",
                "+ 10-0-0-12.etcd.default.svc.cluster.local. 5 IN A 10.0.0.12",
            ],
        ),
        (
            "_peer._udp.etcd.default.svc.cluster.local.",
            SRV,
            vec!["NXDOMAIN"],
        ),
        (
            "_http._tcp.web.default.svc.cluster.local.",
            SRV,
            vec![
                "_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local.",
                "+ web.default.svc.cluster.local. 5 IN A 10.96.0.10",
            ],
        ),
        (
            "web.default.svc.cluster.local.",
            SRV,
            vec![
                "web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local.",
                "+ web.default.svc.cluster.local. 5 IN A 10.96.0.10",
            ],
        ),
        (
            "_nope._tcp.web.default.svc.cluster.local.",
            SRV,
            vec!["NXDOMAIN"],
        ),
        (
            "_nope._tcp.web.default.svc.cluster.local.",
            A,
            vec!["NXDOMAIN"],
        ),
        // Pods (verified): only IPs a pod of that namespace has.
        (
            "10-0-0-1.default.pod.cluster.local.",
            A,
            vec!["10-0-0-1.default.pod.cluster.local. 5 IN A 10.0.0.1"],
        ),
        (
            "10-0-0-1.kube-system.pod.cluster.local.",
            A,
            vec!["NXDOMAIN"],
        ),
        ("10-0-0-99.default.pod.cluster.local.", A, vec!["NXDOMAIN"]),
        ("not-an-ip.default.pod.cluster.local.", A, vec!["NXDOMAIN"]),
        ("default.pod.cluster.local.", A, vec!["NODATA"]),
        // The apex.
        (
            "cluster.local.",
            SOA,
            vec![
                "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 42 7200 1800 86400 5",
            ],
        ),
        ("web.default.svc.cluster.local.", SOA, vec!["NODATA"]),
        (
            "cluster.local.",
            NS,
            vec![
                "cluster.local. 5 IN NS ns.dns.cluster.local.",
                "+ ns.dns.cluster.local. 5 IN A 10.88.0.1",
            ],
        ),
        ("web.default.svc.cluster.local.", NS, vec!["NODATA"]),
        (
            "ns.dns.cluster.local.",
            A,
            vec!["ns.dns.cluster.local. 5 IN A 10.88.0.1"],
        ),
        (
            "dns-version.cluster.local.",
            TXT,
            vec!["dns-version.cluster.local. 28800 IN TXT 1.1.0"],
        ),
        ("cluster.local.", AXFR, vec!["REFUSED"]),
        // ExternalName.
        (
            "alias.default.svc.cluster.local.",
            CNAME,
            vec!["alias.default.svc.cluster.local. 5 IN CNAME example.com."],
        ),
        (
            "alias.default.svc.cluster.local.",
            A,
            vec!["CHASE alias.default.svc.cluster.local. 5 IN CNAME example.com. -> example.com."],
        ),
        (
            "inner.default.svc.cluster.local.",
            A,
            vec![
                "inner.default.svc.cluster.local. 5 IN CNAME web.default.svc.cluster.local.",
                "web.default.svc.cluster.local. 5 IN A 10.96.0.10",
            ],
        ),
        (
            "_x._tcp.alias.default.svc.cluster.local.",
            SRV,
            vec!["NXDOMAIN"],
        ),
    ];
    for (name, qtype, want) in cases {
        assert_eq!(ask(&f, true, name, qtype), want, "{name} {qtype}");
    }
}

#[test]
fn name_errors_before_the_first_sync_are_servfail() {
    let f = fixture();
    assert_eq!(
        ask(&f, false, "nope.default.svc.cluster.local.", RecordType::A),
        vec!["SERVFAIL"]
    );
    assert_eq!(
        ask(&f, false, "web.default.svc.cluster.local.", RecordType::A),
        vec!["web.default.svc.cluster.local. 5 IN A 10.96.0.10"]
    );
}

#[test]
fn srv_weights_split_one_hundred() {
    let mut f = fixture();
    let endpoints = (1..=3)
        .map(|i| endpoint(ip(10, 1, 0, i), true, None))
        .collect();
    f.services.push(service(
        "three",
        ServiceAddress::Headless,
        vec![port("p", 1)],
        false,
    ));
    f.slices.insert(
        ("default".into(), "three".into()),
        vec![SliceView {
            ports: vec![port("p", 1)],
            endpoints,
        }],
    );
    let got = ask(
        &f,
        true,
        "_p._tcp.three.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(
        got.iter().filter(|r| r.contains("IN SRV 0 33 1 ")).count(),
        3,
        "{got:?}"
    );
}
