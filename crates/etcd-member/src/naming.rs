//! Names and URLs of members, derived from the cluster alone. Pure.
//!
//! A member's name is `<cluster>-<ordinal>`; its Pod and PVC carry that name, and its peer URL
//! embeds it (`http://<member>.<cluster>.<namespace>.svc:2380`, a record of the headless peer
//! Service; `https://` with peer TLS, and likewise client URLs with client TLS). Because the peer URL names the member, a member that etcd knows but that never
//! started (a crash between `MemberAdd` and creating its Pod) can be matched to its Pod name
//! from etcd's member list alone.
//!
//! A new member takes the lowest ordinal above every ordinal still in use (etcd members, Pods,
//! PVCs, retained ones included), so it never meets another member's data directory; a name
//! comes back only once nothing of its previous member is left.

/// etcd's peer port.
pub const PEER_PORT: u16 = 2380;
/// etcd's client port.
pub const CLIENT_PORT: u16 = 2379;
/// etcd's metrics port (`--listen-metrics-urls`): `/metrics` and `/health` over plain HTTP,
/// apart from the client port, so Prometheus scrapes it without client access (and without
/// client TLS once members have it).
pub const METRICS_PORT: u16 = 2381;
/// The port a member serves `https://` peers on after a switch from plaintext (2380 keeps
/// `http://` while the switch runs; see [`crate::plan::tls_switch`]).
pub const SWITCH_PEER_TLS_PORT: u16 = 2382;
/// The port a member serves `https://` clients on while it still serves `http://` clients on
/// [`CLIENT_PORT`] during a switch from plaintext.
pub const SWITCH_CLIENT_TLS_PORT: u16 = 2378;

/// Where a cluster lives: its namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterName {
    /// Namespace of the EtcdCluster.
    pub namespace: String,
    /// Name of the EtcdCluster (also the name of its headless peer Service).
    pub name: String,
    /// Peer URLs are `https://` (`spec.tls.peer`).
    pub peer_tls: bool,
    /// Client URLs are `https://` (`spec.tls.client`).
    pub client_tls: bool,
}

fn scheme(tls: bool) -> &'static str {
    if tls { "https" } else { "http" }
}

