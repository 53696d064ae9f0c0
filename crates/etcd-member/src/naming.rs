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

    /// The member name a peer URL of this cluster designates, if it is one of ours (in the
    /// cluster's scheme).
    pub fn member_of_peer_url(&self, peer_url: &str) -> Option<String> {
        let suffix = format!(".{}.{}.svc:{PEER_PORT}", self.name, self.namespace);
        let member = peer_url
            .strip_prefix(scheme(self.peer_tls))?
            .strip_prefix("://")?
            .strip_suffix(&suffix)?;
        self.ordinal_of(member).map(|_| member.to_owned())
    }

    /// Client URL of the cluster's client Service.
    pub fn client_service_url(&self) -> String {
        format!(
            "{}://{}-client.{}.svc:{CLIENT_PORT}",
            scheme(self.client_tls),
            self.name,
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
        assert_eq!(
            peer_tls.member_of_peer_url("http://main-3.main.db.svc:2380"),
            None
        );
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
            "http://10.0.0.3:2380",
            "http://x-3.main.db.svc:2380",
        ] {
            assert_eq!(cluster.member_of_peer_url(url), None, "{url}");
        }
    }
}
