//! Peer trust across a change of CA in the certificate Secrets members mount. Pure.
//!
//! Members verify each other on the peer port with the CAs of the `ca.crt` they were started
//! with (etcd reads its trusted CA file only at start), and present the certificate of their
//! peer Secret. A member (re)started on a Secret whose certificate comes from a CA its running
//! peers do not trust, or whose `ca.crt` does not trust theirs, is cut off from them: it never
//! becomes healthy, the roll stops there with one voter down, and any other restart of an old
//! member (a crash, an eviction, the next renewal) cuts off one more: quorum is lost. This is
//! what a CA change without an overlap does: cert-manager renewing from an issuer whose CA was
//! replaced, or a Secret you provide updated to a certificate and `ca.crt` of a new CA at once.
//!
//! The operator-managed CA is changed with an overlap by the operator itself
//! ([`crate::plan::ca_rotation`]: trust both, then issue from the new, then drop the old), and
//! every step passes the check below. For the other sources on the peer port the members
//! mount the operator's copies (`<member>-peer-mounted`, [`crate::overlap`],
//! [`crate::plan::ca_overlap`]), which carry a one-step change of the source through the same
//! overlap: this check judges the copies and is the guard behind them. On the client port the
//! overlap is in the Secrets you provide or cert-manager fills: the operator checks it.
//!
//! Every member Pod records, when it is created, what its peer Secret held (annotation
//! [`ANNOTATION_PEER_TRUST`]: the fingerprint of the CA that signed its certificate and those of
//! the CAs in its `ca.crt`). Before a member is rolled onto changed Secrets or its Pod is
//! created, [`peer_trust_refusals`] checks its peer Secret as it is now against every running
//! member's record, both ways; a mismatch refuses the cluster (condition and Warning event
//! naming the Secret, the members and the CAs) before any member restarts.

use std::collections::{BTreeMap, BTreeSet};

use etcd_api::EtcdCluster;
use etcd_api::tls::secret_keys;
use etcd_api::validation::FieldError;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use sha2::{Digest, Sha256};
use x509_parser::pem::Pem;

use crate::build;

/// Annotation on member Pods of peer-TLS clusters: [`PeerTrust::annotation`] of the peer
/// certificate Secret the Pod mounted when it was created.
pub const ANNOTATION_PEER_TRUST: &str = "etcd.operator.rs/peer-trust";

/// Of a peer certificate Secret: the CA that signed its certificate and the CAs of its
/// `ca.crt`, each by [`fingerprint`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerTrust {
    /// The CA of `ca.crt` that signed `tls.crt`.
    pub issuer: String,
    /// Every CA of `ca.crt`.
    pub trusted: BTreeSet<String>,
}

/// A CA certificate's short name: the first 16 hex digits of the SHA-256 of its DER.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn certificates(pem: &[u8]) -> Vec<Pem> {
    Pem::iter_from_buffer(pem)
        .filter_map(Result::ok)
        .filter(|p| p.label == "CERTIFICATE")
        .collect()
}

impl PeerTrust {
    /// What a certificate Secret's data holds; `None` when `tls.crt` or `ca.crt` does not parse
    /// or no CA of `ca.crt` signed the certificate (refused by the Secret checks anyway).
    pub fn of_secret(data: &BTreeMap<String, Vec<u8>>) -> Option<PeerTrust> {
        let leaves = certificates(data.get(secret_keys::CERT)?);
        let leaf = leaves.first()?.parse_x509().ok()?;
        let cas = certificates(data.get(secret_keys::CA)?);
        let issuer = cas.iter().find(|ca| {
            ca.parse_x509()
                .is_ok_and(|ca| leaf.verify_signature(Some(ca.public_key())).is_ok())
        })?;
        Some(PeerTrust {
            issuer: fingerprint(&issuer.contents),
            trusted: cas.iter().map(|ca| fingerprint(&ca.contents)).collect(),
        })
    }

    /// The annotation value: `issuer=<fingerprint> trusts=<fingerprint>,<fingerprint>`.
    pub fn annotation(&self) -> String {
        let trusted: Vec<&str> = self.trusted.iter().map(String::as_str).collect();
        format!("issuer={} trusts={}", self.issuer, trusted.join(","))
    }

