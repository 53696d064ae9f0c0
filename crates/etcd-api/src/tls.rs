//! `spec.tls` of an EtcdCluster: TLS of member-to-member (peer) and client traffic, configured
//! separately, and the names of the Secrets the operators read or write for it.
//!
//! Where certificates come from, per side (peer or client):
//! - **operator-managed** (no `secretRef`, the default): the cluster operator creates a CA for
//!   the cluster (Secret `<cluster>-ca`), a certificate per member (Secret `<member>-tls`, SANs:
//!   the member's DNS names, the Service names, `localhost`, `127.0.0.1`; serverAuth and
//!   clientAuth) and a client certificate for the operators (Secret
//!   `<cluster>-operator-client-tls`, clientAuth). One CA serves both sides. Member and client
//!   certificates are renewed with a third of their lifetime left; the CA is rotated (with an
//!   overlap period) on the annotation `etcd.operator.rs/rotate-ca` or near its expiry.
//! - **Secrets you provide** (`secretRef`): a `kubernetes.io/tls` Secret with `tls.crt`,
//!   `tls.key` and `ca.crt`, whose certificate every member uses.
//! - **cert-manager** (`certManager: {issuerRef}`): the cluster operator creates cert-manager
//!   `Certificate`s (cert-manager.io/v1) from your Issuer or ClusterIssuer: one per member and
//!   side (Secret `<member>-peer-tls` / `<member>-client-tls`, same SANs and usages as the
//!   operator-managed ones) and, for the client side, the operators' client certificate
//!   (Secret `<cluster>-operator-client-tls`), and waits for cert-manager to fill the Secrets
//!   (`tls.crt`, `tls.key`, `ca.crt`) before any member Pod that mounts them starts.
//!
//! The hand-over to the backup and restore operators: they reach a TLS cluster's client port
//! with [`EtcdCluster::operator_client_secret`], which names the Secret holding the CA and
//! (when there is one) the client certificate the operators present.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::EtcdCluster;
use crate::common::LocalObjectReference;

/// Keys of a `kubernetes.io/tls` Secret (plus `ca.crt`).
pub mod secret_keys {
    /// PEM certificate (chain) presented.
    pub const CERT: &str = "tls.crt";
    /// PEM private key of [`CERT`].
    pub const KEY: &str = "tls.key";
    /// PEM CA certificate(s) the peer's certificate must chain to.
    pub const CA: &str = "ca.crt";
}

/// Secret type of TLS Secrets.
pub const SECRET_TYPE_TLS: &str = "kubernetes.io/tls";

/// TLS of the members. Setting it on a running plaintext cluster switches the cluster to TLS
/// member by member; removing it or changing the source afterwards is refused by the API server.
/// Certificates are rotated without changing it: operator-managed ones are renewed before
/// expiry, the annotation `etcd.operator.rs/rotate-ca` rotates the operator-managed CA, and a
/// Secret you provide is picked up when its content changes (members roll one at a time).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// TLS between members (port 2380, `https://` peer URLs). Unset: peers talk plain HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerTls>,

    /// TLS of the client port (2379, `https://` client URLs), which clients, the operators,
    /// backups and restores use. Unset: clients connect over plain HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientTls>,
}

/// Peer TLS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new(
    "!(has(self.secretRef) && has(self.certManager))"
).message("secretRef and certManager are two sources of the certificates: set at most one"))]
pub struct PeerTls {
    /// A `kubernetes.io/tls` Secret you provide (`tls.crt`, `tls.key`, `ca.crt`) whose
    /// certificate every member serves and presents to its peers. Its SANs must name every
    /// member's `<member>.<cluster>.<namespace>.svc` (a wildcard `*.<cluster>.<namespace>.svc`
    /// does), it must allow serverAuth and clientAuth, and `ca.crt` must sign it. Unset: the
    /// operator issues a certificate per member from a CA of its own (Secret `<cluster>-ca`).
    /// Members mount a copy the operator keeps (Secret `<member>-peer-mounted`), through which
    /// a change of this Secret's CA gets an overlap: both CAs trusted until every member moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,

    /// cert-manager issues the members' peer certificates from this issuer: the operator
    /// creates a `Certificate` per member (Secret `<member>-peer-tls`). The issuer must fill
    /// `ca.crt` (a CA or Vault issuer does). Excludes `secretRef`. Members mount a copy the
    /// operator keeps (`<member>-peer-mounted`), so an issuer whose CA is replaced gets an
    /// overlap, as with `secretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManagerSource>,

    /// Members accept peer connections only with a certificate signed by the CA
    /// (`--peer-client-cert-auth`). Default true.
    #[serde(default = "yes")]
    pub client_cert_auth: bool,
}

