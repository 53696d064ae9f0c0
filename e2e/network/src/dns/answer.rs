//! The answer to one question inside the cluster zone: a pure function of the question and the
//! cluster, following CoreDNS's `kubernetes` plugin (`handler.go`, `kubernetes.go`,
//! `plugin/backend_lookup.go`) for record shapes, TTLs and the NXDOMAIN/NODATA split.
//!
//! The readiness rule is the one that must stay honest: an endpoint gives records only when it
//! is ready (a missing condition counts as ready) or its Service publishes not-ready addresses.
//! A headless Service with no such endpoint is NXDOMAIN, as on a real cluster.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use hickory_proto::rr::rdata::{A, CNAME, NS, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::query::{Kind, Parsed, RecordRequest, parse};
use crate::model::{ClusterView, ServiceAddress, ServiceView};

/// TTL of every cluster record (CoreDNS `ttl 5` is what the spec asks; CoreDNS's own default is 5).
pub const TTL: u32 = 5;
/// `dns-version.<zone>` TXT: the Kubernetes DNS schema version CoreDNS serves.
const DNS_SCHEMA_VERSION: &str = "1.1.0";
const DNS_VERSION_TTL: u32 = 28800;
/// CoreDNS's `maxCnameChainLength`, for ExternalName aliases inside the zone.
const MAX_CNAME_CHAIN: usize = 10;

/// The authoritative zone.
#[derive(Clone, Debug)]
pub struct Zone {
    /// Lower case and fully qualified, e.g. `cluster.local.`.
    pub origin: Name,
    /// The server's own address: the glue of `ns.dns.<zone>` (none when listening on 0.0.0.0).
    pub nameserver: Option<Ipv4Addr>,
}

/// What the cluster looks like at answer time.
pub struct Snapshot<'a, V> {
    pub view: &'a V,
    /// False until the caches have their first full list: name errors become SERVFAIL.
    pub synced: bool,
    pub serial: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// NOERROR with records (authoritative).
    Records {
        answers: Vec<Record>,
        additionals: Vec<Record>,
    },
    /// An ExternalName alias to a name outside the zone: answer the CNAME followed by what the
    /// upstream says about `target` (CoreDNS looks the target up the same way); without an
    /// upstream answer the result is NODATA.
    Chase {
        cname: Box<Record>,
        target: Name,
    },
    /// NOERROR, no answers, SOA in the authority section.
    NoData,
    /// NXDOMAIN, SOA in the authority section.
    NxDomain,
    ServFail,
    Refused,
}

/// An address found for a name, with the port it came with and its key name (CoreDNS
/// `msg.Service` and `msg.Domain(Key)`): the SRV target and the owner of the additional A.
#[derive(Clone, Debug, PartialEq)]
struct Found {
    host: Host,
    port: i32,
    key: Name,
}

#[derive(Clone, Debug, PartialEq)]
enum Host {
    Ip(Ipv4Addr),
    Alias(Name),
}

/// CoreDNS's `errNoItems`/`errInvalidRequest`/`errNsNotExposed`: the name does not exist.
#[derive(Debug, PartialEq)]
struct NameError;

/// Answers `qname`/`qtype`, which must be inside `zone.origin`.
pub fn answer<V: ClusterView>(
    zone: &Zone,
    qname: &Name,
    qtype: RecordType,
    cluster: &Snapshot<'_, V>,
) -> Outcome {
    answer_chained(zone, qname, qtype, cluster, 0)
}

