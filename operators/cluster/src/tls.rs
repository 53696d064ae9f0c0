//! The TLS material of a cluster, read before a reconcile acts and, for operator-managed
//! certificates, created: the CA Secret, the operators' client certificate Secret and (just
//! before a member's Pod is created) the member's certificate Secret. I/O: Secrets and
//! cert-manager Certificates, read, then written as [`writes::plan`] (pure) decides. What
//! makes a certificate usable is decided by [`crate::certs::check_secret`].
//!
//! Peer certificates the operator does not issue (a Secret you provide, cert-manager's) reach
//! the members through a copy per member that the same writes keep ([`crate::overlap`]): a
//! source moved to a new CA in one step reaches them with an overlap.
//!
//! A Secret that is missing or wrong is reported as a refusal naming the Secret and the problem
//! ([`Prepared::Invalid`]): nothing is created, deleted or restarted until it is fixed.
//!
//! Renewal: an operator-managed member or client certificate with less than a third of its
//! lifetime left ([`certs::renewal_due`]) is re-issued in place (same Secret, same key names).
//! The operator reads its own client certificate on every reconcile; a member gets its new
//! certificate through a roll: its Pod records [`build::member_tls_hash`] of the Secrets it
//! mounted, and the planner rolls, one at a time and quorum-gated, every member whose Secrets
//! changed since.
//!
//! CA rotation ([`crate::plan::ca_rotation`]): the CA Secret records the phase; each pass
//! brings every member Secret and the operators' client Secret to it (trust bundle in
//! `ca.crt`, certificate issued by the issuing CA), and advances the phase once every member
//! rolled onto the current one. Requested by setting the EtcdCluster annotation
//! [`ROTATE_CA_ANNOTATION`] to a new value, or by the CA nearing expiry.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use etcd_admin::ClientTls;
use etcd_api::EtcdCluster;
use etcd_api::tls::{ca_secret_name, member_secret_name, operator_managed, secret_keys};
use etcd_api::validation::FieldError;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, PostParams};
use time::{Duration, OffsetDateTime};

use crate::build;
use crate::certs::{self, CertProblem, IssueError, Issued};
use crate::naming::ClusterName;
use crate::plan::ca_rotation::{CaPhase, CaStep, MemberCerts};

pub mod writes;

pub use writes::{TlsRead, TlsWrite};

/// EtcdCluster annotation: set it to a new value (a date, a ticket) to rotate the
/// operator-managed CA. The value served last is recorded in the CA Secret; setting the same
/// value again does nothing.
pub const ROTATE_CA_ANNOTATION: &str = "etcd.operator.rs/rotate-ca";

/// Keys of the operator-managed CA Secret beyond `tls.crt`/`tls.key` (the issuing CA) and
/// `ca.crt` (the CAs members trust; absent in Secrets written before rotation existed: then
/// `tls.crt` alone).
mod ca_keys {
    /// During the `Trusting` phase: the next CA, trusted but not issuing yet.
    pub const NEXT_CERT: &str = "next.crt";
    /// Its key.
    pub const NEXT_KEY: &str = "next.key";
    /// During the `Issuing` phase: the previous CA, still trusted.
    pub const PREVIOUS_CERT: &str = "previous.crt";
    /// The value of [`super::ROTATE_CA_ANNOTATION`] last served.
    pub const ROTATION_REQUEST: &str = "rotation-request";
}

/// The operator-managed CA as its Secret records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedCa {
    /// The CA that issues member and client certificates.
    pub issuing: Issued,
    /// The CA certificates members and the operators trust (PEM bundle), written as every
    /// member's `ca.crt`.
    pub trust_pem: String,
    /// `Trusting`: the next CA.
    pub next: Option<Issued>,
    /// `Issuing`: the previous CA's certificate.
    pub previous_pem: Option<String>,
    /// The rotation request served last.
    pub served_request: Option<String>,
}

impl ManagedCa {
    /// A CA that was never rotated.
    pub fn new(issuing: Issued) -> Self {
        ManagedCa {
            trust_pem: issuing.cert_pem.clone(),
            issuing,
            next: None,
            previous_pem: None,
            served_request: None,
        }
    }