    /// Reads [`Self::annotation`]; `None` when it is not one.
    pub fn parse(value: &str) -> Option<PeerTrust> {
        let mut issuer = None;
        let mut trusted = BTreeSet::new();
        for part in value.split_whitespace() {
            match part.split_once('=')? {
                ("issuer", fp) if !fp.is_empty() => issuer = Some(fp.to_owned()),
                ("trusts", fps) => {
                    trusted.extend(fps.split(',').filter(|f| !f.is_empty()).map(str::to_owned))
                }
                _ => return None,
            }
        }
        Some(PeerTrust {
            issuer: issuer?,
            trusted,
        })
    }
}

/// The Secret `member` mounts for the peer port, if the cluster has peer TLS.
pub fn peer_secret(cluster: &EtcdCluster, member: &str) -> Option<String> {
    build::member_tls_volumes(cluster, member)
        .into_iter()
        .find(|(volume, _, _)| *volume == build::PEER_TLS_VOLUME)
        .map(|(_, _, secret)| secret)
}

/// The [`ANNOTATION_PEER_TRUST`] value a Pod of `member` created now carries, from
/// `trusts` ([`PeerTrust::of_secret`] by Secret name); `None` without peer TLS or while its
/// peer Secret is unknown.
pub fn pod_annotation(
    cluster: &EtcdCluster,
    member: &str,
    trusts: &BTreeMap<String, PeerTrust>,
) -> Option<String> {
    let secret = peer_secret(cluster, member)?;
    trusts.get(&secret).map(PeerTrust::annotation)
}

/// The field that names the peer certificates' source.
fn peer_field(cluster: &EtcdCluster) -> &'static str {
    let peer = cluster.spec.tls.as_ref().and_then(|t| t.peer.as_ref());
    match peer {
        Some(p) if p.secret_ref.is_some() => "spec.tls.peer.secretRef",
        Some(p) if p.cert_manager.is_some() => "spec.tls.peer.certManager",
        _ => "spec.tls.peer",
    }
}