fn answer_chained<V: ClusterView>(
    zone: &Zone,
    qname: &Name,
    qtype: RecordType,
    cluster: &Snapshot<'_, V>,
    depth: usize,
) -> Outcome {
    let labels = relative_labels(zone, qname);
    let at_apex = labels.is_empty();
    let result = match qtype {
        RecordType::A | RecordType::AAAA | RecordType::CNAME => {
            return addresses(zone, qname, qtype, &labels, cluster, depth);
        }
        RecordType::SRV => return srv(zone, qname, &labels, cluster),
        RecordType::TXT => {
            if labels == ["dns-version"] {
                let txt = RData::TXT(TXT::new(vec![DNS_SCHEMA_VERSION.to_owned()]));
                return records(
                    vec![Record::from_rdata(qname.clone(), DNS_VERSION_TTL, txt)],
                    vec![],
                );
            }
            // CoreDNS: NODATA only when the name has records of another type.
            match lookup(zone, &labels, cluster.view) {
                Ok(found) if !found.is_empty() => return Outcome::NoData,
                _ => Err(NameError),
            }
        }
        RecordType::SOA if at_apex => return records(vec![soa(zone, cluster.serial)], vec![]),
        // CoreDNS answers SOA only at the apex and NODATA for every other name.
        RecordType::SOA => return Outcome::NoData,
        RecordType::NS if at_apex => {
            let ns_name = default_ns_name(zone);
            let ns = Record::from_rdata(qname.clone(), TTL, RData::NS(NS(ns_name.clone())));
            let glue = zone
                .nameserver
                .map(|ip| Record::from_rdata(ns_name, TTL, RData::A(A(ip))));
            return records(vec![ns], glue.into_iter().collect());
        }
        RecordType::AXFR | RecordType::IXFR => return Outcome::Refused,
        // Every other type: NODATA when an A lookup of the name succeeds, else NXDOMAIN.
        _ => lookup_or_default_ns(zone, &labels, cluster.view).map(|_| ()),
    };
    match result {
        Ok(()) => Outcome::NoData,
        Err(NameError) => name_error(cluster),
    }
}

fn name_error<V>(cluster: &Snapshot<'_, V>) -> Outcome {
    if cluster.synced {
        Outcome::NxDomain
    } else {
        Outcome::ServFail
    }
}

fn records(answers: Vec<Record>, additionals: Vec<Record>) -> Outcome {
    if answers.is_empty() {
        Outcome::NoData
    } else {
        Outcome::Records {
            answers,
            additionals,
        }
    }
}

/// The SOA CoreDNS puts in negative answers and serves at the apex.
pub fn soa(zone: &Zone, serial: u32) -> Record {
    let soa = SOA::new(
        default_ns_name(zone),
        join("hostmaster", &zone.origin),
        serial,
        7200,
        1800,
        86400,
        TTL,
    );
    Record::from_rdata(zone.origin.clone(), TTL, RData::SOA(soa))
}

fn default_ns_name(zone: &Zone) -> Name {
    join("ns.dns", &zone.origin)
}

/// `relative` + `.` + `origin`; names from the API are valid DNS labels, and a label that is
/// not (an overlong one) falls back to the origin rather than failing the whole answer.
fn join(relative: &str, origin: &Name) -> Name {
    Name::from_ascii(relative)
        .and_then(|name| name.append_domain(origin))
        .unwrap_or_else(|_| origin.clone())
}

/// The labels of `qname` below the zone, leftmost first, lower case.
fn relative_labels(zone: &Zone, qname: &Name) -> Vec<String> {
    let below =
        usize::from(qname.num_labels()).saturating_sub(usize::from(zone.origin.num_labels()));
    qname
        .iter()
        .take(below)
        .map(|label| String::from_utf8_lossy(label).to_ascii_lowercase())
        .collect()
}

/// A, AAAA and CNAME questions (CoreDNS `plugin.A`/`AAAA`/`CNAME`).
fn addresses<V: ClusterView>(
    zone: &Zone,
    qname: &Name,
    qtype: RecordType,
    labels: &[String],
    cluster: &Snapshot<'_, V>,
    depth: usize,
) -> Outcome {
    let found = match lookup_or_default_ns(zone, labels, cluster.view) {
        Ok(found) => found,
        Err(NameError) => return name_error(cluster),
    };
    let mut answers = Vec::new();
    let mut seen = HashSet::new();
    for found in found {
        match found.host {
            Host::Ip(ip) => {
                // The cluster is IPv4 only: AAAA and CNAME of an address name are NODATA.
                if qtype == RecordType::A && seen.insert(ip) {
                    answers.push(Record::from_rdata(qname.clone(), TTL, RData::A(A(ip))));
                }
            }
            Host::Alias(target) => {
                let cname =
                    Record::from_rdata(qname.clone(), TTL, RData::CNAME(CNAME(target.clone())));
                if qtype == RecordType::CNAME || target == *qname {
                    answers.push(cname);
                    continue;
                }
                if !zone.origin.zone_of(&target) {
                    return Outcome::Chase {
                        cname: Box::new(cname),
                        target,
                    };
                }
                if depth >= MAX_CNAME_CHAIN {
                    continue;
                }
                // An alias inside the zone: answer it here, as CoreDNS recurses into itself.
                if let Outcome::Records { answers: more, .. } =
                    answer_chained(zone, &target, qtype, cluster, depth + 1)
                {
                    answers.push(cname);
                    answers.extend(more);
                }
            }
        }
    }
    records(answers, vec![])
}

