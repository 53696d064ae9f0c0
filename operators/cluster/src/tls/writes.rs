//! The TLS writes of one pass, planned, as `etcd_member::plan::objects` plans the cluster's
//! Services: from the Secrets and cert-manager Certificates read this pass ([`TlsRead`]), the
//! Secrets to create or replace and the Certificates to create ([`TlsWrite`], in the order
//! they are made), and what the pass knows of TLS once they are made ([`Prepared`]).
//!
//! No I/O. The only thing the input does not decide is the key material of the certificates
//! it issues (fresh keys each time): the tests look at which writes are planned, never at key
//! bytes. [`super::prepare`] and [`super::ensure_member_secret`] read, plan and perform.
//!
//! The order of the writes is the order the decisions need: the CA first (it signs the rest),
//! the cert-manager Certificates, the operators' client certificate, the member certificates,
//! and a CA rotation step last (it moves on only once the members settled on the current CA).

use std::collections::BTreeMap;

use etcd_admin::ClientTls;
use etcd_api::EtcdCluster;
use etcd_api::tls::{
    ca_secret_name, member_secret_name, mounted_peer_secret_name, operator_client_secret_name,
    operator_managed, secret_keys,
};
use etcd_api::validation::FieldError;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::DynamicObject;
use time::{Duration, OffsetDateTime};

use super::{
    CA_ROTATION, CERTIFICATE_RENEWED, ClusterTls, Conformance, ManagedCa, MemberSecret, MemberSets,
    Prepared, ROTATE_CA_ANNOTATION, Renewal, TlsError, conformance, data_of, hosts_to_cover,
    issued_of, member_certs, new_ca_allowed, problems_text,
};
use crate::build;
use crate::certs::{self, CertProblem, Issued, Use};
use crate::naming::ClusterName;
use crate::plan::ca_rotation::{self, CaStep};

/// One write of a cluster's TLS objects.
#[derive(Clone, Debug)]
pub enum TlsWrite {
    /// Create a Secret the operator manages (its CA, a member's certificate, the operators'
    /// client certificate). If another writer created it first, the pass plans again from
    /// theirs.
    CreateSecret(Box<Secret>),
    /// Replace a Secret's data (a renewal, a new trust bundle, a CA rotation step) at the
    /// resourceVersion read: a concurrent change fails it (409), to be looked at again next
    /// reconcile.
    ReplaceSecret(Box<Secret>),
    /// Create a cert-manager Certificate (one that exists is the one wanted: `spec.tls` is
    /// immutable).
    CreateCertificate(Box<DynamicObject>),
}

impl TlsWrite {
    /// `create Secret main-ca`, `replace Secret main-0-tls`, `create Certificate
    /// main-0-peer-tls`: what it does to which object (logs, tests).
    pub fn summary(&self) -> String {
        match self {
            TlsWrite::CreateSecret(s) => format!("create Secret {}", s.name_any()),
            TlsWrite::ReplaceSecret(s) => format!("replace Secret {}", s.name_any()),
            TlsWrite::CreateCertificate(c) => format!("create Certificate {}", c.name_any()),
        }
    }
}

/// What was read this pass: Secrets and cert-manager Certificates by name.
#[derive(Clone, Debug, Default)]
pub struct TlsRead {
    /// Each Secret read, `None` when it does not exist.
    pub secrets: BTreeMap<String, Option<Secret>>,
    /// Each Certificate looked up: whether it exists.
    pub certificates: BTreeMap<String, bool>,
}

impl TlsRead {
    /// The Secret `name` as read; `None` when it does not exist (or was not read, which
    /// [`secrets_to_read`] rules out).
    pub fn secret(&self, name: &str) -> Option<&Secret> {
        self.secrets.get(name).and_then(Option::as_ref)
    }

    /// Whether the Certificate `name` exists.
    pub fn certificate_exists(&self, name: &str) -> bool {
        self.certificates.get(name).copied().unwrap_or(false)
    }
}

