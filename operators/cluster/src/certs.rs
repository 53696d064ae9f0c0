//! Certificates of TLS clusters: issuing the operator-managed ones (a CA per cluster, a
//! certificate per member, the operators' client certificate) and checking any certificate
//! before members use it. Pure: no client calls; time comes in as `now`.
//!
//! What a member certificate must carry (etcd checks peers' certificates against their URLs,
//! clients check the member's against the host they dialled):
//! - DNS SANs: the member's names through the headless peer Service
//!   (`<member>.<cluster>.<ns>.svc` and its longer and shorter forms), the peer and client
//!   Service names, `localhost`; IP SANs `127.0.0.1` and `::1` (etcdctl inside the Pod).
//! - extended key usages serverAuth and clientAuth: a member serves its peer port and, as a
//!   peer, dials the others with the same certificate.
//!
//! The operators' client certificate carries clientAuth only.

use std::collections::BTreeMap;
use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

use crate::naming::ClusterName;

/// Lifetime of an operator-managed CA.
pub const CA_VALIDITY: Duration = Duration::days(3650);
/// Default lifetime of operator-managed member and client certificates. They are renewed once
/// a third of their lifetime is left ([`renewal_due`]); the cluster operator's hidden
/// `--certificate-validity-seconds` flag shortens it (to watch renewals by hand; the e2e
/// scenario plants certificates near their end instead, so its margin does not depend on how
/// fast a loaded machine rolls).
pub const LEAF_VALIDITY: Duration = Duration::days(3 * 365);
/// Certificates start this long before they are issued (at most a tenth of their lifetime),
/// so a node whose clock runs behind the operator's does not refuse them as not yet valid.
pub const CLOCK_SKEW: Duration = Duration::hours(1);
/// Common name of the operators' client certificate (what etcd's auth would see as the user).
pub const OPERATOR_CLIENT_CN: &str = "etcd-operator";

/// A certificate and its private key, PEM (defined with the member builder, which stores it).
pub use etcd_member::build::Issued;

/// Issuing a certificate failed.
#[derive(Debug, thiserror::Error)]
#[error("issuing {what}: {source}")]
pub struct IssueError {
    /// Which certificate.
    pub what: String,
    /// rcgen's error.
    pub source: rcgen::Error,
}

fn issue_err(what: &str) -> impl FnOnce(rcgen::Error) -> IssueError + '_ {
    move |source| IssueError {
        what: what.to_owned(),
        source,
    }
}

/// DNS names a member certificate covers.
pub fn member_dns_names(names: &ClusterName, member: &str) -> Vec<String> {
    let (cluster, ns) = (&names.name, &names.namespace);
    vec![
        format!("{member}.{cluster}.{ns}.svc"),
        format!("{member}.{cluster}.{ns}.svc.cluster.local"),
        format!("{member}.{cluster}.{ns}"),
        format!("{member}.{cluster}"),
        format!("{cluster}.{ns}.svc"),
        format!("{cluster}-client"),
        format!("{cluster}-client.{ns}"),
        format!("{cluster}-client.{ns}.svc"),
        format!("{cluster}-client.{ns}.svc.cluster.local"),
        "localhost".to_owned(),
    ]
}

/// IP addresses a member certificate covers: loopback, for clients inside the member's Pod.
pub fn member_ips() -> Vec<IpAddr> {
    vec![
        IpAddr::from([127, 0, 0, 1]),
        IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]),
    ]
}

fn params(
    common_name: &str,
    now: OffsetDateTime,
    validity: Duration,
) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.not_before = now - CLOCK_SKEW.min(validity / 10);
    params.not_after = now + validity;
    Ok(params)
}

/// A new CA for the cluster.
pub fn new_ca(names: &ClusterName, now: OffsetDateTime) -> Result<Issued, IssueError> {
    let what = format!("the CA of {}/{}", names.namespace, names.name);
    let key = KeyPair::generate().map_err(issue_err(&what))?;
    // The issuance time in the name: during a rotation two CAs of the cluster are trusted at
    // once, and verifiers look issuers up by subject name.
    let mut params = params(
        &format!(
            "etcd-ca {}/{} {}",
            names.namespace,
            names.name,
            now.unix_timestamp()
        ),
        now,
        CA_VALIDITY,
    )
    .map_err(issue_err(&what))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).map_err(issue_err(&what))?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn leaf(
    ca: &Issued,
    mut params: CertificateParams,
    usages: Vec<ExtendedKeyUsagePurpose>,
    what: &str,
) -> Result<Issued, IssueError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(issue_err(what))?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(issue_err(what))?;
    let key = KeyPair::generate().map_err(issue_err(what))?;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = usages;
    let cert = params.signed_by(&key, &issuer).map_err(issue_err(what))?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A member's certificate, signed by `ca`: serverAuth and clientAuth, the member's SANs.