    fn from_data(data: &BTreeMap<String, Vec<u8>>) -> Option<Self> {
        let text = |key: &str| {
            data.get(key)
                .filter(|v| !v.is_empty())
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        let issuing = Issued {
            cert_pem: text(secret_keys::CERT)?,
            key_pem: text(secret_keys::KEY)?,
        };
        let next = match (text(ca_keys::NEXT_CERT), text(ca_keys::NEXT_KEY)) {
            (Some(cert_pem), Some(key_pem)) => Some(Issued { cert_pem, key_pem }),
            _ => None,
        };
        Some(ManagedCa {
            trust_pem: text(secret_keys::CA).unwrap_or_else(|| issuing.cert_pem.clone()),
            issuing,
            next,
            previous_pem: text(ca_keys::PREVIOUS_CERT),
            served_request: text(ca_keys::ROTATION_REQUEST),
        })
    }

    fn to_data(&self) -> BTreeMap<String, ByteString> {
        let mut data = BTreeMap::new();
        let mut put = |key: &str, value: &str| {
            data.insert(key.to_owned(), ByteString(value.as_bytes().to_vec()));
        };
        put(secret_keys::CERT, &self.issuing.cert_pem);
        put(secret_keys::KEY, &self.issuing.key_pem);
        put(secret_keys::CA, &self.trust_pem);
        if let Some(next) = &self.next {
            put(ca_keys::NEXT_CERT, &next.cert_pem);
            put(ca_keys::NEXT_KEY, &next.key_pem);
        }
        if let Some(previous) = &self.previous_pem {
            put(ca_keys::PREVIOUS_CERT, previous);
        }
        if let Some(request) = &self.served_request {
            put(ca_keys::ROTATION_REQUEST, request);
        }
        data
    }

    /// The rotation phase this Secret records.
    pub fn phase(&self) -> CaPhase {
        if self.next.is_some() {
            CaPhase::Trusting
        } else if self.previous_pem.is_some() {
            CaPhase::Issuing
        } else {
            CaPhase::Stable
        }
    }

    /// The CA after `step`; `next_ca` is the new CA [`CaStep::StartRotation`] introduces.
    /// `None` when the step does not apply to this phase.
    pub fn advanced(
        &self,
        step: CaStep,
        next_ca: impl FnOnce() -> Result<Issued, IssueError>,
        request: Option<&str>,
    ) -> Result<Option<ManagedCa>, IssueError> {
        let bundle = |a: &str, b: &str| format!("{}\n{}\n", a.trim_end(), b.trim_end());
        Ok(match (step, self.phase()) {
            (CaStep::StartRotation, CaPhase::Stable) => {
                let next = next_ca()?;
                Some(ManagedCa {
                    issuing: self.issuing.clone(),
                    trust_pem: bundle(&self.issuing.cert_pem, &next.cert_pem),
                    next: Some(next),
                    previous_pem: None,
                    served_request: request
                        .map(str::to_owned)
                        .or_else(|| self.served_request.clone()),
                })
            }
            (CaStep::SwitchIssuer, CaPhase::Trusting) => self.next.clone().map(|next| ManagedCa {
                trust_pem: bundle(&self.issuing.cert_pem, &next.cert_pem),
                previous_pem: Some(self.issuing.cert_pem.clone()),
                issuing: next,
                next: None,
                served_request: self.served_request.clone(),
            }),
            (CaStep::DropPrevious, CaPhase::Issuing) => Some(ManagedCa {
                trust_pem: self.issuing.cert_pem.clone(),
                issuing: self.issuing.clone(),
                next: None,
                previous_pem: None,
                served_request: self.served_request.clone(),
            }),
            _ => None,
        })
    }
}

/// What a reconcile needs of TLS.
#[derive(Clone, Debug, Default)]
pub struct ClusterTls {
    /// How the operator reaches `https://` client URLs; `None` for plain HTTP.
    pub etcd: Option<ClientTls>,
    /// The CA that issues member certificates, when some side is operator-managed.
    pub ca: Option<ManagedCa>,
    /// Lifetime of the certificates the operator issues (with [`Self::ca`]).
    pub leaf_validity: Duration,
    /// [`build::secret_digest`] of the certificate Secrets members mount, by Secret name: the
    /// Secrets you provide and the member Secrets of members with a Pod or PVC.
    pub secret_digests: BTreeMap<String, String>,
    /// [`crate::trust::PeerTrust`] of the same Secrets (those that parse), by Secret name: what
    /// a member started on each would present and trust on the peer port.
    pub peer_trusts: BTreeMap<String, crate::trust::PeerTrust>,
    /// [`crate::trust::PublicTls`] of the certificate Secrets members mount and of the
    /// operators' client Secret, by name: what the client-port check compares.
    pub public_tls: BTreeMap<String, crate::trust::PublicTls>,
    /// What this pass changed in the Secrets, as (event reason, note), for an event each.
    pub changes: Vec<(&'static str, String)>,
    /// When the next operator-managed certificate (member, operators' client, CA) becomes due
    /// for renewal ([`certs::next_renewal`]): the reconcile looks again by then at the latest.
    pub next_renewal: Option<OffsetDateTime>,
    /// The certificates the operator does not renew (Secrets you provide, Secrets cert-manager
    /// fills), by Secret name: when each ends and from when it is reported near its end.
    pub expiries: BTreeMap<String, certs::Expiry>,
}

/// Event reason of a renewed certificate.
pub const CERTIFICATE_RENEWED: &str = "CertificateRenewed";
/// Event reason (Warning) of a certificate the operator does not renew nearing its end.
pub const CERTIFICATE_NEAR_EXPIRY: &str = "CertificateNearExpiry";
/// Event reason of a CA rotation step.
pub const CA_ROTATION: &str = "CARotation";

/// The outcome of [`prepare`].
#[derive(Debug)]
pub enum Prepared {
    /// Usable (and for a cluster without TLS, empty).
    Ready(Box<ClusterTls>),
    /// A Secret is missing or unusable: each error names the field, the Secret and why.
    Invalid(Vec<FieldError>),
}

/// A Secret could not be read or written, or a certificate not issued.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// An API call on a Secret failed.
    #[error("{verb} Secret {name}: {source}")]
    Kube {
        /// get, create or replace.
        verb: &'static str,
        /// namespace/name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Issuing a certificate failed.
    #[error(transparent)]
    Issue(#[from] IssueError),
    /// A Secret the operator created earlier is unusable.
    #[error("Secret {name} {problems}")]
    BadManagedSecret {
        /// namespace/name.
        name: String,
        /// What is wrong.
        problems: String,
    },
    /// The cluster object cannot own its Secrets.
    #[error(transparent)]
    Build(#[from] build::BuildError),
    /// An API call on a cert-manager Certificate failed (is cert-manager installed?).
    #[error("{verb} cert-manager Certificate {name}: {source}")]
    Certificate {
        /// get or create.
        verb: &'static str,
        /// namespace/name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// cert-manager has not filled a Certificate's Secret yet: the member waits.
    #[error(
        "waiting for cert-manager to issue Certificate {certificate} (issuer {issuer}) before \
         the member Pod that mounts its Secret starts"
    )]
    WaitingForCertManager {
        /// namespace/name of the Certificate (and of its Secret).
        certificate: String,
        /// The issuer's name.
        issuer: String,
    },
    /// A member's mounted copy of its peer certificate ([`crate::overlap`]) is not written
    /// yet: its source is pending or unusable, or the running members do not trust its
    /// certificate's CA yet (they roll onto a bundle first). The member's Pod waits.
    #[error(
        "waiting for Secret {secret}, the mounted copy of member {member}'s peer certificate: \
         written once its source is usable and every running member trusts its CA"
    )]
    WaitingForPeerCopy {
        /// The member.
        member: String,
        /// namespace/name of the copy.
        secret: String,
    },
    /// A Secret cert-manager filled is unusable (wrong SANs, usages, no ca.crt, ...).
    #[error("{field}: Secret {name} (issued by cert-manager) {problems}")]
    BadIssuedSecret {
        /// The field that asked for it.
        field: &'static str,
        /// namespace/name.
        name: String,
        /// What is wrong.
        problems: String,
    },
}

impl TlsError {
    /// PascalCase cause, for metrics and events.
    pub fn reason(&self) -> &'static str {
        match self {
            TlsError::Kube { .. } => "SecretApiFailed",
            TlsError::Issue(_) => "CertificateIssueFailed",
            TlsError::BadManagedSecret { .. } => "InvalidManagedSecret",
            TlsError::Build(e) => e.reason(),
            TlsError::Certificate { .. } => "CertificateApiFailed",
            TlsError::WaitingForCertManager { .. } => "WaitingForCertManager",
            TlsError::WaitingForPeerCopy { .. } => "WaitingForPeerCopy",
            TlsError::BadIssuedSecret { .. } => "InvalidIssuedCertificate",
        }
    }
}