/// Checks the peer certificates members would start on against what the running members
/// trust and present, before any member restarts (module doc). `pods`: member Pods by member
/// name; `etcd_members`: the members etcd lists (a member without a Pod gets one next);
/// `trusts`: [`PeerTrust::of_secret`] of each Secret as it is now; `digests`: the Secrets'
/// [`build::secret_digest`], to read a Pod created before [`ANNOTATION_PEER_TRUST`] existed:
/// a Pod whose certificate hash is current runs on the Secrets as they are, any other is not
/// judged (it is rolled onto the current ones, which are checked).
///
/// Judged: each member whose next Pod would start on other peer certificates than its Pod
/// records (a roll pending), and each etcd member without a running Pod. Each is checked
/// against every other running Pod with a known record: the new certificate's CA must be
/// among the CAs that Pod trusts, and the CA of that Pod's certificate among the new `ca.crt`.
/// One refusal per Secret, naming the members.
pub fn peer_trust_refusals(
    cluster: &EtcdCluster,
    pods: &BTreeMap<String, Pod>,
    etcd_members: &[String],
    trusts: &BTreeMap<String, PeerTrust>,
    digests: &BTreeMap<String, String>,
) -> Vec<FieldError> {
    if !cluster.peer_tls() {
        return vec![];
    }
    let wanted = |member: &str| -> Option<(String, &PeerTrust)> {
        let secret = peer_secret(cluster, member)?;
        let trust = trusts.get(&secret)?;
        Some((secret, trust))
    };
    let running: BTreeMap<&str, &Pod> = pods
        .iter()
        .filter(|(_, pod)| pod.metadata.deletion_timestamp.is_none())
        .map(|(member, pod)| (member.as_str(), pod))
        .collect();
    // What each running Pod runs on, when known.
    let recorded: BTreeMap<&str, PeerTrust> = running
        .iter()
        .filter_map(|(member, pod)| {
            let annotations = pod.annotations();
            if let Some(value) = annotations.get(ANNOTATION_PEER_TRUST) {
                return Some((*member, PeerTrust::parse(value)?));
            }
            let current = build::member_tls_hash(cluster, member, digests)?;
            if annotations.get(build::ANNOTATION_TLS_HASH) == Some(&current) {
                Some((*member, wanted(member)?.1.clone()))
            } else {
                None
            }
        })
        .collect();
    let mut judged: Vec<&str> = running
        .keys()
        .copied()
        .filter(|member| {
            wanted(member).is_some_and(|(_, trust)| recorded.get(member) != Some(trust))
        })
        .collect();
    judged.extend(
        etcd_members
            .iter()
            .map(String::as_str)
            .filter(|member| !running.contains_key(member)),
    );
    // By Secret: a Secret you provide is every member's.
    let mut refused: BTreeMap<String, (PeerTrust, BTreeSet<&str>, BTreeSet<&str>)> =
        BTreeMap::new();
    for member in judged {
        let Some((secret, new)) = wanted(member) else {
            continue;
        };
        for (other, theirs) in recorded.iter().filter(|(other, _)| **other != member) {
            let not_accepting = !theirs.trusted.contains(&new.issuer);
            let not_trusted = !new.trusted.contains(&theirs.issuer);
            if not_accepting || not_trusted {
                let entry = refused
                    .entry(secret.clone())
                    .or_insert_with(|| (new.clone(), BTreeSet::new(), BTreeSet::new()));
                if not_accepting {
                    entry.1.insert(*other);
                }
                if not_trusted {
                    entry.2.insert(*other);
                }
            }
        }
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let list = |members: &BTreeSet<&str>| members.iter().copied().collect::<Vec<_>>().join(", ");
    refused
        .into_iter()
        .map(|(secret, (new, not_accepting, not_trusted))| {
            let mut why = Vec::new();
            if !not_accepting.is_empty() {
                why.push(format!(
                    "its certificate is signed by CA {} that members {} do not trust",
                    new.issuer,
                    list(&not_accepting)
                ));
            }
            if !not_trusted.is_empty() {
                why.push(format!(
                    "its ca.crt does not trust the CA of the certificates members {} present",
                    list(&not_trusted)
                ));
            }
            FieldError {
                field: peer_field(cluster).to_owned(),
                message: format!(
                    "Secret {namespace}/{secret}: {}: a member started on it would be cut off \
                     from its peers, so no member is restarted. A CA changes with an overlap, \
                     each step rolled onto every member before the next: ca.crt with both CAs, \
                     then certificates of the new CA, then ca.crt with the new CA alone; put \
                     back what the members run on until then",
                    why.join("; and ")
                ),
            }
        })
        .collect()
}

/// The public half of a certificate Secret (no key): its certificate and its `ca.crt`, PEM.
/// What the client-port check ([`client_trust_refusals`]) compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicTls {
    /// `tls.crt` (empty when the Secret has none).
    pub cert_pem: String,
    /// `ca.crt`.
    pub ca_pem: String,
}

impl PublicTls {
    /// `None` without a `ca.crt`.
    pub fn of_secret(data: &BTreeMap<String, Vec<u8>>) -> Option<PublicTls> {
        let text = |key: &str| {
            data.get(key)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        Some(PublicTls {
            cert_pem: text(secret_keys::CERT).unwrap_or_default(),
            ca_pem: text(secret_keys::CA)?,
        })
    }
}

/// Whether the first certificate of `cert_pem` is signed by one of the CAs of `bundle_pem`.
fn chains_to(cert_pem: &str, bundle_pem: &str) -> bool {
    let leaves = certificates(cert_pem.as_bytes());
    let Some(Ok(leaf)) = leaves.first().map(Pem::parse_x509) else {
        return false;
    };
    certificates(bundle_pem.as_bytes()).iter().any(|ca| {
        ca.parse_x509()
            .is_ok_and(|ca| leaf.verify_signature(Some(ca.public_key())).is_ok())
    })
}

/// The Secret `member` mounts for the client port, if the cluster has client TLS.
pub fn client_secret(cluster: &EtcdCluster, member: &str) -> Option<String> {
    build::member_tls_volumes(cluster, member)
        .into_iter()
        .find(|(volume, _, _)| *volume == build::CLIENT_TLS_VOLUME)
        .map(|(_, _, secret)| secret)
}

/// The field that names the client certificates' source.
fn client_field(cluster: &EtcdCluster) -> &'static str {
    let client = cluster.spec.tls.as_ref().and_then(|t| t.client.as_ref());
    match client {
        Some(c) if c.secret_ref.is_some() => "spec.tls.client.secretRef",
        Some(c) if c.cert_manager.is_some() => "spec.tls.client.certManager",
        _ => "spec.tls.client",
    }
}

