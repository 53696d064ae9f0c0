//! The TLS material of a cluster, read before a reconcile acts and, for operator-managed
//! certificates, created: the CA Secret, the operators' client certificate Secret and (just
//! before a member's Pod is created) the member's certificate Secret. I/O: Secrets. What makes
//! a certificate usable is decided by [`crate::certs::check_secret`].
//!
//! A Secret that is missing or wrong is reported as a refusal naming the Secret and the problem
//! ([`Prepared::Invalid`]): nothing is created, deleted or restarted until it is fixed.

use std::collections::BTreeMap;

use etcd_admin::ClientTls;
use etcd_api::EtcdCluster;
use etcd_api::tls::{
    ca_secret_name, member_secret_name, operator_client_secret_name, operator_managed, secret_keys,
};
use etcd_api::validation::FieldError;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use time::OffsetDateTime;

use crate::build;
use crate::certs::{self, CertProblem, IssueError, Issued, Use};
use crate::naming::ClusterName;

/// What a reconcile needs of TLS.
#[derive(Clone, Debug, Default)]
pub struct ClusterTls {
    /// How the operator reaches `https://` client URLs; `None` for plain HTTP.
    pub etcd: Option<ClientTls>,
    /// The CA that issues member certificates, when some side is operator-managed.
    pub ca: Option<Issued>,
}

/// The outcome of [`prepare`].
#[derive(Debug)]
pub enum Prepared {
    /// Usable (and for a cluster without TLS, empty).
    Ready(ClusterTls),
    /// A Secret is missing or unusable: each error names the field, the Secret and why.
    Invalid(Vec<FieldError>),
}

/// A Secret could not be read or written, or a certificate not issued.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// An API call on a Secret failed.
    #[error("{verb} Secret {name}: {source}")]
    Kube {
        /// get or create.
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
            TlsError::BadIssuedSecret { .. } => "InvalidIssuedCertificate",
        }
    }
}

