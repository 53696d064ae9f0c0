//! Between Secrets and [`crate::plan::ca_overlap`] (pure): a certificate Secret's data read
//! into what the overlap planner looks at, and the data of a member's mounted copy built from
//! one of its writes. The I/O around it (read the copies, write them, mount them) is the part
//! of issue 19 still to wire; see the planner's module doc.

use std::collections::BTreeMap;

use etcd_api::tls::secret_keys;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use x509_parser::pem::Pem;

use crate::build;
use crate::plan::ca_overlap::{CertChoice, CertTrust, Held, MountWrite, Running};
use crate::trust::{self, PeerTrust};

/// What the overlap planner sees of a certificate Secret: an identity of its certificate and
/// key, the CA that signed the certificate and the CAs of its `ca.crt`. `None` when it does not
/// parse or its `ca.crt` does not sign its certificate (such a Secret is refused anyway).
pub fn held_of(data: &BTreeMap<String, Vec<u8>>) -> Option<Held> {
    let PeerTrust { issuer, trusted } = PeerTrust::of_secret(data)?;
    let certificate: BTreeMap<String, Vec<u8>> = [secret_keys::CERT, secret_keys::KEY]
        .into_iter()
        .map(|key| Some((key.to_owned(), data.get(key)?.clone())))
        .collect::<Option<_>>()?;
    Some(Held {
        cert: build::secret_digest(&certificate),
        trust: CertTrust {
            issuer,
            trusts: trusted,
        },
    })
}

/// What a running member Pod records ([`trust::ANNOTATION_PEER_TRUST`]); a Pod without a
/// readable record may have been started on anything.
pub fn running_of(pod: &Pod) -> Running {
    match pod
        .annotations()
        .get(trust::ANNOTATION_PEER_TRUST)
        .and_then(|value| PeerTrust::parse(value))
    {
        Some(PeerTrust { issuer, trusted }) => Running::Recorded(CertTrust {
            issuer,
            trusts: trusted,
        }),
        None => Running::Unrecorded,
    }
}

/// Every CA certificate of these Secrets' `ca.crt`, PEM by [`trust::fingerprint`]: what a
/// copy's trust bundle is written from (the planner names CAs by fingerprint only).
pub fn ca_pems<'a>(
    secrets: impl IntoIterator<Item = &'a BTreeMap<String, Vec<u8>>>,
) -> BTreeMap<String, String> {
    let mut pems = BTreeMap::new();
    for data in secrets {
        let Some(bundle) = data.get(secret_keys::CA) else {
            continue;
        };
        for block in certificate_blocks(&String::from_utf8_lossy(bundle)) {
            let der = Pem::iter_from_buffer(block.as_bytes())
                .filter_map(Result::ok)
                .find(|pem| pem.label == "CERTIFICATE")
                .map(|pem| pem.contents);
            if let Some(der) = der {
                pems.entry(trust::fingerprint(&der)).or_insert(block);
            }
        }
    }
    pems
}

/// The `CERTIFICATE` blocks of a PEM text, each as written, ending with a newline.
fn certificate_blocks(text: &str) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let Some(length) = rest[start..].find(END) else {
            break;
        };
        let end = start + length + END.len();
        blocks.push(format!("{}\n", &rest[start..end]));
        rest = &rest[end..];
    }
    blocks
}

/// A CA the planner put in a bundle that no Secret read holds (cannot happen from what the
/// planner is given; reported rather than written without it).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("no ca.crt read holds the CA {0} the trust bundle of {1}'s mounted copy needs")]
pub struct MissingCa(pub String, pub String);