/// The Secrets [`plan`] looks at: the CA's, the Secrets you provide, the operators' client
/// certificate's and every member certificate in `members.with_volume` (operator-managed), the
/// Secrets cert-manager fills. `ca_missing`: the CA Secret was read and is missing; then the
/// member certificates of every known member too (a lost CA's certificates refuse a new one).
pub fn secrets_to_read(
    cluster: &EtcdCluster,
    members: &MemberSets<'_>,
    ca_missing: bool,
) -> Vec<String> {
    let Some(tls) = &cluster.spec.tls else {
        return vec![];
    };
    let names = crate::observe::cluster_name(cluster);
    let mut read = Vec::new();
    if etcd_api::tls::peer_copied(tls) {
        // Every known member's mounted copy (a new member's is planned once it is known).
        read.extend(members.known.iter().map(|m| mounted_peer_secret_name(m)));
    }
    if operator_managed(tls) {
        read.push(ca_secret_name(&names.name));
        if ca_missing {
            read.extend(members.known.iter().map(|m| member_secret_name(m)));
        }
        read.extend(members.with_volume.iter().map(|m| member_secret_name(m)));
    }
    read.extend(provided(tls, &[]).into_iter().map(|(_, name, _)| name));
    read.extend(
        crate::cert_manager::expected_for_members(cluster, &names, members.with_volume)
            .into_iter()
            .map(|e| e.name),
    );
    if tls.client.as_ref().is_some_and(|c| c.secret_ref.is_none()) {
        read.push(operator_client_secret_name(&names.name));
    }
    read.sort();
    read.dedup();
    read
}

/// The cert-manager Certificates [`plan`] looks at.
pub fn certificates_to_read(cluster: &EtcdCluster, members: &MemberSets<'_>) -> Vec<String> {
    let names = crate::observe::cluster_name(cluster);
    let mut read: Vec<String> =
        crate::cert_manager::expected_for_members(cluster, &names, members.with_volume)
            .into_iter()
            .map(|e| e.name)
            .collect();
    read.sort();
    read.dedup();
    read
}

/// The Secrets you provide, with the field that names each and what it must allow.
fn provided(tls: &etcd_api::TlsSpec, hosts: &[String]) -> Vec<(&'static str, String, Use)> {
    let mut provided = Vec::new();
    if let Some(peer) = &tls.peer
        && let Some(reference) = &peer.secret_ref
    {
        provided.push((
            "spec.tls.peer.secretRef",
            reference.name.clone(),
            Use::Peer(hosts.to_vec()),
        ));
    }
    if let Some(client_tls) = &tls.client {
        if let Some(reference) = &client_tls.secret_ref {
            provided.push((
                "spec.tls.client.secretRef",
                reference.name.clone(),
                Use::ClientServing(hosts.to_vec()),
            ));
        }
        if let Some(reference) = &client_tls.operator_secret_ref {
            provided.push((
                "spec.tls.client.operatorSecretRef",
                reference.name.clone(),
                Use::OperatorClient,
            ));
        }
    }
    provided
}

/// The writes of one pass and what TLS is once they are made.
#[derive(Debug)]
pub struct TlsPlan {
    /// In the order they are made.
    pub writes: Vec<TlsWrite>,
    /// What the reconcile goes on with once every write is made.
    pub prepared: Prepared,
}