pub(crate) fn data_of(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

/// The problems of a certificate Secret as one line (conditions and events).
pub(crate) fn problems_text(problems: &[CertProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The API calls of TLS: Secrets and cert-manager Certificates in the cluster's namespace.
pub(crate) struct Io {
    secrets: Api<Secret>,
    certificates: Api<DynamicObject>,
    namespace: String,
}

/// What [`Io::perform`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Performed {
    /// Every write.
    All,
    /// Stopped at creating this Secret: another writer created it first. The writes after
    /// it were planned on this pass's version (a CA another writer made signs nothing of
    /// ours): plan again from what is there now.
    Raced(String),
}

impl Io {
    pub(crate) fn new(client: &kube::Client, cluster: &EtcdCluster) -> Io {
        let namespace = cluster.namespace().unwrap_or_default();
        Io {
            secrets: Api::namespaced(client.clone(), &namespace),
            certificates: Api::namespaced_with(
                client.clone(),
                &namespace,
                &crate::cert_manager::api_resource(),
            ),
            namespace,
        }
    }

    fn id(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }

    async fn get(&self, name: &str) -> Result<Option<Secret>, TlsError> {
        self.secrets
            .get_opt(name)
            .await
            .map_err(|source| TlsError::Kube {
                verb: "get",
                name: self.id(name),
                source,
            })
    }

    /// Reads the Secrets named `secrets` and looks up the Certificates named `certificates`
    /// into `read` (each once).
    pub(crate) async fn read_into(
        &self,
        read: &mut TlsRead,
        secrets: Vec<String>,
        certificates: Vec<String>,
    ) -> Result<(), TlsError> {
        for name in secrets {
            if let Entry::Vacant(entry) = read.secrets.entry(name) {
                let secret = self.get(entry.key()).await?;
                entry.insert(secret);
            }
        }
        for name in certificates {
            if let Entry::Vacant(entry) = read.certificates.entry(name) {
                let found = self
                    .certificates
                    .get_opt(entry.key())
                    .await
                    .map_err(|source| TlsError::Certificate {
                        verb: "get",
                        name: self.id(entry.key()),
                        source,
                    })?;
                entry.insert(found.is_some());
            }
        }
        Ok(())
    }

    /// What [`writes::plan`] looks at: the CA Secret first (when it is missing, the member
    /// certificates a lost CA issued are read too), then the rest.
    async fn read(
        &self,
        cluster: &EtcdCluster,
        members: &MemberSets<'_>,
    ) -> Result<TlsRead, TlsError> {
        let mut read = TlsRead::default();
        let managed = cluster.spec.tls.as_ref().is_some_and(operator_managed);
        if managed {
            let names = crate::observe::cluster_name(cluster);
            self.read_into(&mut read, vec![ca_secret_name(&names.name)], vec![])
                .await?;
        }
        let ca_missing = managed && read.secrets.values().all(Option::is_none);
        self.read_into(
            &mut read,
            writes::secrets_to_read(cluster, members, ca_missing),
            writes::certificates_to_read(cluster, members),
        )
        .await?;
        Ok(read)
    }

    /// Makes `writes`, in order.
    pub(crate) async fn perform(&self, writes: &[TlsWrite]) -> Result<Performed, TlsError> {
        for write in writes {
            match write {
                TlsWrite::CreateSecret(secret) => {
                    let name = secret.name_any();
                    match failpoint::around(
                        "cluster.secret_create",
                        self.secrets.create(&PostParams::default(), secret),
                    )
                    .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(status)) if status.code == 409 => {
                            return Ok(Performed::Raced(name));
                        }
                        Err(source) => {
                            return Err(TlsError::Kube {
                                verb: "create",
                                name: self.id(&name),
                                source,
                            });
                        }
                    }
                }
                TlsWrite::ReplaceSecret(secret) => {
                    let name = secret.name_any();
                    failpoint::around(
                        "cluster.secret_replace",
                        self.secrets.replace(&name, &PostParams::default(), secret),
                    )
                    .await
                    .map_err(|source| TlsError::Kube {
                        verb: "replace",
                        name: self.id(&name),
                        source,
                    })?;
                }
                TlsWrite::CreateCertificate(certificate) => {
                    let name = certificate.name_any();
                    match failpoint::around(
                        "cluster.certificate_create",
                        self.certificates
                            .create(&PostParams::default(), certificate),
                    )
                    .await
                    {
                        // Another writer's is the one wanted too (spec.tls is immutable).
                        Ok(_) => {}
                        Err(kube::Error::Api(status)) if status.code == 409 => {}
                        Err(source) => {
                            return Err(TlsError::Certificate {
                                verb: "create",
                                name: self.id(&name),
                                source,
                            });
                        }
                    }
                }
            }
        }
        Ok(Performed::All)
    }
}

