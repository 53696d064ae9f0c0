//! cert-manager as a certificate source (`spec.tls.{peer,client}.certManager`): the
//! `Certificate` objects (cert-manager.io/v1) the operator asks cert-manager for, and the wait
//! for the Secrets cert-manager fills.
//!
//! - One `Certificate` per member and side, `<member>-<side>-tls`, writing the Secret of the same
//!   name: the DNS and IP SANs of an operator-managed member certificate
//!   ([`crate::certs::member_dns_names`], [`crate::certs::member_ips`]), usages server auth and
//!   client auth (a member serves its port and, as a peer, dials the others).
//! - With client-side cert-manager, one client certificate for the operators,
//!   `<cluster>-operator-client-tls` (CN `etcd-operator`, usage client auth): the Secret name the
//!   backup and restore operators already read ([`etcd_api::EtcdCluster::operator_client_secret`]).
//!
//! The Certificates are owned by the EtcdCluster (they go with it). The Secrets are cert-manager's:
//! it owns them only with its `--enable-certificate-owner-ref` flag, so they may outlive the
//! cluster.
//!
//! A Secret cert-manager has not filled yet is waited for ([`TlsError::WaitingForCertManager`],
//! naming the Certificate); a filled one is checked like any certificate
//! ([`crate::certs::check_secret`]) before a member Pod that mounts it is created.
//!
//! The builders and the decisions ([`plan`], [`member_ready`]: which Certificates to create,
//! what the Secrets say) are pure; [`ensure_member_ready`] and [`crate::tls::prepare`] do the
//! I/O (get Certificates and Secrets, create the Certificates planned).

use std::collections::BTreeMap;

use etcd_admin::ClientTls;
use etcd_api::EtcdCluster;
use etcd_api::IssuerReference;
use etcd_api::tls::{Side, cert_manager_member_secret_name, operator_client_secret_name};
use etcd_api::validation::FieldError;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;
use time::OffsetDateTime;

use crate::build::{self, BuildError};
use crate::certs::{self, CertProblem, OPERATOR_CLIENT_CN, Use};
use crate::naming::ClusterName;
use crate::tls::{TlsError, TlsRead, TlsWrite, problems_text};

/// cert-manager's API group.
pub const GROUP: &str = "cert-manager.io";
/// The version of cert-manager's API the operator writes.
pub const VERSION: &str = "v1";
/// Kind of the objects the operator creates.
pub const KIND: &str = "Certificate";
/// Default kind of an `issuerRef` without one (as cert-manager defaults it).
pub const DEFAULT_ISSUER_KIND: &str = "Issuer";

/// Usages of a member certificate, in cert-manager's spelling.
pub const MEMBER_USAGES: [&str; 4] = [
    "server auth",
    "client auth",
    "digital signature",
    "key encipherment",
];
/// Usages of the operators' client certificate.
pub const OPERATOR_CLIENT_USAGES: [&str; 3] =
    ["client auth", "digital signature", "key encipherment"];

/// The `Certificate` resource, for a dynamic client.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, VERSION, KIND))
}

fn issuer_json(issuer: &IssuerReference) -> serde_json::Value {
    json!({
        "name": issuer.name,
        "kind": issuer.kind.as_deref().unwrap_or(DEFAULT_ISSUER_KIND),
        "group": issuer.group.as_deref().unwrap_or(GROUP),
    })
}

fn certificate(
    cluster: &EtcdCluster,
    name: &str,
    spec: serde_json::Value,
) -> Result<DynamicObject, BuildError> {
    let mut object = DynamicObject::new(name, &api_resource()).data(json!({ "spec": spec }));
    object.metadata = build::owned_meta(cluster, name)?;
    Ok(object)
}

/// The `Certificate` of `member`'s certificate for `side`, issued by `issuer`.
pub fn member_certificate(
    cluster: &EtcdCluster,
    names: &ClusterName,
    member: &str,
    side: Side,
    issuer: &IssuerReference,
) -> Result<DynamicObject, BuildError> {
    let name = cert_manager_member_secret_name(member, side);
    let ips: Vec<String> = certs::member_ips()
        .iter()
        .map(ToString::to_string)
        .collect();
    certificate(
        cluster,
        &name,
        json!({
            "secretName": name,
            "secretTemplate": { "labels": build::cluster_labels(cluster) },
            "commonName": member,
            "dnsNames": certs::member_dns_names(names, member),
            "ipAddresses": ips,
            "usages": MEMBER_USAGES,
            "privateKey": { "algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always" },
            "issuerRef": issuer_json(issuer),
        }),
    )
}