/// Plans the TLS writes of one pass (see the module doc and [`super::prepare`], whose
/// decisions these are): the operator-managed CA (created only while no member holds a
/// certificate, [`new_ca_allowed`]), the Secrets you provide checked, the cert-manager
/// Certificates, the operators' client certificate, the certificate of every member in
/// `members.with_volume`, renewals when due (not for members whose Pod an older operator built,
/// see [`Renewal`]), and the next CA rotation step.
pub fn plan(
    cluster: &EtcdCluster,
    members: &MemberSets<'_>,
    read: &TlsRead,
    now: OffsetDateTime,
    leaf_validity: Duration,
) -> Result<TlsPlan, TlsError> {
    let MemberSets {
        known: known_members,
        with_volume,
        pods,
    } = *members;
    let Some(tls) = &cluster.spec.tls else {
        return Ok(TlsPlan {
            writes: vec![],
            prepared: Prepared::Ready(Box::default()),
        });
    };
    let names = crate::observe::cluster_name(cluster);
    let namespace = cluster.namespace().unwrap_or_default();
    let id = |name: &str| format!("{namespace}/{name}");
    let mut writes = Vec::new();
    let mut invalid = Vec::new();
    let refusal = |field: &str, name: &str, what: &str, problems: &[CertProblem]| FieldError {
        field: field.to_owned(),
        message: if problems.is_empty() {
            format!("Secret {}{what} does not exist", id(name))
        } else {
            format!("Secret {}{what} {}", id(name), problems_text(problems))
        },
    };

    // The operator-managed CA.
    let mut ca: Option<ManagedCa> = None;
    let mut ca_secret: Option<&Secret> = None;
    if operator_managed(tls) {
        let name = ca_secret_name(&names.name);
        match read.secret(&name) {
            Some(secret) => {
                let data = data_of(secret);
                let problems = certs::check_secret(&data, &Use::ManagedCa, now);
                if problems.is_empty() {
                    ca = ManagedCa::from_data(&data);
                    ca_secret = Some(secret);
                } else {
                    invalid.push(refusal(
                        "spec.tls",
                        &name,
                        " (the operator-managed CA)",
                        &problems,
                    ));
                }
            }
            None => {
                // Certificates a lost CA issued.
                let issued_secrets: Vec<String> = known_members
                    .iter()
                    .map(|m| member_secret_name(m))
                    .filter(|s| read.secret(s).is_some())
                    .collect();
                match new_ca_allowed(known_members, pods, &issued_secrets) {
                    Ok(()) => {
                        let issued = certs::new_ca(&names, now)?;
                        let secret = build::tls_secret(cluster, &name, &issued, None)?;
                        ca = ManagedCa::from_data(&data_of(&secret));
                        writes.push(TlsWrite::CreateSecret(Box::new(secret)));
                    }
                    Err(why) => invalid.push(FieldError {
                        field: "spec.tls".into(),
                        message: format!(
                            "Secret {} (the operator-managed CA) is missing while {why}: \
                             restore it (a new CA would cut the members off from each other \
                             and from the operator)",
                            id(&name)
                        ),
                    }),
                }
            }
        }
    }

    // Secrets you provide.
    let hosts = hosts_to_cover(&names, known_members, cluster.spec.size);
    let mut usable: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for (field, name, usage) in provided(tls, &hosts) {
        match read.secret(&name) {
            None => invalid.push(refusal(field, &name, "", &[])),
            Some(secret) => {
                let data = data_of(secret);
                let problems = certs::check_secret(&data, &usage, now);
                if problems.is_empty() {
                    usable.insert(name, data);
                } else {
                    invalid.push(refusal(field, &name, "", &problems));
                }
            }
        }
    }
    // Certificates cert-manager issues (crate::cert_manager).
    let from_cert_manager = crate::cert_manager::plan(cluster, with_volume, read, now)?;
    writes.extend(from_cert_manager.writes);
    invalid.extend(from_cert_manager.refusals);
    let cert_manager_etcd = from_cert_manager.etcd;
    let expiries: BTreeMap<String, certs::Expiry> = usable
        .iter()
        .filter_map(|(name, data)| {
            let pem = String::from_utf8_lossy(data.get(secret_keys::CERT)?).into_owned();
            Some((name.clone(), certs::expiry_warning_time(&pem)?))
        })
        .chain(from_cert_manager.expiries)
        .collect();
    // The digest of every Secret a member mounts, whoever writes it: a change of any rolls
    // the members that mount it.
    let mut secret_digests: BTreeMap<String, String> = usable
        .iter()
        .map(|(name, data)| (name.clone(), build::secret_digest(data)))
        .chain(from_cert_manager.digests)
        .collect();
    let mut peer_trusts: BTreeMap<String, crate::trust::PeerTrust> = usable
        .iter()
        .filter_map(|(name, data)| Some((name.clone(), crate::trust::PeerTrust::of_secret(data)?)))
        .chain(from_cert_manager.trusts)
        .collect();
    let mut public_tls: BTreeMap<String, crate::trust::PublicTls> = usable
        .iter()
        .filter_map(|(name, data)| Some((name.clone(), crate::trust::PublicTls::of_secret(data)?)))
        .chain(from_cert_manager.public)
        .collect();
    let mut changes = Vec::new();
    // The operator-managed certificates as this pass leaves them: the next renewal is theirs.
    let mut managed_certs: Vec<String> = Vec::new();
    // How the operator itself connects.
    let mut etcd = None;
    if let Some(operator) = cluster.operator_client_secret() {
        let managed = tls.client.as_ref().is_some_and(|c| c.secret_ref.is_none());
        let cert_manager = tls
            .client
            .as_ref()
            .is_some_and(|c| c.cert_manager.is_some());
        if cert_manager {
            etcd = cert_manager_etcd;
        } else if managed {
            if let Some(ca) = &ca {
                let name = operator_client_secret_name(&names.name);
                let planned =
                    operator_client(cluster, &names, ca, read.secret(&name), now, leaf_validity)?;
                writes.extend(planned.write);
                changes.extend(planned.change);
                managed_certs.extend(issued_of(&planned.data).map(|i| i.cert_pem));
                public_tls
                    .extend(crate::trust::PublicTls::of_secret(&planned.data).map(|p| (name, p)));
                etcd = ClientTls::from_secret_data(&planned.data, true).ok();
            }
        } else if let Some(data) = usable.get(&operator.name) {
            etcd = ClientTls::from_secret_data(data, operator.present_certificate).ok();
        }
    }
    if !invalid.is_empty() {
        return Ok(TlsPlan {
            writes,
            prepared: Prepared::Invalid(invalid),
        });
    }
    if let Some(ca) = &ca {
        for member in with_volume {
            // A Pod an older operator built (no certificate hash) is adopted first, so the
            // change that follows rolls it.
            let unadopted = pods
                .get(member)
                .is_some_and(|p| !p.annotations().contains_key(build::ANNOTATION_TLS_HASH));
            let renewal = if unadopted {
                Renewal::Never
            } else {
                Renewal::WhenDue(leaf_validity)
            };
            let existing = read.secret(&member_secret_name(member));
            let (write, (name, data, change)) =
                member_secret(cluster, ca, member, existing, now, renewal)?;
            writes.extend(write);
            changes.extend(change);
            managed_certs.extend(issued_of(&data).map(|i| i.cert_pem));
            if let Some(trust) = crate::trust::PeerTrust::of_secret(&data) {
                peer_trusts.insert(name.clone(), trust);
            }
            if let Some(public) = crate::trust::PublicTls::of_secret(&data) {
                public_tls.insert(name.clone(), public);
            }
            secret_digests.insert(name, build::secret_digest(&data));
        }
    }
    // The mounted copies of peer certificates the operator does not issue
    // (crate::plan::ca_overlap): a source moved to a new CA reaches the members with an overlap.
    if etcd_api::tls::peer_copied(tls) {
        let sources: BTreeMap<String, BTreeMap<String, Vec<u8>>> = known_members
            .iter()
            .filter_map(|member| {
                let name = crate::overlap::source_secret_name(cluster, member)?;
                // Usable sources only: those have a digest (checked above).
                if !secret_digests.contains_key(&name) {
                    return None;
                }
                Some((member.clone(), data_of(read.secret(&name)?)))
            })
            .collect();
        let copies: BTreeMap<String, &Secret> = known_members
            .iter()
            .filter_map(|m| Some((m.clone(), read.secret(&mounted_peer_secret_name(m))?)))
            .collect();
        let planned = crate::overlap::plan_copies(cluster, known_members, pods, &sources, &copies)?;
        writes.extend(planned.writes);
        changes.extend(
            crate::overlap::overlap_note(&planned.plan)
                .map(|note| (crate::overlap::PEER_CA_OVERLAP, note)),
        );
        for (name, data) in planned.data {
            match crate::trust::PeerTrust::of_secret(&data) {
                Some(trust) => peer_trusts.insert(name.clone(), trust),
                None => peer_trusts.remove(&name),
            };
            secret_digests.insert(name, build::secret_digest(&data));
        }
    }
    // The next CA rotation step, once the members rolled onto the current one.
    if let (Some(managed), Some(secret)) = (&ca, ca_secret) {
        let request = cluster
            .annotations()
            .get(ROTATE_CA_ANNOTATION)
            .filter(|v| !v.is_empty());
        let wanted = request.is_some_and(|r| managed.served_request.as_ref() != Some(r))
            || certs::renewal_due(&managed.issuing.cert_pem, now);
        let settled = ca_rotation::members_settled(&member_certs(cluster, pods, &secret_digests));
        let step = ca_rotation::next_ca_step(managed.phase(), wanted, settled);
        if let Some(advanced) = managed.advanced(
            step,
            || certs::new_ca(&names, now),
            request.map(String::as_str),
        )? {
            writes.push(TlsWrite::ReplaceSecret(Box::new(replacement(
                cluster,
                secret,
                &advanced.issuing,
                None,
                Some(advanced.to_data()),
            )?)));
            changes.push((
                CA_ROTATION,
                match step {
                    CaStep::StartRotation => format!(
                        "CA rotation started: a new CA is trusted next to the current one \
                         (Secret {}); members roll onto the bundle one at a time",
                        id(&secret.name_any())
                    ),
                    CaStep::SwitchIssuer => "CA rotation: every member trusts both CAs; member \
                        and client certificates are re-issued by the new CA, members roll"
                        .to_owned(),
                    _ => "CA rotation: every member holds a certificate of the new CA; the \
                          previous CA is no longer trusted, members roll a last time"
                        .to_owned(),
                },
            ));
        }
    }
    // The CA's own renewal is a rotation, started by a pass that finds it due.
    managed_certs.extend(ca.as_ref().map(|ca| ca.issuing.cert_pem.clone()));
    let next_renewal = certs::next_renewal(managed_certs.iter().map(String::as_str), now);
    Ok(TlsPlan {
        writes,
        prepared: Prepared::Ready(Box::new(ClusterTls {
            etcd,
            ca,
            leaf_validity,
            secret_digests,
            peer_trusts,
            public_tls,
            changes,
            next_renewal,
            expiries,
        })),
    })
}