impl Default for PeerTls {
    fn default() -> Self {
        Self {
            secret_ref: None,
            cert_manager: None,
            client_cert_auth: true,
        }
    }
}

fn yes() -> bool {
    true
}

/// Client TLS.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new(
    "!has(self.operatorSecretRef) || has(self.secretRef)"
).message("operatorSecretRef needs secretRef: with operator-managed certificates the operator issues its own client certificate"))]
#[x_kube(validation = kube::core::Rule::new(
    "!has(self.secretRef) || !(has(self.clientCertAuth) && self.clientCertAuth) || has(self.operatorSecretRef)"
).message("clientCertAuth with secretRef needs operatorSecretRef: the client certificate the operators present to the members"))]
#[x_kube(validation = kube::core::Rule::new(
    "!(has(self.secretRef) && has(self.certManager))"
).message("secretRef and certManager are two sources of the certificates: set at most one"))]
pub struct ClientTls {
    /// A `kubernetes.io/tls` Secret you provide (`tls.crt`, `tls.key`, `ca.crt`) whose
    /// certificate every member serves on its client port. Its SANs must name every member's
    /// `<member>.<cluster>.<namespace>.svc` (a wildcard `*.<cluster>.<namespace>.svc` does) and
    /// it must allow serverAuth; `ca.crt` must sign it. Unset: operator-managed, as for peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,

    /// With `secretRef`: a `kubernetes.io/tls` Secret with the client certificate the
    /// operators (cluster, backup, restore) present to the members, and in `ca.crt` the CA
    /// that signed the members' certificates. Required with `clientCertAuth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_secret_ref: Option<LocalObjectReference>,

    /// cert-manager issues the members' client-port certificates from this issuer (a
    /// `Certificate` per member, Secret `<member>-client-tls`) and the operators' client
    /// certificate (Secret `<cluster>-operator-client-tls`, CN `etcd-operator`). The issuer
    /// must fill `ca.crt`. Excludes `secretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManagerSource>,

    /// Members accept client connections only with a certificate signed by the CA
    /// (`--client-cert-auth`). Default false.
    #[serde(default)]
    pub client_cert_auth: bool,
}

/// cert-manager as the source of a side's certificates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertManagerSource {
    /// The issuer of the certificates, as a cert-manager `Certificate`'s `spec.issuerRef`
    /// names it.
    pub issuer_ref: IssuerReference,
}

/// A cert-manager issuer (cert-manager's `ObjectReference`: `name`, `kind`, `group`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuerReference {
    /// Name of the Issuer (in the cluster's namespace) or ClusterIssuer.
    #[schemars(length(min = 1))]
    pub name: String,

    /// `Issuer` (the default) or `ClusterIssuer`; an external issuer's own kind with its
    /// `group`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,

    /// API group of the issuer. Default `cert-manager.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// Which side a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// Port 2380, member to member.
    Peer,
    /// Port 2379, clients.
    Client,
}

impl Side {
    /// `peer` or `client`, as in Secret names and fields.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Peer => "peer",
            Side::Client => "client",
        }
    }
}

/// Name of the Secret (and of the cert-manager `Certificate` that fills it) with a member's
/// certificate for one side, when cert-manager issues it.
pub fn cert_manager_member_secret_name(member: &str, side: Side) -> String {
    format!("{member}-{}-tls", side.as_str())
}

impl TlsSpec {
    /// The sides whose certificates cert-manager issues, with their issuer.
    pub fn cert_manager_sides(&self) -> Vec<(Side, &IssuerReference)> {
        let mut sides = Vec::new();
        if let Some(source) = self.peer.as_ref().and_then(|p| p.cert_manager.as_ref()) {
            sides.push((Side::Peer, &source.issuer_ref));
        }
        if let Some(source) = self.client.as_ref().and_then(|c| c.cert_manager.as_ref()) {
            sides.push((Side::Client, &source.issuer_ref));
        }
        sides
    }
}

/// Name of the operator-managed CA Secret of a cluster.
pub fn ca_secret_name(cluster: &str) -> String {
    format!("{cluster}-ca")
}

/// Name of the operator-managed certificate Secret of a member.
pub fn member_secret_name(member: &str) -> String {
    format!("{member}-tls")
}

/// Name of a member's mounted copy of its peer certificate: the Secret it mounts for the peer
/// port when the peer certificates are not operator-managed (a Secret you provide, or
/// cert-manager's). The operator writes it from the source with a trust bundle, so a source
/// moved to a new CA in one step reaches members with an overlap (issue 19).
pub fn mounted_peer_secret_name(member: &str) -> String {
    format!("{member}-peer-mounted")
}