/// How often a pass plans again after another writer created a Secret it was creating. Two
/// operator processes racing for the same Secret settle in one round (the second reads the
/// first's); more means something keeps creating them, which is reported.
const CREATE_RACES: usize = 3;

fn raced(io: &Io, name: &str) -> TlsError {
    TlsError::BadManagedSecret {
        name: io.id(name),
        problems: format!(
            "was created by another writer each of the {CREATE_RACES} times this pass created it"
        ),
    }
}

/// What an operator-managed certificate Secret needs at `now` to match `ca`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conformance {
    /// Nothing.
    Fine,
    /// A new certificate: a third of its lifetime or less left, unreadable, or not issued by
    /// the issuing CA (a CA rotation's `Issuing` phase).
    Reissue,
    /// The same certificate with the current trust bundle in `ca.crt`.
    NewTrust,
}

/// Decides [`Conformance`] for a certificate Secret's data. Pure.
pub fn conformance(
    data: &BTreeMap<String, Vec<u8>>,
    ca: &ManagedCa,
    now: OffsetDateTime,
) -> Conformance {
    let text = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    match text(secret_keys::CERT) {
        Some(cert)
            if !certs::renewal_due(&cert, now) && certs::signed_by(&cert, &ca.issuing.cert_pem) =>
        {
            if text(secret_keys::CA).as_deref() == Some(ca.trust_pem.as_str()) {
                Conformance::Fine
            } else {
                Conformance::NewTrust
            }
        }
        _ => Conformance::Reissue,
    }
}