pub fn issue_member(
    ca: &Issued,
    names: &ClusterName,
    member: &str,
    now: OffsetDateTime,
    validity: Duration,
) -> Result<Issued, IssueError> {
    let what = format!("the certificate of member {member}");
    let mut params = params(member, now, validity).map_err(issue_err(&what))?;
    let mut sans = Vec::new();
    for name in member_dns_names(names, member) {
        sans.push(SanType::DnsName(name.try_into().map_err(issue_err(&what))?));
    }
    sans.extend(member_ips().into_iter().map(SanType::IpAddress));
    params.subject_alt_names = sans;
    leaf(
        ca,
        params,
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        &what,
    )
}

/// The operators' client certificate for the cluster, signed by `ca`: clientAuth only.
pub fn issue_operator_client(
    ca: &Issued,
    names: &ClusterName,
    now: OffsetDateTime,
    validity: Duration,
) -> Result<Issued, IssueError> {
    let what = format!(
        "the operators' client certificate of {}/{}",
        names.namespace, names.name
    );
    let params = params(OPERATOR_CLIENT_CN, now, validity).map_err(issue_err(&what))?;
    leaf(ca, params, vec![ExtendedKeyUsagePurpose::ClientAuth], &what)
}

/// Whether an operator-managed certificate (the first of `cert_pem`) must be renewed at `now`:
/// from its [`renewal_time`] on, or when it is unreadable.
pub fn renewal_due(cert_pem: &str, now: OffsetDateTime) -> bool {
    renewal_time(cert_pem).is_none_or(|due| now >= due)
}

/// When an operator-managed certificate (the first of `cert_pem`) becomes due for renewal:
/// once less than a third of its lifetime (notBefore to notAfter) is left, cert-manager's
/// default (`renewBefore` = a third of `duration`). A renewal then leaves room for a whole
/// roll of the members before the old one expires. `None` when it does not parse.
pub fn renewal_time(cert_pem: &str) -> Option<OffsetDateTime> {
    let pems = pems(cert_pem.as_bytes(), etcd_api::tls::secret_keys::CERT).ok()?;
    let cert = pems.first()?.parse_x509().ok()?;
    let validity = cert.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let renew_before = (not_after - not_before).max(0) / 3;
    OffsetDateTime::from_unix_timestamp(not_after - renew_before).ok()
}

/// The earliest [`renewal_time`] of `cert_pems` still ahead of `now`: when the operator must
/// look again at the latest, whatever else happens. Certificates already due are left out:
/// they are re-issued in the pass that finds them, or wait for a step of their own (a Pod
/// being adopted), and must not turn the next look into a busy loop.
pub fn next_renewal<'a>(
    cert_pems: impl IntoIterator<Item = &'a str>,
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    cert_pems
        .into_iter()
        .filter_map(renewal_time)
        .filter(|due| *due > now)
        .min()
}

/// The longest warning ahead of the end of a certificate the operator does not issue.
pub const EXPIRY_WARNING_AT_MOST: Duration = Duration::days(7);

/// A certificate the operator does not issue (a Secret you provide, or one cert-manager fills)
/// nearing its end: when to warn, and its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// notAfter.
    pub not_after: OffsetDateTime,
    /// From when it is reported as near its end ([`expiry_warning_time`]).
    pub warn_from: OffsetDateTime,
}

impl Expiry {
    /// It is near its end at `now` (it may have ended: an expired certificate is refused as
    /// well, before anything acts).
    pub fn near(&self, now: OffsetDateTime) -> bool {
        now >= self.warn_from
    }
}

/// When to warn that a certificate the operator does not renew nears its end: with a sixth of
/// its lifetime left, and at most [`EXPIRY_WARNING_AT_MOST`] (7 days) before it ends. `None`
/// when it does not parse.
///
/// Why: cert-manager renews at a third of the lifetime left by default, so a warning at a
/// third would fire on every healthy renewal; at a sixth its renewal has had half its window
/// and failed, which is worth a person's look. The 7-day cap keeps long-lived certificates (a
/// year, provided by hand) from warning for two months: a week is enough to replace a Secret,
/// and the expiry gauge lets an alert rule warn earlier if a team wants to.
pub fn expiry_warning_time(cert_pem: &str) -> Option<Expiry> {
    let pems = pems(cert_pem.as_bytes(), etcd_api::tls::secret_keys::CERT).ok()?;
    let cert = pems.first()?.parse_x509().ok()?;
    let validity = cert.validity();
    let not_before = OffsetDateTime::from_unix_timestamp(validity.not_before.timestamp()).ok()?;
    let not_after = OffsetDateTime::from_unix_timestamp(validity.not_after.timestamp()).ok()?;
    let lifetime = (not_after - not_before).max(Duration::ZERO);
    let ahead: Duration = (lifetime / 6_i32).min(EXPIRY_WARNING_AT_MOST);
    Some(Expiry {
        not_after,
        warn_from: not_after - ahead,
    })
}