/// SRV questions (CoreDNS `plugin.SRV`): one record per address and port, weights splitting
/// 100 evenly, targets named by the key, and the target's A record as additional data.
fn srv<V: ClusterView>(
    zone: &Zone,
    qname: &Name,
    labels: &[String],
    cluster: &Snapshot<'_, V>,
) -> Outcome {
    let found = match lookup(zone, labels, cluster.view) {
        Ok(found) => found,
        Err(NameError) => return name_error(cluster),
    };
    let internal: Vec<Found> = found
        .into_iter()
        .filter(|f| matches!(f.host, Host::Ip(_)))
        .collect();
    let weight = srv_weight(internal.len());
    let mut answers = Vec::new();
    let mut additionals = Vec::new();
    let mut seen_srv = HashSet::new();
    let mut seen_glue = HashSet::new();
    for found in internal {
        let (Host::Ip(ip), Ok(port)) = (found.host, u16::try_from(found.port)) else {
            // Port -1: a slice without ports gives A records but no SRV.
            continue;
        };
        if seen_srv.insert((found.key.clone(), port)) {
            let srv = SRV::new(0, weight, port, found.key.clone());
            answers.push(Record::from_rdata(qname.clone(), TTL, RData::SRV(srv)));
        }
        if seen_glue.insert((found.key.clone(), ip)) {
            additionals.push(Record::from_rdata(found.key, TTL, RData::A(A(ip))));
        }
    }
    records(answers, additionals)
}

/// CoreDNS gives each of n same-priority records `floor(100 / n)`, at least 1.
fn srv_weight(count: usize) -> u16 {
    let count = u16::try_from(count.max(1)).unwrap_or(u16::MAX);
    (100 / count).max(1)
}

/// `ns.dns.<zone>` resolves to the server itself, whatever the type asked (CoreDNS `isDefaultNS`).
fn lookup_or_default_ns<V: ClusterView>(
    zone: &Zone,
    labels: &[String],
    view: &V,
) -> Result<Vec<Found>, NameError> {
    if labels == ["ns", "dns"] {
        let key = default_ns_name(zone);
        return Ok(zone
            .nameserver
            .map(|ip| Found {
                host: Host::Ip(ip),
                port: 0,
                key,
            })
            .into_iter()
            .collect());
    }
    lookup(zone, labels, view)
}

/// CoreDNS `Records`: what a name under the zone points at, or a name error.
fn lookup<V: ClusterView>(
    zone: &Zone,
    labels: &[String],
    view: &V,
) -> Result<Vec<Found>, NameError> {
    match parse(labels) {
        Parsed::Empty => Ok(Vec::new()),
        Parsed::Invalid => Err(NameError),
        Parsed::Request(request) => {
            if !view.namespace_exists(&request.namespace) {
                return Err(NameError);
            }
            match request.kind {
                Kind::Pod => find_pod(zone, &request, view),
                Kind::Service => find_service(zone, &request, view),
            }
        }
    }
}