/// The member Pods, as far as a CA rotation goes. A Pod being deleted, or a member without a
/// Pod (being restarted, or a PVC kept after a scale-down), holds no stale certificate in
/// memory: its next Pod mounts the Secrets as this pass left them.
fn member_certs(
    cluster: &EtcdCluster,
    pods: &BTreeMap<String, Pod>,
    digests: &BTreeMap<String, String>,
) -> Vec<MemberCerts> {
    pods.iter()
        .filter(|(_, pod)| pod.metadata.deletion_timestamp.is_none())
        .map(|(member, pod)| MemberCerts {
            ready: crate::observe::pod_ready(pod),
            pod_hash: pod.annotations().get(build::ANNOTATION_TLS_HASH).cloned(),
            current_hash: build::member_tls_hash(cluster, member, digests),
        })
        .collect()
}

/// The member hosts a certificate you provide must cover: every member known, and the first
/// `spec.size` member names (what a new cluster starts with).
pub fn hosts_to_cover(names: &ClusterName, known_members: &[String], size: i32) -> Vec<String> {
    let mut members: Vec<String> = known_members.to_vec();
    members.extend((0..u32::try_from(size).unwrap_or(0)).map(|i| names.member_name(i)));
    members.sort();
    members.dedup();
    members.iter().map(|m| names.member_host(m)).collect()
}

/// Reads and checks the cluster's TLS Secrets, creating the operator-managed CA (only while no
/// member holds a certificate, [`new_ca_allowed`]: a new CA would cut such members off from
/// each other), the operators' client certificate and
/// the certificate of every member in `with_volume`. `known_members`: every member name with a
/// Pod, a PVC or an etcd entry; `with_volume`: those with a Pod or PVC (a restore's seed gets its
/// certificate this way: the restore operator creates its PVC, then its Pod, which waits for the
/// Secret; the restore operator writes no Secret). Certificates due for renewal are re-issued
/// with `leaf_validity`, but not those of members in `unadopted` (a Pod an older operator
/// built, without [`build::ANNOTATION_TLS_HASH`]: the planner records the hash first, so the
/// renewal that follows rolls it).
///
/// Reads, plans the writes ([`writes::plan`], pure) and makes them.
pub async fn prepare(
    client: &kube::Client,
    cluster: &EtcdCluster,
    members: &MemberSets<'_>,
    now: OffsetDateTime,
    leaf_validity: Duration,
) -> Result<Prepared, TlsError> {
    if cluster.spec.tls.is_none() {
        return Ok(Prepared::Ready(Box::default()));
    }
    let io = Io::new(client, cluster);
    let mut last_race = String::new();
    for _ in 0..CREATE_RACES {
        let read = io.read(cluster, members).await?;
        let planned = writes::plan(cluster, members, &read, now, leaf_validity)?;
        match io.perform(&planned.writes).await? {
            Performed::All => return Ok(planned.prepared),
            Performed::Raced(name) => last_race = name,
        }
    }
    Err(raced(&io, &last_race))
}

/// The members [`prepare`] looks at, by name.
#[derive(Clone, Copy, Debug)]
pub struct MemberSets<'a> {
    /// Every member with a Pod, a PVC or an etcd entry.
    pub known: &'a [String],
    /// Those with a Pod or a PVC: their certificate Secret is ensured.
    pub with_volume: &'a [String],
    /// Member Pods by member name (a Pod without [`build::ANNOTATION_TLS_HASH`] is adopted
    /// before its certificates change; a CA rotation advances once every Pod is settled).
    pub pods: &'a BTreeMap<String, Pod>,
}