/// `old` with `issued` and `ca_pem` as its data (a renewal, a new trust bundle), or with `data`
/// (the CA Secret), at `old`'s resourceVersion: a concurrent writer's change fails the
/// replace (409), to be looked at again next reconcile.
pub(crate) fn replacement(
    cluster: &EtcdCluster,
    old: &Secret,
    issued: &Issued,
    ca_pem: Option<&str>,
    data: Option<BTreeMap<String, ByteString>>,
) -> Result<Secret, TlsError> {
    let mut secret = build::tls_secret(cluster, &old.name_any(), issued, ca_pem)?;
    if data.is_some() {
        secret.data = data;
    }
    secret.metadata.resource_version = old.metadata.resource_version.clone();
    Ok(secret)
}

/// A Secret as this pass leaves it: the write that makes it so, if any, and its data then.
fn as_written(
    cluster: &EtcdCluster,
    name: &str,
    existing: Option<&Secret>,
    issued: &Issued,
    trust: Option<&str>,
) -> Result<(TlsWrite, BTreeMap<String, Vec<u8>>), TlsError> {
    Ok(match existing {
        Some(old) => {
            let secret = replacement(cluster, old, issued, trust, None)?;
            let data = data_of(&secret);
            (TlsWrite::ReplaceSecret(Box::new(secret)), data)
        }
        None => {
            let secret = build::tls_secret(cluster, name, issued, trust)?;
            let data = data_of(&secret);
            (TlsWrite::CreateSecret(Box::new(secret)), data)
        }
    })
}