fn data_of(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

fn problems_text(problems: &[CertProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

struct Secrets {
    api: Api<Secret>,
    namespace: String,
}

impl Secrets {
    fn id(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }

    async fn get(&self, name: &str) -> Result<Option<Secret>, TlsError> {
        self.api
            .get_opt(name)
            .await
            .map_err(|source| TlsError::Kube {
                verb: "get",
                name: self.id(name),
                source,
            })
    }

    /// Creates `secret`; if another writer created it first, theirs is returned.
    async fn create_or_get(&self, secret: Secret) -> Result<Secret, TlsError> {
        let name = secret.name_any();
        match failpoint::around(
            "cluster.secret_create",
            self.api.create(&PostParams::default(), &secret),
        )
        .await
        {
            Ok(created) => Ok(created),
            Err(kube::Error::Api(status)) if status.code == 409 => self
                .get(&name)
                .await?
                .ok_or_else(|| TlsError::BadManagedSecret {
                    name: self.id(&name),
                    problems: "vanished right after it existed".into(),
                }),
            Err(source) => Err(TlsError::Kube {
                verb: "create",
                name: self.id(&name),
                source,
            }),
        }
    }
}

fn secrets(client: &kube::Client, cluster: &EtcdCluster) -> Secrets {
    let namespace = cluster.namespace().unwrap_or_default();
    Secrets {
        api: Api::namespaced(client.clone(), &namespace),
        namespace,
    }
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

/// Reads and checks the cluster's TLS Secrets, creating the operator-managed CA (only for a
/// cluster with no member yet: members of a running cluster hold certificates of the CA there
/// is, and a new one would cut them off from each other), the operators' client certificate and
/// the certificate of every member in `with_volume`. `known_members`: every member name with a
/// Pod, a PVC or an etcd entry; `with_volume`: those with a Pod or PVC (a restore's seed gets its
/// certificate this way: the restore operator creates its PVC, then its Pod, which waits for the
/// Secret; the restore operator writes no Secret).
pub async fn prepare(
    client: &kube::Client,
    cluster: &EtcdCluster,
    known_members: &[String],
    with_volume: &[String],
    now: OffsetDateTime,
) -> Result<Prepared, TlsError> {
    let Some(tls) = &cluster.spec.tls else {
        return Ok(Prepared::Ready(ClusterTls::default()));
    };
    let names = crate::observe::cluster_name(cluster);
    let secrets = secrets(client, cluster);
    let mut invalid = Vec::new();
    let refusal = |field: &str, name: &str, what: &str, problems: &[CertProblem]| FieldError {
        field: field.to_owned(),
        message: if problems.is_empty() {
            format!("Secret {}{what} does not exist", secrets.id(name))
        } else {
            format!(
                "Secret {}{what} {}",
                secrets.id(name),
                problems_text(problems)
            )
        },
    };

    // The operator-managed CA.
    let mut ca = None;
    if operator_managed(tls) {
        let name = ca_secret_name(&names.name);
        match secrets.get(&name).await? {
            Some(secret) => {
                let data = data_of(&secret);
                let problems = certs::check_secret(&data, &Use::ManagedCa, now);
                if problems.is_empty() {
                    ca = issued_of(&data);
                } else {
                    invalid.push(refusal(
                        "spec.tls",
                        &name,
                        " (the operator-managed CA)",
                        &problems,
                    ));
                }
            }
            None if known_members.is_empty() => {
                let issued = certs::new_ca(&names, now)?;
                let secret = build::tls_secret(cluster, &name, &issued, None)?;
                let created = secrets.create_or_get(secret).await?;
                ca = issued_of(&data_of(&created));
            }
            None => invalid.push(FieldError {
                field: "spec.tls".into(),
                message: format!(
                    "Secret {} (the operator-managed CA) is missing while members exist: their \
                     certificates chain to it; restore it (a new CA would cut the members off \
                     from each other and from the operator)",
                    secrets.id(&name)
                ),
            }),
        }
    }

    // Secrets you provide.
    let hosts = hosts_to_cover(&names, known_members, cluster.spec.size);
    let mut provided: Vec<(&str, String, Use)> = Vec::new();
    if let Some(peer) = &tls.peer
        && let Some(reference) = &peer.secret_ref
    {
        provided.push((
            "spec.tls.peer.secretRef",
            reference.name.clone(),
            Use::Peer(hosts.clone()),
        ));
    }
    if let Some(client_tls) = &tls.client {
        if let Some(reference) = &client_tls.secret_ref {
            provided.push((
                "spec.tls.client.secretRef",
                reference.name.clone(),
                Use::ClientServing(hosts.clone()),
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
    let mut read: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for (field, name, usage) in provided {
        match secrets.get(&name).await? {
            None => invalid.push(refusal(field, &name, "", &[])),
            Some(secret) => {
                let data = data_of(&secret);
                let problems = certs::check_secret(&data, &usage, now);
                if problems.is_empty() {
                    read.insert(name, data);
                } else {
                    invalid.push(refusal(field, &name, "", &problems));
                }
            }
        }
    }
    // Certificates cert-manager issues (crate::cert_manager).
    let (cert_manager_etcd, refused) =
        crate::cert_manager::prepare(client, cluster, with_volume, now).await?;
    invalid.extend(refused);
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
                let data = ensure_operator_client(&secrets, cluster, &names, ca, now).await?;
                etcd = ClientTls::from_secret_data(&data, true).ok();
            }
        } else if let Some(data) = read.get(&operator.name) {
            etcd = ClientTls::from_secret_data(data, operator.present_certificate).ok();
        }
    }
    if !invalid.is_empty() {
        return Ok(Prepared::Invalid(invalid));
    }
    if let Some(ca) = &ca {
        for member in with_volume {
            ensure_member_secret(client, cluster, ca, member, now).await?;
        }
    }
    Ok(Prepared::Ready(ClusterTls { etcd, ca }))
}

/// How another operator (restore) reaches the cluster's client port: read from the Secret the
/// cluster names for the operators, without checking or creating anything. `Ok(None)` for
/// plain HTTP; an error when TLS is on but the Secret cannot be read, so the caller does not
/// mistake members it cannot reach for members that are down.
pub async fn operator_client_tls(
    client: &kube::Client,
    cluster: &EtcdCluster,
) -> Result<Option<ClientTls>, TlsError> {
    let Some(operator) = cluster.operator_client_secret() else {
        return Ok(None);
    };
    let secrets = secrets(client, cluster);
    let secret = secrets
        .get(&operator.name)
        .await?
        .ok_or_else(|| TlsError::BadManagedSecret {
            name: secrets.id(&operator.name),
            problems: "does not exist".into(),
        })?;
    ClientTls::from_secret_data(&data_of(&secret), operator.present_certificate)
        .map(Some)
        .map_err(|e| TlsError::BadManagedSecret {
            name: secrets.id(&operator.name),
            problems: e.to_string(),
        })
}

fn issued_of(data: &BTreeMap<String, Vec<u8>>) -> Option<Issued> {
    let text = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    Some(Issued {
        cert_pem: text(secret_keys::CERT)?,
        key_pem: text(secret_keys::KEY)?,
    })
}

async fn ensure_operator_client(
    secrets: &Secrets,
    cluster: &EtcdCluster,
    names: &ClusterName,
    ca: &Issued,
    now: OffsetDateTime,
) -> Result<BTreeMap<String, Vec<u8>>, TlsError> {
    let name = operator_client_secret_name(&names.name);
    let secret = match secrets.get(&name).await? {
        Some(secret) => secret,
        None => {
            let issued = certs::issue_operator_client(ca, names, now)?;
            let secret = build::tls_secret(cluster, &name, &issued, Some(&ca.cert_pem))?;
            secrets.create_or_get(secret).await?
        }
    };
    let data = data_of(&secret);
    let problems = certs::check_secret(&data, &Use::OperatorClient, now);
    if !problems.is_empty() {
        return Err(TlsError::BadManagedSecret {
            name: secrets.id(&name),
            problems: problems_text(&problems),
        });
    }
    Ok(data)
}

/// Creates `member`'s certificate Secret if it is missing (before its Pod, which mounts it),
/// and checks the one there is.
pub async fn ensure_member_secret(
    client: &kube::Client,
    cluster: &EtcdCluster,
    ca: &Issued,
    member: &str,
    now: OffsetDateTime,
) -> Result<(), TlsError> {
    let names = crate::observe::cluster_name(cluster);
    let secrets = secrets(client, cluster);
    let name = member_secret_name(member);
    let secret = match secrets.get(&name).await? {
        Some(secret) => secret,
        None => {
            let issued = certs::issue_member(ca, &names, member, now)?;
            let secret = build::tls_secret(cluster, &name, &issued, Some(&ca.cert_pem))?;
            secrets.create_or_get(secret).await?
        }
    };
    let problems = certs::check_secret(
        &data_of(&secret),
        &Use::Peer(vec![names.member_host(member)]),
        now,
    );
    if problems.is_empty() {
        Ok(())
    } else {
        Err(TlsError::BadManagedSecret {
            name: secrets.id(&name),
            problems: problems_text(&problems),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