/// Whether the operator-managed CA may be created while its Secret is missing. Yes for a
/// cluster without members, and for a running plaintext cluster being switched to TLS: every
/// member Pod listens on plain `http://` on both sides (its etcd flags) and no member
/// certificate Secret exists, so no member holds a certificate of another CA. Members without
/// a Pod serve nothing meanwhile; their next Pod gets certificates of the new CA. Otherwise
/// (a Pod serving TLS, flags that cannot be read, a member certificate a lost CA issued) a new
/// CA would cut members off: `Err` says why, for the refusal.
pub fn new_ca_allowed(
    known_members: &[String],
    pods: &BTreeMap<String, Pod>,
    issued_secrets: &[String],
) -> Result<(), String> {
    if known_members.is_empty() {
        return Ok(());
    }
    if !issued_secrets.is_empty() {
        return Err(format!(
            "member certificates it issued exist ({}): members may still use them",
            issued_secrets.join(", ")
        ));
    }
    let plain = crate::plan::tls_switch::Listeners {
        peer: crate::plan::tls_switch::Listen::Http,
        client: crate::plan::tls_switch::Listen::Http,
    };
    let not_plain: Vec<&str> = pods
        .iter()
        .filter(|(_, pod)| crate::observe::pod_listeners(pod) != Some(plain))
        .map(|(member, _)| member.as_str())
        .collect();
    if not_plain.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "member Pods {} do not listen on plain http:// alone: their certificates chain to it",
            not_plain.join(", ")
        ))
    }
}

/// What [`ensure_member_secret`] returns: the Secret's name, its data, and the change made to
/// it as (event reason, note), if any.
pub type MemberSecret = (
    String,
    BTreeMap<String, Vec<u8>>,
    Option<(&'static str, String)>,
);

/// Whether [`ensure_member_secret`] may re-issue a certificate there is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// When `needs_renewal`, with this lifetime (also the lifetime of a new one).
    WhenDue(Duration),
    /// Not now (a missing Secret is still created, with [`certs::LEAF_VALIDITY`]).
    Never,
}

pub(crate) fn issued_of(data: &BTreeMap<String, Vec<u8>>) -> Option<Issued> {
    let text = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    Some(Issued {
        cert_pem: text(secret_keys::CERT)?,
        key_pem: text(secret_keys::KEY)?,
    })
}

/// Creates `member`'s certificate Secret if it is missing (before its Pod, which mounts it),
/// renews the one there is when `renewal` allows and it is due, and checks it
/// ([`writes::member_secret`]). Returns the Secret's name and data, and whether it was renewed.
pub async fn ensure_member_secret(
    client: &kube::Client,
    cluster: &EtcdCluster,
    ca: &ManagedCa,
    member: &str,
    now: OffsetDateTime,
    renewal: Renewal,
) -> Result<MemberSecret, TlsError> {
    let io = Io::new(client, cluster);
    let name = member_secret_name(member);
    for _ in 0..CREATE_RACES {
        let existing = io.get(&name).await?;
        let (write, secret) =
            writes::member_secret(cluster, ca, member, existing.as_ref(), now, renewal)?;
        if io.perform(write.as_slice()).await? == Performed::All {
            return Ok(secret);
        }
    }
    Err(raced(&io, &name))
}