/// Whether members mount a copy of their peer certificate ([`mounted_peer_secret_name`]): peer
/// TLS from a Secret you provide or from cert-manager.
pub fn peer_copied(tls: &TlsSpec) -> bool {
    tls.peer
        .as_ref()
        .is_some_and(|p| p.secret_ref.is_some() || p.cert_manager.is_some())
}

/// Name of the operator-managed Secret with the operators' client certificate for a cluster.
pub fn operator_client_secret_name(cluster: &str) -> String {
    format!("{cluster}-operator-client-tls")
}

/// Whether a side uses certificates the operator issues.
pub fn operator_managed(tls: &TlsSpec) -> bool {
    tls.peer
        .as_ref()
        .is_some_and(|p| p.secret_ref.is_none() && p.cert_manager.is_none())
        || tls
            .client
            .as_ref()
            .is_some_and(|c| c.secret_ref.is_none() && c.cert_manager.is_none())
}

/// How the operators reach a TLS client port: which Secret holds the CA to trust (`ca.crt`)
/// and whether to present its `tls.crt`/`tls.key` as a client certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorClientSecret {
    /// Secret name, in the cluster's namespace.
    pub name: String,
    /// Present the Secret's certificate (it is a client certificate, not a member's).
    pub present_certificate: bool,
}

impl EtcdCluster {
    /// Whether peer URLs are `https://`.
    pub fn peer_tls(&self) -> bool {
        self.spec.tls.as_ref().is_some_and(|t| t.peer.is_some())
    }

    /// Whether client URLs are `https://`.
    pub fn client_tls(&self) -> bool {
        self.spec.tls.as_ref().is_some_and(|t| t.client.is_some())
    }

    /// The Secret the operators read to connect to the client port; `None` without client TLS.
    pub fn operator_client_secret(&self) -> Option<OperatorClientSecret> {
        let client = self.spec.tls.as_ref()?.client.as_ref()?;
        let cluster = self.metadata.name.as_deref().unwrap_or_default();
        // Operator-managed and cert-manager alike: the operators' own client certificate.
        Some(match (&client.secret_ref, &client.operator_secret_ref) {
            (None, _) => OperatorClientSecret {
                name: operator_client_secret_name(cluster),
                present_certificate: true,
            },
            (Some(_), Some(operator)) => OperatorClientSecret {
                name: operator.name.clone(),
                present_certificate: true,
            },
            // The members' own Secret: its ca.crt only (its key is a server's, not ours).
            (Some(serving), None) => OperatorClientSecret {
                name: serving.name.clone(),
                present_certificate: false,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EtcdClusterSpec;

    fn cluster(tls: Option<TlsSpec>) -> EtcdCluster {
        let mut spec: EtcdClusterSpec = serde_json::from_value(serde_json::json!({"size": 3}))
            .unwrap_or_else(|e| panic!("{e}"));
        spec.tls = tls;
        EtcdCluster::new("main", spec)
    }

    #[test]
    fn operator_client_secret_per_source() {
        assert_eq!(cluster(None).operator_client_secret(), None);
        let peer_only = TlsSpec {
            peer: Some(PeerTls::default()),
            client: None,
        };
        assert!(cluster(Some(peer_only.clone())).peer_tls());
        assert!(!cluster(Some(peer_only.clone())).client_tls());
        assert_eq!(cluster(Some(peer_only)).operator_client_secret(), None);
        let managed = TlsSpec {
            peer: None,
            client: Some(ClientTls::default()),
        };
        assert_eq!(
            cluster(Some(managed)).operator_client_secret(),
            Some(OperatorClientSecret {
                name: "main-operator-client-tls".into(),
                present_certificate: true
            })
        );
        let reference = |name: &str| {
            Some(LocalObjectReference {
                name: name.to_owned(),
            })
        };
        let provided = TlsSpec {
            peer: None,
            client: Some(ClientTls {
                secret_ref: reference("serving"),
                operator_secret_ref: reference("ops"),
                cert_manager: None,
                client_cert_auth: true,
            }),
        };
        assert_eq!(
            cluster(Some(provided)).operator_client_secret(),
            Some(OperatorClientSecret {
                name: "ops".into(),
                present_certificate: true
            })
        );
        let ca_only = TlsSpec {
            peer: None,
            client: Some(ClientTls {
                secret_ref: reference("serving"),
                operator_secret_ref: None,
                cert_manager: None,
                client_cert_auth: false,
            }),
        };
        assert_eq!(
            cluster(Some(ca_only)).operator_client_secret(),
            Some(OperatorClientSecret {
                name: "serving".into(),
                present_certificate: false
            })
        );
    }
}
