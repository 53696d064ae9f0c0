//! Parsing a name inside the cluster zone into what CoreDNS's `parseRequest` extracts.
//!
//! The shapes under `<zone>` are:
//! 1. `_<port>._<proto>.<service>.<namespace>.svc|pod`
//! 2. `<endpoint>.<service>.<namespace>.svc|pod`
//! 3. `<service>.<namespace>.svc|pod`
//! 4. `<namespace>.svc|pod`, and `svc|pod` alone (names that exist without data)
//!
//! Anything longer, or not ending in `svc`/`pod`, is an invalid request: NXDOMAIN.

/// Whether the name is under `svc` or `pod`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Service,
    Pod,
}

/// A parsed request; all strings are lower case (DNS matching is case-insensitive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRequest {
    pub kind: Kind,
    pub namespace: String,
    /// The service name, or for `pod` names the dashed pod IP.
    pub service: Option<String>,
    pub endpoint: Option<String>,
    /// The port name of an SRV query, without its underscore.
    pub port: Option<String>,
    pub protocol: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The zone apex, `svc.<zone>` or `pod.<zone>`: the name exists but holds no records.
    Empty,
    Request(RecordRequest),
    Invalid,
}

/// Parses the labels below the zone, leftmost first, already lower-cased.
pub fn parse(labels: &[String]) -> Parsed {
    let Some((last, rest)) = labels.split_last() else {
        return Parsed::Empty;
    };
    let kind = match last.as_str() {
        "svc" => Kind::Service,
        "pod" => Kind::Pod,
        _ => return Parsed::Invalid,
    };
    let Some((namespace, rest)) = rest.split_last() else {
        return Parsed::Empty;
    };
    let mut request = RecordRequest {
        kind,
        namespace: namespace.clone(),
        service: None,
        endpoint: None,
        port: None,
        protocol: None,
    };
    if let Some((service, rest)) = rest.split_last() {
        request.service = Some(service.clone());
        match rest {
            [] => {}
            [endpoint] => request.endpoint = Some(endpoint.clone()),
            // Two labels are always port and protocol: this server serves no multicluster zone.
            [port, protocol] => {
                request.port = Some(strip_underscore(port).to_owned());
                request.protocol = Some(strip_underscore(protocol).to_owned());
            }
            _ => return Parsed::Invalid,
        }
    }
    Parsed::Request(request)
}

fn strip_underscore(label: &str) -> &str {
    label.strip_prefix('_').unwrap_or(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(name: &str) -> Vec<String> {
        if name.is_empty() {
            return Vec::new();
        }
        name.split('.').map(str::to_owned).collect()
    }

    fn request(
        kind: Kind,
        namespace: &str,
        service: Option<&str>,
        endpoint: Option<&str>,
        port: Option<&str>,
        protocol: Option<&str>,
    ) -> Parsed {
        Parsed::Request(RecordRequest {
            kind,
            namespace: namespace.into(),
            service: service.map(Into::into),
            endpoint: endpoint.map(Into::into),
            port: port.map(Into::into),
            protocol: protocol.map(Into::into),
        })
    }

    #[test]
    fn parse_table() {
        use Kind::*;
        let cases = [
            ("", Parsed::Empty),
            ("svc", Parsed::Empty),
            ("pod", Parsed::Empty),
            (
                "default.svc",
                request(Service, "default", None, None, None, None),
            ),
            (
                "etcd.default.svc",
                request(Service, "default", Some("etcd"), None, None, None),
            ),
            (
                "etcd-0.etcd.default.svc",
                request(Service, "default", Some("etcd"), Some("etcd-0"), None, None),
            ),
            (
                "_peer._tcp.etcd.default.svc",
                request(
                    Service,
                    "default",
                    Some("etcd"),
                    None,
                    Some("peer"),
                    Some("tcp"),
                ),
            ),
            (
                "peer.tcp.etcd.default.svc",
                request(
                    Service,
                    "default",
                    Some("etcd"),
                    None,
                    Some("peer"),
                    Some("tcp"),
                ),
            ),
            (
                "10-0-0-1.default.pod",
                request(Pod, "default", Some("10-0-0-1"), None, None, None),
            ),
            ("a.b.c.etcd.default.svc", Parsed::Invalid),
            // The search list appended to a name that was already fully qualified.
            (
                "etcd-0.etcd.default.svc.cluster.local.default.svc",
                Parsed::Invalid,
            ),
            ("etcd.default", Parsed::Invalid),
            ("dns-version", Parsed::Invalid),
        ];
        for (name, want) in cases {
            assert_eq!(parse(&labels(name)), want, "{name:?}");
        }
    }
}