impl ClusterName {
    /// A cluster `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            peer_tls: false,
            client_tls: false,
        }
    }

    /// The same cluster with `https://` peer and/or client URLs.
    pub fn with_tls(self, peer_tls: bool, client_tls: bool) -> Self {
        Self {
            peer_tls,
            client_tls,
            ..self
        }
    }

    /// Name of member `ordinal`: `<cluster>-<ordinal>`.
    pub fn member_name(&self, ordinal: u32) -> String {
        format!("{}-{ordinal}", self.name)
    }

    /// The ordinal of a member name of this cluster, if it is one.
    pub fn ordinal_of(&self, member: &str) -> Option<u32> {
        let ordinal = member.strip_prefix(&self.name)?.strip_prefix('-')?;
        let canonical = !ordinal.is_empty() && (ordinal == "0" || !ordinal.starts_with('0'));
        if canonical && ordinal.bytes().all(|b| b.is_ascii_digit()) {
            ordinal.parse().ok()
        } else {
            None
        }
    }

    /// DNS name of a member through the headless peer Service.
    pub fn member_host(&self, member: &str) -> String {
        format!("{member}.{}.{}.svc", self.name, self.namespace)
    }

    /// Peer URL of a member.
    pub fn peer_url(&self, member: &str) -> String {
        format!(
            "{}://{}:{PEER_PORT}",
            scheme(self.peer_tls),
            self.member_host(member)
        )
    }

    /// Client URL of a member.
    pub fn client_url(&self, member: &str) -> String {
        format!(
            "{}://{}:{CLIENT_PORT}",
            scheme(self.client_tls),
            self.member_host(member)
        )
    }

    /// Metrics URL of a member: plain HTTP on [`METRICS_PORT`] whatever the cluster's TLS (etcd
    /// serves it from its start, before the member serves clients).
    pub fn metrics_url(&self, member: &str) -> String {
        format!("http://{}:{METRICS_PORT}", self.member_host(member))
    }

    /// The peer URL a member gets when a running plaintext cluster is switched to TLS:
    /// `https://` on [`SWITCH_PEER_TLS_PORT`], since it still serves `http://` on [`PEER_PORT`]
    /// meanwhile (see [`crate::plan::tls_switch`]).
    pub fn switched_peer_url(&self, member: &str) -> String {
        format!(
            "https://{}:{SWITCH_PEER_TLS_PORT}",
            self.member_host(member)
        )
    }

    /// The plaintext peer URL of a member (where a switch to TLS starts, and reverts to).
    pub fn plain_peer_url(&self, member: &str) -> String {
        format!("http://{}:{PEER_PORT}", self.member_host(member))
    }

    /// The member name a peer URL of this cluster designates, if it is one of ours: in the
    /// cluster's scheme, and with peer TLS also the URLs of a switch from plaintext
    /// (`http://…:2380` before it, `https://…:2382` after). A plaintext cluster never had
    /// `https://` peer URLs of ours (`spec.tls` cannot be removed).
    pub fn member_of_peer_url(&self, peer_url: &str) -> Option<String> {
        let host_suffix = format!(".{}.{}.svc", self.name, self.namespace);
        let (scheme_part, rest) = peer_url.split_once("://")?;
        let (host, port) = rest.rsplit_once(':')?;
        let ours = match (scheme_part, port.parse::<u16>().ok()?) {
            ("http", PEER_PORT) => true,
            ("https", PEER_PORT | SWITCH_PEER_TLS_PORT) => self.peer_tls,
            _ => false,
        };
        if !ours {
            return None;
        }
        let member = host.strip_suffix(&host_suffix)?;
        self.ordinal_of(member).map(|_| member.to_owned())
    }

    /// Name of the cluster's client Service.
    pub fn client_service_name(&self) -> String {
        format!("{}-client", self.name)
    }

    /// Client URL of the cluster's client Service.
    pub fn client_service_url(&self) -> String {
        format!(
            "{}://{}.{}.svc:{CLIENT_PORT}",
            scheme(self.client_tls),
            self.client_service_name(),
            self.namespace
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_urls_round_trip() {
        let cluster = ClusterName::new("db", "main");
        assert_eq!(cluster.member_name(3), "main-3");
        assert_eq!(cluster.peer_url("main-3"), "http://main-3.main.db.svc:2380");
        assert_eq!(
            cluster.client_url("main-3"),
            "http://main-3.main.db.svc:2379"
        );
        assert_eq!(
            cluster.client_service_url(),
            "http://main-client.db.svc:2379"
        );
        assert_eq!(
            cluster
                .member_of_peer_url("http://main-3.main.db.svc:2380")
                .as_deref(),
            Some("main-3")
        );
    }

    #[test]
    fn tls_urls_are_https() {
        let cluster = ClusterName::new("db", "main").with_tls(true, false);
        assert_eq!(
            cluster.peer_url("main-3"),
            "https://main-3.main.db.svc:2380"
        );
        assert_eq!(
            cluster.client_url("main-3"),
            "http://main-3.main.db.svc:2379"
        );
        let cluster = ClusterName::new("db", "main").with_tls(false, true);
        assert_eq!(cluster.peer_url("main-3"), "http://main-3.main.db.svc:2380");
        assert_eq!(
            cluster.client_url("main-3"),
            "https://main-3.main.db.svc:2379"
        );
        assert_eq!(
            cluster.client_service_url(),
            "https://main-client.db.svc:2379"
        );
        let peer_tls = ClusterName::new("db", "main").with_tls(true, false);
        assert_eq!(
            peer_tls
                .member_of_peer_url("https://main-3.main.db.svc:2380")
                .as_deref(),
            Some("main-3")
        );
        // A switch from plaintext: the URL before it and the one after it are ours too.
        for url in [
            "http://main-3.main.db.svc:2380",
            "https://main-3.main.db.svc:2382",
        ] {
            assert_eq!(peer_tls.member_of_peer_url(url).as_deref(), Some("main-3"));
        }
        assert_eq!(
            peer_tls.switched_peer_url("main-3"),
            "https://main-3.main.db.svc:2382"
        );
        assert_eq!(
            peer_tls.plain_peer_url("main-3"),
            "http://main-3.main.db.svc:2380"
        );
        for url in [
            "http://main-3.main.db.svc:2382",
            "https://main-3.main.db.svc:2379",
            "https://main-3.main.db.svc:2378",
        ] {
            assert_eq!(peer_tls.member_of_peer_url(url), None, "{url}");
        }
    }

    #[test]
    fn foreign_names_and_urls_are_not_ours() {
        let cluster = ClusterName::new("db", "main");
        for name in [
            "main", "main-", "main-x", "main-01", "other-1", "main-1-2", "mainly-1",
        ] {
            assert_eq!(cluster.ordinal_of(name), None, "{name}");
        }
        assert_eq!(cluster.ordinal_of("main-0"), Some(0));
        assert_eq!(cluster.ordinal_of("main-12"), Some(12));
        for url in [
            "http://main-3.main.other.svc:2380",
            "http://main-3.main.db.svc:2379",
            "https://main-3.main.db.svc:2380",
            "https://main-3.main.db.svc:2382",
            "http://10.0.0.3:2380",
            "http://x-3.main.db.svc:2380",
        ] {
            assert_eq!(cluster.member_of_peer_url(url), None, "{url}");
        }
    }
}