/// The four phases of a rotation from `from` to `to`, as [`ManagedCa::advanced`] steps through
/// them: `from` alone, trusting both (`from` issues), trusting both (`to` issues), `to` alone.
#[cfg(test)]
pub(crate) fn rotation_phases(from: &Issued, to: &Issued) -> [ManagedCa; 4] {
    #![allow(clippy::unwrap_used)]
    let stable_from = ManagedCa::new(from.clone());
    let trusting = stable_from
        .advanced(CaStep::StartRotation, || Ok(to.clone()), None)
        .unwrap()
        .unwrap();
    let issuing = trusting
        .advanced(CaStep::SwitchIssuer, || unreachable!(), None)
        .unwrap()
        .unwrap();
    let stable_to = issuing
        .advanced(CaStep::DropPrevious, || unreachable!(), None)
        .unwrap()
        .unwrap();
    [stable_from, trusting, issuing, stable_to]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ca_rotation;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn names() -> ClusterName {
        ClusterName::new("db", "main").with_tls(true, true)
    }

    fn secret_data(issued: &Issued, trust: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([
            ("tls.crt".to_owned(), issued.cert_pem.clone().into_bytes()),
            ("tls.key".to_owned(), issued.key_pem.clone().into_bytes()),
            ("ca.crt".to_owned(), trust.as_bytes().to_vec()),
        ])
    }

    fn round_trip(ca: &ManagedCa) -> ManagedCa {
        let data = ca
            .to_data()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect::<BTreeMap<_, _>>();
        ManagedCa::from_data(&data).unwrap()
    }

    /// The CA Secret carries the whole rotation state: each phase survives a write and a read
    /// (a crash between steps resumes from it), and the three steps walk A -> A+B -> B.
    #[test]
    fn a_ca_rotation_walks_trust_then_issuer_then_drops_the_old_ca() {
        let a = certs::new_ca(&names(), now()).unwrap();
        let b = certs::new_ca(&names(), now()).unwrap();
        let stable = ManagedCa::new(a.clone());
        assert_eq!(stable.phase(), CaPhase::Stable);
        assert_eq!(round_trip(&stable), stable);
        // A Secret written before rotation existed (no ca.crt) reads as trusting tls.crt.
        let legacy = BTreeMap::from([
            ("tls.crt".to_owned(), a.cert_pem.clone().into_bytes()),
            ("tls.key".to_owned(), a.key_pem.clone().into_bytes()),
        ]);
        assert_eq!(ManagedCa::from_data(&legacy).unwrap(), stable);
        // Steps that do not fit the phase do nothing.
        let never = || -> Result<Issued, IssueError> { panic!("no new CA here") };
        assert_eq!(
            stable.advanced(CaStep::SwitchIssuer, never, None).unwrap(),
            None
        );
        assert_eq!(
            stable.advanced(CaStep::DropPrevious, never, None).unwrap(),
            None
        );
        assert_eq!(stable.advanced(CaStep::Keep, never, None).unwrap(), None);

        let trusting = stable
            .advanced(CaStep::StartRotation, || Ok(b.clone()), Some("2026-11-26"))
            .unwrap()
            .unwrap();
        assert_eq!(trusting.phase(), CaPhase::Trusting);
        assert_eq!(trusting.issuing, a, "A still issues");
        assert!(trusting.trust_pem.contains(a.cert_pem.trim()));
        assert!(trusting.trust_pem.contains(b.cert_pem.trim()));
        assert_eq!(trusting.served_request.as_deref(), Some("2026-11-26"));
        assert_eq!(round_trip(&trusting), trusting);

        let issuing = trusting
            .advanced(CaStep::SwitchIssuer, never, None)
            .unwrap()
            .unwrap();
        assert_eq!(issuing.phase(), CaPhase::Issuing);
        assert_eq!(issuing.issuing, b, "B issues");
        assert_eq!(issuing.trust_pem, trusting.trust_pem, "A still trusted");
        assert_eq!(round_trip(&issuing), issuing);

        let done = issuing
            .advanced(CaStep::DropPrevious, never, None)
            .unwrap()
            .unwrap();
        assert_eq!(done.phase(), CaPhase::Stable);
        assert_eq!(done.issuing, b);
        assert_eq!(done.trust_pem, b.cert_pem);
        assert_eq!(done.served_request.as_deref(), Some("2026-11-26"));
        assert_eq!(round_trip(&done), done);
    }

    /// Only running member Pods gate a rotation step: a PVC kept after a scale-down (no Pod)
    /// or a Pod being deleted holds no certificate in memory and must not block it forever.
    #[test]
    fn rotation_is_gated_by_running_member_pods_only() {
        use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut cluster = EtcdCluster::new(
            "main",
            serde_json::from_value(serde_json::json!({"size": 3, "tls": {"peer": {}}})).unwrap(),
        );
        cluster.metadata.namespace = Some("db".into());
        let digests = BTreeMap::from([
            ("main-0-tls".to_owned(), "d0".to_owned()),
            ("main-1-tls".to_owned(), "d1".to_owned()),
            ("main-3-tls".to_owned(), "d3".to_owned()),
        ]);
        let pod = |member: &str, hash: Option<String>, ready: bool| {
            let mut pod = Pod::default();
            pod.metadata.name = Some(member.to_owned());
            pod.metadata.annotations =
                hash.map(|h| BTreeMap::from([(build::ANNOTATION_TLS_HASH.to_owned(), h)]));
            pod.status = Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            });
            pod
        };
        let current = |member: &str| build::member_tls_hash(&cluster, member, &digests);
        let mut pods = BTreeMap::from([
            ("main-0".to_owned(), pod("main-0", current("main-0"), true)),
            ("main-1".to_owned(), pod("main-1", current("main-1"), true)),
        ]);
        // main-3 has a Secret (and a PVC) but no Pod: not counted.
        assert!(ca_rotation::members_settled(&member_certs(
            &cluster, &pods, &digests
        )));
        // A running Pod built from older Secrets blocks the step.
        pods.insert("main-1".into(), pod("main-1", Some("older".into()), true));
        assert!(!ca_rotation::members_settled(&member_certs(
            &cluster, &pods, &digests
        )));
        // Being deleted, it does not: its next Pod mounts the Secrets as they are.
        pods.get_mut("main-1").unwrap().metadata.deletion_timestamp =
            Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert!(ca_rotation::members_settled(&member_certs(
            &cluster, &pods, &digests
        )));
        // Not Ready: blocks.
        pods.insert("main-0".into(), pod("main-0", current("main-0"), false));
        assert!(!ca_rotation::members_settled(&member_certs(
            &cluster, &pods, &digests
        )));
    }

    /// What a member (or client) Secret needs in each phase: a new certificate when it is due
    /// or of another CA than the issuing one, a new trust bundle when only that differs.
    #[test]
    fn conformance_per_phase() {
        let a = certs::new_ca(&names(), now()).unwrap();
        let b = certs::new_ca(&names(), now()).unwrap();
        let validity = certs::LEAF_VALIDITY;
        let by_a = certs::issue_member(&a, &names(), "main-0", now(), validity).unwrap();
        let by_b = certs::issue_member(&b, &names(), "main-0", now(), validity).unwrap();
        let [stable_a, trusting, issuing, stable_b] = rotation_phases(&a, &b);
        let bundle = trusting.trust_pem.clone();
        let cases = [
            (
                &stable_a,
                secret_data(&by_a, &a.cert_pem),
                Conformance::Fine,
            ),
            (
                &trusting,
                secret_data(&by_a, &a.cert_pem),
                Conformance::NewTrust,
            ),
            (&trusting, secret_data(&by_a, &bundle), Conformance::Fine),
            (&issuing, secret_data(&by_a, &bundle), Conformance::Reissue),
            (&issuing, secret_data(&by_b, &bundle), Conformance::Fine),
            (
                &stable_b,
                secret_data(&by_b, &bundle),
                Conformance::NewTrust,
            ),
            (
                &stable_b,
                secret_data(&by_b, &b.cert_pem),
                Conformance::Fine,
            ),
            (&stable_b, BTreeMap::new(), Conformance::Reissue),
        ];
        for (i, (ca, data, expected)) in cases.into_iter().enumerate() {
            assert_eq!(conformance(&data, ca, now()), expected, "case {i}");
        }
        // Due for renewal: a new certificate whatever the phase.
        let later = now() + time::Duration::days(2 * 365 + 1);
        assert_eq!(
            conformance(&secret_data(&by_a, &a.cert_pem), &stable_a, later),
            Conformance::Reissue
        );
    }

    #[test]
    fn hosts_cover_known_members_and_the_first_size_names() {
        let names = ClusterName::new("db", "main");
        assert_eq!(
            hosts_to_cover(&names, &["main-4".into(), "main-0".into()], 2),
            [
                "main-0.main.db.svc",
                "main-1.main.db.svc",
                "main-4.main.db.svc"
            ]
        );
    }

    /// The CA may be created for a running plaintext cluster (the switch to TLS starts with
    /// it), never while a member may hold a certificate of a CA that was lost.
    #[test]
    fn a_new_ca_is_created_only_while_no_member_holds_a_certificate() {
        use k8s_openapi::api::core::v1::{Container, PodSpec};
        let pod = |peer: &str, client: &str| Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: build::CONTAINER_NAME.into(),
                    args: Some(vec![
                        format!("--listen-peer-urls={peer}"),
                        format!("--listen-client-urls={client}"),
                    ]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let plain = || pod("http://0.0.0.0:2380", "http://0.0.0.0:2379");
        let members: Vec<String> = (0..3).map(|i| format!("main-{i}")).collect();
        let none: &[String] = &[];
        // No member: the cluster starts with its CA.
        assert_eq!(new_ca_allowed(&[], &BTreeMap::new(), none), Ok(()));
        // Every member Pod listens plain and no certificate was ever issued: the switch to TLS.
        let mut pods: BTreeMap<String, Pod> =
            members.iter().map(|m| (m.clone(), plain())).collect();
        assert_eq!(new_ca_allowed(&members, &pods, none), Ok(()));
        // A member without a Pod serves nothing; its next Pod gets certificates of the new CA.
        pods.remove("main-2");
        assert_eq!(new_ca_allowed(&members, &pods, none), Ok(()));
        // A member certificate Secret exists: a CA issued it and was lost.
        let refused = new_ca_allowed(&members, &pods, &["main-1-tls".to_owned()]).unwrap_err();
        assert!(refused.contains("main-1-tls"), "{refused}");
        // A Pod that serves TLS on either side, or both schemes (a switch under way).
        for (peer, client) in [
            ("https://0.0.0.0:2380", "http://0.0.0.0:2379"),
            ("http://0.0.0.0:2380", "https://0.0.0.0:2379"),
            (
                "http://0.0.0.0:2380,https://0.0.0.0:2382",
                "http://0.0.0.0:2379",
            ),
        ] {
            pods.insert("main-0".into(), pod(peer, client));
            let refused = new_ca_allowed(&members, &pods, none).unwrap_err();
            assert!(refused.contains("main-0"), "{refused}");
        }
        // Flags that cannot be read: not known to be plain.
        pods.insert("main-0".into(), Pod::default());
        let refused = new_ca_allowed(&members, &pods, none).unwrap_err();
        assert!(refused.contains("main-0"), "{refused}");
    }
}