/// The `Certificate` of the operators' client certificate, issued by the client side's issuer.
pub fn operator_client_certificate(
    cluster: &EtcdCluster,
    names: &ClusterName,
    issuer: &IssuerReference,
) -> Result<DynamicObject, BuildError> {
    let name = operator_client_secret_name(&names.name);
    certificate(
        cluster,
        &name,
        json!({
            "secretName": name,
            "secretTemplate": { "labels": build::cluster_labels(cluster) },
            "commonName": OPERATOR_CLIENT_CN,
            "usages": OPERATOR_CLIENT_USAGES,
            "privateKey": { "algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always" },
            "issuerRef": issuer_json(issuer),
        }),
    )
}

/// A Secret cert-manager fills, with what it must hold and the field that asked for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The `Certificate` (and Secret) name.
    pub name: String,
    /// `spec.tls.peer.certManager` or `spec.tls.client.certManager`.
    pub field: &'static str,
    /// What the certificate must allow.
    pub usage: Use,
    /// The member and side it is for; `None` for the operators' client certificate.
    pub member: Option<(String, Side)>,
    /// The side's issuer.
    pub issuer: IssuerReference,
}

fn field(side: Side) -> &'static str {
    match side {
        Side::Peer => "spec.tls.peer.certManager",
        Side::Client => "spec.tls.client.certManager",
    }
}

/// The Secrets `member` needs from cert-manager before its Pod starts: one per cert-manager
/// side and, with client-side cert-manager, the operators' client certificate (without it the
/// operator could not reach the member it is about to start).
pub fn expected_for_member(
    cluster: &EtcdCluster,
    names: &ClusterName,
    member: &str,
) -> Vec<Expected> {
    let Some(tls) = &cluster.spec.tls else {
        return vec![];
    };
    let host = vec![names.member_host(member)];
    let mut expected = Vec::new();
    for (side, issuer) in tls.cert_manager_sides() {
        expected.push(Expected {
            name: cert_manager_member_secret_name(member, side),
            field: field(side),
            usage: match side {
                Side::Peer => Use::Peer(host.clone()),
                Side::Client => Use::ClientServing(host.clone()),
            },
            member: Some((member.to_owned(), side)),
            issuer: issuer.clone(),
        });
    }
    expected.extend(expected_operator_client(cluster, names));
    expected
}

/// The operators' client certificate, when cert-manager issues the client side.
pub fn expected_operator_client(cluster: &EtcdCluster, names: &ClusterName) -> Option<Expected> {
    let tls = cluster.spec.tls.as_ref()?;
    let (_, issuer) = tls
        .cert_manager_sides()
        .into_iter()
        .find(|(side, _)| *side == Side::Client)?;
    Some(Expected {
        name: operator_client_secret_name(&names.name),
        field: field(Side::Client),
        usage: Use::OperatorClient,
        member: None,
        issuer: issuer.clone(),
    })
}

/// What a Secret cert-manager fills says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Issued {
    /// Not there, or cert-manager has not written the certificate yet.
    Pending,
    /// Filled and usable.
    Usable(BTreeMap<String, Vec<u8>>),
    /// Filled but unusable.
    Unusable(Vec<CertProblem>),
}

impl Issued {
    /// The [`build::secret_digest`] of a usable Secret: recorded on the member Pods that mount
    /// it (`etcd.operator.rs/tls-hash`), so a certificate cert-manager renews in place rolls
    /// them, one at a time, like any change of a member's Secrets. `None` otherwise: while a
    /// Secret is pending or unusable its members' hash is unknown and nobody rolls for it.
    pub fn digest(&self) -> Option<String> {
        match self {
            Issued::Usable(data) => Some(build::secret_digest(data)),
            Issued::Pending | Issued::Unusable(_) => None,
        }
    }
}