/// Whether the first certificate of `cert_pem` was signed by `ca_pem`'s first certificate
/// (false when either does not parse). A member certificate of another CA is re-issued.
pub fn signed_by(cert_pem: &str, ca_pem: &str) -> bool {
    let key = etcd_api::tls::secret_keys::CERT;
    let (Ok(certs), Ok(cas)) = (pems(cert_pem.as_bytes(), key), pems(ca_pem.as_bytes(), key))
    else {
        return false;
    };
    let (Some(Ok(cert)), Some(Ok(ca))) = (
        certs.first().map(|p| p.parse_x509()),
        cas.first().map(|p| p.parse_x509()),
    ) else {
        return false;
    };
    cert.verify_signature(Some(ca.public_key())).is_ok()
}

/// What a TLS Secret is used for, and so what its certificate must allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Use {
    /// Served by members on the client port: serverAuth, and SANs for each of these names.
    ClientServing(Vec<String>),
    /// Served and presented by members on the peer port: serverAuth and clientAuth, and SANs
    /// for each of these names.
    Peer(Vec<String>),
    /// Presented by the operators to the members: clientAuth.
    OperatorClient,
    /// Only `ca.crt` is read (the CA that signs the members' client certificates).
    CaOnly,
    /// The operator-managed CA: `tls.crt` is the CA certificate, `tls.key` its key.
    ManagedCa,
}

/// Why a TLS Secret cannot be used. Each names the key of the Secret it is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertProblem {
    /// A key of the Secret is missing or empty.
    #[error("has no {key}")]
    MissingKey {
        /// The Secret key.
        key: &'static str,
    },
    /// A PEM certificate does not parse.
    #[error("{key} is not a PEM certificate: {detail}")]
    Unparsable {
        /// The Secret key.
        key: &'static str,
        /// The parser's complaint.
        detail: String,
    },
    /// The private key does not parse.
    #[error("tls.key is not a PEM private key (PKCS#8, PKCS#1 or SEC1): {detail}")]
    KeyUnparsable {
        /// The parser's complaint.
        detail: String,
    },
    /// The private key is not the certificate's.
    #[error("tls.key is not the key of the certificate in tls.crt")]
    KeyMismatch,
    /// The certificate expired.
    #[error("{key} expired at {not_after}")]
    Expired {
        /// The Secret key.
        key: &'static str,
        /// Its notAfter (RFC 3339).
        not_after: String,
    },
    /// The certificate is not valid yet.
    #[error("{key} is not valid before {not_before}")]
    NotYetValid {
        /// The Secret key.
        key: &'static str,
        /// Its notBefore (RFC 3339).
        not_before: String,
    },
    /// A name the members need is not among the certificate's SANs.
    #[error("the certificate in tls.crt has no SAN for {name}")]
    MissingSan {
        /// The name.
        name: String,
    },
    /// The certificate's extended key usage does not allow what it is used for.
    #[error("the certificate in tls.crt does not allow {usage}")]
    MissingUsage {
        /// `serverAuth` or `clientAuth`.
        usage: &'static str,
    },
    /// No certificate of `ca.crt` signed the certificate.
    #[error("the certificate in tls.crt is not signed by the CA in ca.crt")]
    NotSignedByCa,
    /// The operator-managed CA's certificate is not a CA.
    #[error("tls.crt is not a CA certificate")]
    NotCa,
}