/// The data of `write.member`'s mounted copy: the certificate and key of its source (or of the
/// copy there is), and `ca.crt` the CAs the write names, in fingerprint order. `pems`:
/// [`ca_pems`] of the sources and copies read.
pub fn copy_data(
    write: &MountWrite,
    source: &BTreeMap<String, Vec<u8>>,
    mounted: Option<&BTreeMap<String, Vec<u8>>>,
    pems: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Vec<u8>>, MissingCa> {
    let from = match (&write.cert, mounted) {
        (CertChoice::Keep, Some(mounted)) => mounted,
        _ => source,
    };
    let mut data: BTreeMap<String, Vec<u8>> = [secret_keys::CERT, secret_keys::KEY]
        .into_iter()
        .filter_map(|key| Some((key.to_owned(), from.get(key)?.clone())))
        .collect();
    let mut bundle = String::new();
    for ca in &write.trusts {
        let pem = pems
            .get(ca)
            .ok_or_else(|| MissingCa(ca.clone(), write.member.clone()))?;
        bundle.push_str(pem);
    }
    data.insert(secret_keys::CA.to_owned(), bundle.into_bytes());
    Ok(data)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::certs::{self, Issued, Use};
    use crate::naming::ClusterName;
    use crate::plan::ca_overlap;
    use time::OffsetDateTime;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn names() -> ClusterName {
        ClusterName::new("db", "main").with_tls(true, false)
    }

    fn secret(issuer: &Issued, member: &str, trusted: &[&Issued]) -> BTreeMap<String, Vec<u8>> {
        let leaf =
            certs::issue_member(issuer, &names(), member, now(), certs::LEAF_VALIDITY).unwrap();
        let bundle: String = trusted
            .iter()
            .map(|ca| ca.cert_pem.trim_end().to_owned() + "\n")
            .collect();
        BTreeMap::from([
            ("tls.crt".to_owned(), leaf.cert_pem.into_bytes()),
            ("tls.key".to_owned(), leaf.key_pem.into_bytes()),
            ("ca.crt".to_owned(), bundle.into_bytes()),
        ])
    }

    /// A source moved from CA A to B in one step, with real certificates: the planner's first
    /// write keeps the certificate of A and trusts both; the copy built from it passes the
    /// operator's own checks for a peer Secret and reads back as the planner asked.
    #[test]
    fn a_copy_is_built_as_the_planner_asks_and_passes_the_peer_checks() {
        let (a, b) = (
            certs::new_ca(&names(), now()).unwrap(),
            certs::new_ca(&names(), now()).unwrap(),
        );
        let old = secret(&a, "main-0", &[&a]);
        let new = secret(&b, "main-0", &[&b]);
        let (old_held, new_held) = (held_of(&old).unwrap(), held_of(&new).unwrap());
        assert_ne!(old_held.cert, new_held.cert);
        assert_ne!(old_held.trust.issuer, new_held.trust.issuer);
        let member = ca_overlap::MemberPeer {
            member: "main-0".into(),
            source: Some(new_held.clone()),
            mounted: Some(old_held.clone()),
            running: Some(Running::Recorded(old_held.trust.clone())),
        };
        let other = ca_overlap::MemberPeer {
            member: "main-1".into(),
            source: Some(new_held.clone()),
            mounted: Some(old_held.clone()),
            running: Some(Running::Recorded(old_held.trust.clone())),
        };
        let planned = ca_overlap::plan(&[member, other]);
        let write = &planned.writes[0];
        assert_eq!(write.cert, CertChoice::Keep);
        let pems = ca_pems([&old, &new]);
        let copy = copy_data(write, &new, Some(&old), &pems).unwrap();
        let host = vec![names().member_host("main-0")];
        assert_eq!(certs::check_secret(&copy, &Use::Peer(host), now()), []);
        let held = held_of(&copy).unwrap();
        assert_eq!(held.cert, old_held.cert, "the certificate of A, kept");
        assert_eq!(held.trust.issuer, old_held.trust.issuer);
        let both: BTreeSet<String> = [&old_held, &new_held]
            .iter()
            .map(|h| h.trust.issuer.clone())
            .collect();
        assert_eq!(held.trust.trusts, both);

        // Taking the source's certificate, trusting B alone.
        let take = MountWrite {
            member: "main-0".into(),
            cert: CertChoice::FromSource,
            trusts: [new_held.trust.issuer.clone()].into(),
        };
        let copy = copy_data(&take, &new, Some(&old), &pems).unwrap();
        assert_eq!(held_of(&copy), Some(new_held.clone()));
        // A CA no Secret read holds is an error, not a bundle without it.
        let unknown = MountWrite {
            trusts: ["0123456789abcdef".to_owned()].into(),
            ..take
        };
        assert_eq!(
            copy_data(&unknown, &new, None, &pems),
            Err(MissingCa("0123456789abcdef".into(), "main-0".into()))
        );
    }

    #[test]
    fn a_pod_reads_as_its_record_or_as_unrecorded() {
        let a = certs::new_ca(&names(), now()).unwrap();
        let data = secret(&a, "main-0", &[&a]);
        let record = PeerTrust::of_secret(&data).unwrap();
        let mut pod = Pod::default();
        assert_eq!(running_of(&pod), Running::Unrecorded);
        pod.metadata.annotations = Some(BTreeMap::from([(
            trust::ANNOTATION_PEER_TRUST.to_owned(),
            record.annotation(),
        )]));
        assert_eq!(
            running_of(&pod),
            Running::Recorded(held_of(&data).unwrap().trust)
        );
        pod.metadata.annotations = Some(BTreeMap::from([(
            trust::ANNOTATION_PEER_TRUST.to_owned(),
            "garbage".to_owned(),
        )]));
        assert_eq!(running_of(&pod), Running::Unrecorded);
    }
}