/// Judges a Secret cert-manager fills (pure).
pub fn judge(secret: Option<&Secret>, usage: &Use, now: OffsetDateTime) -> Issued {
    use etcd_api::tls::secret_keys::{CERT, KEY};
    let data: BTreeMap<String, Vec<u8>> = secret
        .and_then(|s| s.data.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    let filled = |key: &str| data.get(key).is_some_and(|v| !v.is_empty());
    if !filled(CERT) || !filled(KEY) {
        return Issued::Pending;
    }
    let problems = certs::check_secret(&data, usage, now);
    if problems.is_empty() {
        Issued::Usable(data)
    } else {
        Issued::Unusable(problems)
    }
}

/// The `Certificate` `expected` needs.
fn certificate_for(
    cluster: &EtcdCluster,
    names: &ClusterName,
    expected: &Expected,
) -> Result<DynamicObject, BuildError> {
    match &expected.member {
        Some((member, side)) => member_certificate(cluster, names, member, *side, &expected.issuer),
        None => operator_client_certificate(cluster, names, &expected.issuer),
    }
}

/// Every Secret cert-manager fills that a pass looks at: the operators' client certificate
/// and the member certificates of `members`.
pub fn expected_for_members(
    cluster: &EtcdCluster,
    names: &ClusterName,
    members: &[String],
) -> Vec<Expected> {
    let mut expected: Vec<Expected> = expected_operator_client(cluster, names)
        .into_iter()
        .collect();
    for member in members {
        expected.extend(
            expected_for_member(cluster, names, member)
                .into_iter()
                .filter(|e| e.member.is_some()),
        );
    }
    expected
}

/// What [`member_ready`] decided.
#[derive(Debug)]
pub struct MemberReady {
    /// The Certificates to create (those missing).
    pub writes: Vec<TlsWrite>,
    /// The data of the Secrets the member mounts, by Secret name (for the Pod's certificate
    /// hash, [`Issued::digest`], and its peer trust record, [`crate::trust::PeerTrust`]), or
    /// why its Pod waits: a Secret cert-manager has not filled yet, or filled unusable.
    pub ready: Result<BTreeMap<String, BTreeMap<String, Vec<u8>>>, TlsError>,
}

/// Before `member`'s Pod is created: its Certificates (and the operators' one) exist, and
/// cert-manager filled their Secrets with usable certificates, as `read` says. Pure.
pub fn member_ready(
    cluster: &EtcdCluster,
    member: &str,
    read: &TlsRead,
    now: OffsetDateTime,
) -> Result<MemberReady, TlsError> {
    let names = crate::observe::cluster_name(cluster);
    let id = |name: &str| format!("{}/{name}", names.namespace);
    let expected = expected_for_member(cluster, &names, member);
    let mut writes = Vec::new();
    for wanted in &expected {
        if !read.certificate_exists(&wanted.name) {
            writes.push(TlsWrite::CreateCertificate(Box::new(certificate_for(
                cluster, &names, wanted,
            )?)));
        }
    }
    let ready = filled(&expected, read, now, &id);
    Ok(MemberReady { writes, ready })
}

/// The data of the Secrets `expected` names by Secret name, if cert-manager filled every
/// one with a usable certificate; else why not, for the first that is not.
fn filled(
    expected: &[Expected],
    read: &TlsRead,
    now: OffsetDateTime,
    id: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, BTreeMap<String, Vec<u8>>>, TlsError> {
    let mut usable = BTreeMap::new();
    for wanted in expected {
        match judge(read.secret(&wanted.name), &wanted.usage, now) {
            Issued::Usable(data) => {
                usable.insert(wanted.name.clone(), data);
            }
            Issued::Pending => {
                return Err(TlsError::WaitingForCertManager {
                    certificate: id(&wanted.name),
                    issuer: wanted.issuer.name.clone(),
                });
            }
            Issued::Unusable(problems) => {
                return Err(TlsError::BadIssuedSecret {
                    field: wanted.field,
                    name: id(&wanted.name),
                    problems: problems_text(&problems),
                });
            }
        }
    }
    Ok(usable)
}

/// Before `member`'s Pod is created: its Certificates (and the operators' one) exist and
/// cert-manager filled their Secrets with usable certificates. Returns their data by Secret
/// name, for the Pod's certificate hash ([`Issued::digest`]) and peer trust record. Nothing to
/// do without a cert-manager side. Reads, plans ([`member_ready`]) and creates the
/// Certificates missing.
pub async fn ensure_member_ready(
    client: &kube::Client,
    cluster: &EtcdCluster,
    member: &str,
    now: OffsetDateTime,
) -> Result<BTreeMap<String, BTreeMap<String, Vec<u8>>>, TlsError> {
    let names = crate::observe::cluster_name(cluster);
    let expected = expected_for_member(cluster, &names, member);
    if expected.is_empty() {
        return Ok(BTreeMap::new());
    }
    let io = crate::tls::Io::new(client, cluster);
    let wanted: Vec<String> = expected.into_iter().map(|e| e.name).collect();
    let mut read = TlsRead::default();
    io.read_into(&mut read, wanted.clone(), wanted).await?;
    let planned = member_ready(cluster, member, &read, now)?;
    io.perform(&planned.writes).await?;
    planned.ready
}

/// What [`plan`] found.
#[derive(Debug, Default)]
pub struct Planned {
    /// The Certificates to create (those missing).
    pub writes: Vec<TlsWrite>,
    /// How the operators reach the client port when cert-manager issues it (`None` while its
    /// Secret is pending: members cannot start before it is filled).
    pub etcd: Option<ClientTls>,
    /// A refusal for every filled Secret that is unusable.
    pub refusals: Vec<FieldError>,
    /// [`Issued::digest`] of every usable member Secret, by name.
    pub digests: BTreeMap<String, String>,
    /// [`crate::trust::PeerTrust`] of the same Secrets, by name.
    pub trusts: BTreeMap<String, crate::trust::PeerTrust>,
    /// [`crate::trust::PublicTls`] of every usable Secret (the operators' client one too).
    pub public: BTreeMap<String, crate::trust::PublicTls>,
    /// When each usable Secret's certificate ends (cert-manager renews them, not the operator:
    /// one that nears its end is reported, [`crate::certs::expiry_warning_time`]).
    pub expiries: BTreeMap<String, crate::certs::Expiry>,
}

/// Each reconcile, before anything acts: the Certificates of every member with a Pod or PVC in
/// `with_volume` (a restore's seed gets its certificate this way) and the operators' client
/// Certificate exist; their Secrets are judged as `read` found them (cert-manager renews them
/// in place: a renewal shows as a new digest). Pure.
pub fn plan(
    cluster: &EtcdCluster,
    with_volume: &[String],
    read: &TlsRead,
    now: OffsetDateTime,
) -> Result<Planned, TlsError> {
    let names = crate::observe::cluster_name(cluster);
    let id = |name: &str| format!("{}/{name}", names.namespace);
    let mut planned = Planned::default();
    for wanted in expected_for_members(cluster, &names, with_volume) {
        if !read.certificate_exists(&wanted.name) {
            planned
                .writes
                .push(TlsWrite::CreateCertificate(Box::new(certificate_for(
                    cluster, &names, &wanted,
                )?)));
        }
        let issued = judge(read.secret(&wanted.name), &wanted.usage, now);
        if let Issued::Usable(data) = &issued
            && let Some(pem) = data.get(etcd_api::tls::secret_keys::CERT)
            && let Some(expiry) = crate::certs::expiry_warning_time(&String::from_utf8_lossy(pem))
        {
            planned.expiries.insert(wanted.name.clone(), expiry);
        }
        if let Issued::Usable(data) = &issued
            && let Some(trust) = crate::trust::PeerTrust::of_secret(data)
        {
            planned.trusts.insert(wanted.name.clone(), trust);
        }
        if let Issued::Usable(data) = &issued
            && let Some(public) = crate::trust::PublicTls::of_secret(data)
        {
            planned.public.insert(wanted.name.clone(), public);
        }
        match issued {
            Issued::Usable(data) if wanted.member.is_none() => {
                planned.etcd = ClientTls::from_secret_data(&data, true).ok();
            }
            Issued::Usable(data) => {
                planned
                    .digests
                    .insert(wanted.name.clone(), build::secret_digest(&data));
            }
            Issued::Pending => {}
            Issued::Unusable(problems) => planned.refusals.push(FieldError {
                field: wanted.field.to_owned(),
                message: format!(
                    "Secret {} (issued by cert-manager) {}",
                    id(&wanted.name),
                    problems_text(&problems)
                ),
            }),
        }
    }
    Ok(planned)
}

#[cfg(test)]
mod tests;