/// CoreDNS `findPods` in `pods verified` mode: `a-b-c-d.<ns>.pod` exists when a pod of that
/// namespace has the IP.
fn find_pod<V: ClusterView>(
    zone: &Zone,
    request: &RecordRequest,
    view: &V,
) -> Result<Vec<Found>, NameError> {
    let Some(dashed) = &request.service else {
        return Ok(Vec::new());
    };
    let ip: Ipv4Addr = if dashed.matches('-').count() == 3 && !dashed.contains("--") {
        dashed.replace('-', ".").parse().map_err(|_| NameError)?
    } else {
        return Err(NameError);
    };
    if !view.pod_has_ip(&request.namespace, ip) {
        return Err(NameError);
    }
    Ok(vec![Found {
        host: Host::Ip(ip),
        port: 0,
        key: join(&format!("{dashed}.{}.pod", request.namespace), &zone.origin),
    }])
}

/// CoreDNS `findServices`.
fn find_service<V: ClusterView>(
    zone: &Zone,
    request: &RecordRequest,
    view: &V,
) -> Result<Vec<Found>, NameError> {
    let Some(name) = &request.service else {
        return Ok(Vec::new());
    };
    let service = view.service(&request.namespace, name).ok_or(NameError)?;
    let service_key = format!("{}.{}.svc", service.name, service.namespace);
    match &service.address {
        ServiceAddress::ExternalName(external) => {
            // An alias has no endpoints and no ports; an IP as "name" is no alias at all.
            if request.endpoint.is_some() || request.port.is_some() || request.protocol.is_some() {
                return Err(NameError);
            }
            if external.parse::<Ipv4Addr>().is_ok() {
                return Err(NameError);
            }
            let mut target = Name::from_ascii(external).map_err(|_| NameError)?;
            target.set_fqdn(true);
            Ok(vec![Found {
                host: Host::Alias(target),
                port: 0,
                key: join(&service_key, &zone.origin),
            }])
        }
        _ if service.is_headless() || request.endpoint.is_some() => {
            let found = endpoint_records(zone, request, &service, &service_key, view);
            if found.is_empty() {
                Err(NameError)
            } else {
                Ok(found)
            }
        }
        ServiceAddress::ClusterIps(ips) => {
            let mut matched = false;
            let mut found = Vec::new();
            for port in &service.ports {
                if !port_matches(request, &port.name, &port.protocol) {
                    continue;
                }
                matched = true;
                for ip in ips {
                    found.push(Found {
                        host: Host::Ip(*ip),
                        port: port.port,
                        key: join(&service_key, &zone.origin),
                    });
                }
            }
            if matched { Ok(found) } else { Err(NameError) }
        }
        ServiceAddress::Headless => Err(NameError),
    }
}

/// The endpoints a headless Service name (or an endpoint name of any Service) points at.
fn endpoint_records<V: ClusterView>(
    zone: &Zone,
    request: &RecordRequest,
    service: &ServiceView,
    service_key: &str,
    view: &V,
) -> Vec<Found> {
    let mut found = Vec::new();
    for slice in view.slices(&service.namespace, &service.name) {
        for endpoint in &slice.endpoints {
            if !(endpoint.ready || service.publish_not_ready_addresses) {
                continue;
            }
            for ip in &endpoint.addresses {
                let hostname = endpoint
                    .hostname
                    .clone()
                    .unwrap_or_else(|| ip.to_string().replace('.', "-"));
                if request
                    .endpoint
                    .as_ref()
                    .is_some_and(|wanted| !wanted.eq_ignore_ascii_case(&hostname))
                {
                    continue;
                }
                for port in &slice.ports {
                    if !port_matches(request, &port.name, &port.protocol) {
                        continue;
                    }
                    found.push(Found {
                        host: Host::Ip(*ip),
                        port: port.port,
                        key: join(&format!("{hostname}.{service_key}"), &zone.origin),
                    });
                }
            }
        }
    }
    found
}

/// CoreDNS `matchPortAndProtocol`: an absent part of the question matches anything.
fn port_matches(request: &RecordRequest, name: &str, protocol: &str) -> bool {
    request
        .port
        .as_ref()
        .is_none_or(|p| p.eq_ignore_ascii_case(name))
        && request
            .protocol
            .as_ref()
            .is_none_or(|p| p.eq_ignore_ascii_case(protocol))
}