/// `secret` with the certificate it holds and `trust` as its `ca.crt` (a new trust bundle).
/// `id`: its namespace/name, for the error.
fn with_trust(
    cluster: &EtcdCluster,
    id: &str,
    secret: &Secret,
    trust: Option<&str>,
) -> Result<(TlsWrite, BTreeMap<String, Vec<u8>>), TlsError> {
    let same = issued_of(&data_of(secret)).ok_or_else(|| TlsError::BadManagedSecret {
        name: id.to_owned(),
        problems: "has no tls.crt or tls.key".into(),
    })?;
    as_written(cluster, &secret.name_any(), Some(secret), &same, trust)
}

/// The operators' client certificate as this pass leaves it.
struct OperatorClient {
    write: Option<TlsWrite>,
    data: BTreeMap<String, Vec<u8>>,
    change: Option<(&'static str, String)>,
}

/// The operators' client certificate: created when missing, re-issued when due or of another
/// CA, given the current trust bundle when only that differs; then checked.
fn operator_client(
    cluster: &EtcdCluster,
    names: &ClusterName,
    ca: &ManagedCa,
    existing: Option<&Secret>,
    now: OffsetDateTime,
    validity: Duration,
) -> Result<OperatorClient, TlsError> {
    let name = operator_client_secret_name(&names.name);
    let id = format!("{}/{name}", names.namespace);
    let trust = Some(ca.trust_pem.as_str());
    // The operators read it on every call: changing it needs no restart of anything.
    let (write, data, change) = match existing {
        Some(secret) => match conformance(&data_of(secret), ca, now) {
            Conformance::Fine => (None, data_of(secret), None),
            Conformance::Reissue => {
                let issued = certs::issue_operator_client(&ca.issuing, names, now, validity)?;
                let (write, data) = as_written(cluster, &name, existing, &issued, trust)?;
                let change = (
                    CERTIFICATE_RENEWED,
                    format!("Issued a new operators' client certificate in Secret {id}"),
                );
                (Some(write), data, Some(change))
            }
            Conformance::NewTrust => {
                let (write, data) = with_trust(cluster, &id, secret, trust)?;
                (Some(write), data, None)
            }
        },
        None => {
            let issued = certs::issue_operator_client(&ca.issuing, names, now, validity)?;
            let (write, data) = as_written(cluster, &name, None, &issued, trust)?;
            (Some(write), data, None)
        }
    };
    let problems = certs::check_secret(&data, &Use::OperatorClient, now);
    if !problems.is_empty() {
        return Err(TlsError::BadManagedSecret {
            name: id,
            problems: problems_text(&problems),
        });
    }
    Ok(OperatorClient {
        write,
        data,
        change,
    })
}

/// `member`'s certificate Secret: created when missing (before its Pod, which mounts it),
/// renewed when `renewal` allows and it is due or of another CA, given the current trust
/// bundle when only that differs; then checked. The write, and the Secret's name, data and the
/// change made to it as this pass leaves it.
pub fn member_secret(
    cluster: &EtcdCluster,
    ca: &ManagedCa,
    member: &str,
    existing: Option<&Secret>,
    now: OffsetDateTime,
    renewal: Renewal,
) -> Result<(Option<TlsWrite>, MemberSecret), TlsError> {
    let names = crate::observe::cluster_name(cluster);
    let name = member_secret_name(member);
    let id = format!("{}/{name}", names.namespace);
    let trust = Some(ca.trust_pem.as_str());
    let (write, data, change) = match (existing, renewal) {
        (Some(secret), Renewal::Never) => (None, data_of(secret), None),
        (Some(secret), Renewal::WhenDue(validity)) => {
            match conformance(&data_of(secret), ca, now) {
                Conformance::Fine => (None, data_of(secret), None),
                Conformance::Reissue => {
                    let issued = certs::issue_member(&ca.issuing, &names, member, now, validity)?;
                    let (write, data) = as_written(cluster, &name, existing, &issued, trust)?;
                    let change = (
                        CERTIFICATE_RENEWED,
                        format!(
                            "Issued a new certificate for member {member} in Secret {id}; the \
                         member rolls onto it when quorum allows"
                        ),
                    );
                    (Some(write), data, Some(change))
                }
                Conformance::NewTrust => {
                    let (write, data) = with_trust(cluster, &id, secret, trust)?;
                    (Some(write), data, None)
                }
            }
        }
        (None, renewal) => {
            let validity = match renewal {
                Renewal::WhenDue(validity) => validity,
                Renewal::Never => certs::LEAF_VALIDITY,
            };
            let issued = certs::issue_member(&ca.issuing, &names, member, now, validity)?;
            let (write, data) = as_written(cluster, &name, None, &issued, trust)?;
            (Some(write), data, None)
        }
    };
    let problems = certs::check_secret(&data, &Use::Peer(vec![names.member_host(member)]), now);
    if problems.is_empty() {
        Ok((write, (name, data, change)))
    } else {
        Err(TlsError::BadManagedSecret {
            name: id,
            problems: problems_text(&problems),
        })
    }
}

#[cfg(test)]
mod tests;