/// The client port's side of [`peer_trust_refusals`]: a member (re)started on its client
/// certificate Secret as it is now must serve a certificate the operators (cluster, backup,
/// restore) verify with the `ca.crt` of their client Secret
/// ([`EtcdCluster::operator_client_secret`]), and, with `clientCertAuth`, trust (its
/// `ca.crt`, read at start like the peer one) the client certificate they present. Otherwise
/// the operators lose sight of every member rolled onto it: the roll stalls on a member it
/// cannot see become healthy, backups of it fail, and nothing says why. Refused before any
/// restart instead, naming the Secrets.
///
/// `public`: [`PublicTls`] of the member client Secrets and of the operators' client Secret,
/// by name, as they are now. Judged: each running member whose Pod was built from other
/// certificate Secrets than those of now ([`build::ANNOTATION_TLS_HASH`]: a roll pending),
/// and each etcd member without a running Pod. Clients other than the operators are not
/// known to the operator: their trust is the user's to keep.
pub fn client_trust_refusals(
    cluster: &EtcdCluster,
    pods: &BTreeMap<String, Pod>,
    etcd_members: &[String],
    public: &BTreeMap<String, PublicTls>,
    digests: &BTreeMap<String, String>,
) -> Vec<FieldError> {
    let Some(operators) = cluster.operator_client_secret() else {
        return vec![];
    };
    let Some(theirs) = public.get(&operators.name) else {
        // Missing or unusable: refused by the Secret checks.
        return vec![];
    };
    let client_cert_auth = cluster
        .spec
        .tls
        .as_ref()
        .and_then(|t| t.client.as_ref())
        .is_some_and(|c| c.client_cert_auth);
    let running: BTreeMap<&str, &Pod> = pods
        .iter()
        .filter(|(_, pod)| pod.metadata.deletion_timestamp.is_none())
        .map(|(member, pod)| (member.as_str(), pod))
        .collect();
    let roll_pending = |member: &str, pod: &Pod| {
        build::member_tls_hash(cluster, member, digests)
            .is_some_and(|now| pod.annotations().get(build::ANNOTATION_TLS_HASH) != Some(&now))
    };
    let judged = running
        .iter()
        .filter(|(member, pod)| roll_pending(member, pod))
        .map(|(member, _)| *member)
        .chain(
            etcd_members
                .iter()
                .map(String::as_str)
                .filter(|member| !running.contains_key(member)),
        );
    // By Secret: a Secret you provide is every member's.
    let mut refused: BTreeMap<String, (bool, bool, BTreeSet<&str>)> = BTreeMap::new();
    for member in judged {
        let Some(secret) = client_secret(cluster, member) else {
            continue;
        };
        let Some(mine) = public.get(&secret) else {
            continue;
        };
        let unverifiable = !chains_to(&mine.cert_pem, &theirs.ca_pem);
        let refusing = client_cert_auth
            && operators.present_certificate
            && !chains_to(&theirs.cert_pem, &mine.ca_pem);
        if unverifiable || refusing {
            let entry = refused
                .entry(secret)
                .or_insert((false, false, BTreeSet::new()));
            entry.0 |= unverifiable;
            entry.1 |= refusing;
            entry.2.insert(member);
        }
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let operators_id = format!("{namespace}/{}", operators.name);
    refused
        .into_iter()
        .map(|(secret, (unverifiable, refusing, members))| {
            let mut why = Vec::new();
            if unverifiable {
                why.push(format!(
                    "its certificate is not signed by a CA of the ca.crt the operators trust \
                     (Secret {operators_id}): they could not verify a member started on it"
                ));
            }
            if refusing {
                why.push(format!(
                    "its ca.crt does not trust the client certificate the operators present \
                     (Secret {operators_id}): a member started on it would refuse them"
                ));
            }
            let members: Vec<&str> = members.into_iter().collect();
            FieldError {
                field: client_field(cluster).to_owned(),
                message: format!(
                    "Secret {namespace}/{secret}: {}; so no member is restarted onto it \
                     (members {}). The operators' client Secret and the members' client \
                     Secrets change CA with an overlap: ca.crt with both CAs, then \
                     certificates of the new CA, then ca.crt with the new CA alone",
                    why.join("; and "),
                    members.join(", ")
                ),
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