fn pems(data: &[u8], key: &'static str) -> Result<Vec<Pem>, CertProblem> {
    let unparsable = |detail: String| CertProblem::Unparsable { key, detail };
    let pems = Pem::iter_from_buffer(data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unparsable(e.to_string()))?;
    let certs: Vec<Pem> = pems
        .into_iter()
        .filter(|p| p.label == "CERTIFICATE")
        .collect();
    if certs.is_empty() {
        return Err(unparsable("no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

fn parse<'a>(pem: &'a Pem, key: &'static str) -> Result<X509Certificate<'a>, CertProblem> {
    pem.parse_x509().map_err(|e| CertProblem::Unparsable {
        key,
        detail: e.to_string(),
    })
}

fn rfc3339(timestamp: i64) -> String {
    OffsetDateTime::from_unix_timestamp(timestamp)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| timestamp.to_string())
}

fn check_validity(
    cert: &X509Certificate,
    key: &'static str,
    now: OffsetDateTime,
    problems: &mut Vec<CertProblem>,
) {
    let validity = cert.validity();
    let now = now.unix_timestamp();
    if validity.not_after.timestamp() < now {
        problems.push(CertProblem::Expired {
            key,
            not_after: rfc3339(validity.not_after.timestamp()),
        });
    }
    if validity.not_before.timestamp() > now {
        problems.push(CertProblem::NotYetValid {
            key,
            not_before: rfc3339(validity.not_before.timestamp()),
        });
    }
}

/// Whether `pattern` (a DNS SAN, maybe `*.`-wildcarded in its first label) covers `name`.
pub fn dns_matches(pattern: &str, name: &str) -> bool {
    let (pattern, name) = (pattern.to_ascii_lowercase(), name.to_ascii_lowercase());
    match pattern.strip_prefix("*.") {
        Some(suffix) => name
            .split_once('.')
            .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix),
        None => pattern == name,
    }
}

/// Checks a TLS Secret's data (`tls.crt`, `tls.key`, `ca.crt`) for `usage` at `now`. Every
/// problem found, or none.
pub fn check_secret(
    data: &BTreeMap<String, Vec<u8>>,
    usage: &Use,
    now: OffsetDateTime,
) -> Vec<CertProblem> {
    use etcd_api::tls::secret_keys::{CA, CERT, KEY};
    let mut problems = Vec::new();
    let get = |key: &'static str, problems: &mut Vec<CertProblem>| {
        let value = data.get(key).filter(|v| !v.is_empty());
        if value.is_none() {
            problems.push(CertProblem::MissingKey { key });
        }
        value
    };
    let ca_data = match usage {
        Use::ManagedCa => None,
        _ => get(CA, &mut problems),
    };
    let ca_pems = match ca_data.map(|d| pems(d, CA)).transpose() {
        Ok(p) => p.unwrap_or_default(),
        Err(problem) => {
            problems.push(problem);
            vec![]
        }
    };
    let mut cas = Vec::new();
    for pem in &ca_pems {
        match parse(pem, CA) {
            Ok(ca) => {
                check_validity(&ca, CA, now, &mut problems);
                cas.push(ca);
            }
            Err(problem) => problems.push(problem),
        }
    }
    if *usage == Use::CaOnly {
        return problems;
    }
    let cert_data = get(CERT, &mut problems);
    let key_data = get(KEY, &mut problems);
    let (Some(cert_data), Some(key_data)) = (cert_data, key_data) else {
        return problems;
    };
    let cert_pems = match pems(cert_data, CERT) {
        Ok(p) => p,
        Err(problem) => {
            problems.push(problem);
            return problems;
        }
    };
    let Some(first) = cert_pems.first() else {
        return problems;
    };
    let cert = match parse(first, CERT) {
        Ok(cert) => cert,
        Err(problem) => {
            problems.push(problem);
            return problems;
        }
    };
    check_validity(&cert, CERT, now, &mut problems);
    match std::str::from_utf8(key_data)
        .map_err(|e| e.to_string())
        .and_then(|pem| KeyPair::from_pem(pem).map_err(|e| e.to_string()))
    {
        Ok(key) => {
            if key.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
                problems.push(CertProblem::KeyMismatch);
            }
        }
        Err(detail) => problems.push(CertProblem::KeyUnparsable { detail }),
    }
    let (needs_server, needs_client, names) = match usage {
        Use::ClientServing(names) => (true, false, names.as_slice()),
        Use::Peer(names) => (true, true, names.as_slice()),
        Use::OperatorClient => (false, true, &[][..]),
        Use::ManagedCa => {
            if !cert.is_ca() {
                problems.push(CertProblem::NotCa);
            }
            return problems;
        }
        Use::CaOnly => return problems,
    };
    // No extended key usage extension allows every usage (RFC 5280 4.2.1.12).
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        let eku = eku.value;
        if needs_server && !(eku.any || eku.server_auth) {
            problems.push(CertProblem::MissingUsage {
                usage: "serverAuth",
            });
        }
        if needs_client && !(eku.any || eku.client_auth) {
            problems.push(CertProblem::MissingUsage {
                usage: "clientAuth",
            });
        }
    }
    let sans: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                _ => None,
            })
            .collect(),
        _ => vec![],
    };
    for name in names {
        if !sans.iter().any(|pattern| dns_matches(pattern, name)) {
            problems.push(CertProblem::MissingSan { name: name.clone() });
        }
    }
    if !cas.is_empty()
        && !cas
            .iter()
            .any(|ca| cert.verify_signature(Some(ca.public_key())).is_ok())
    {
        problems.push(CertProblem::NotSignedByCa);
    }
    problems
}

#[cfg(test)]
mod tests;
