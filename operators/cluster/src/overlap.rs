//! Between Secrets and [`crate::plan::ca_overlap`] (pure): a certificate Secret's data read
//! into what the overlap planner looks at, the data of a member's mounted copy built from one
//! of its writes, and the copies of one pass ([`plan_copies`]) as the TLS writes
//! ([`crate::tls::writes::plan`]) make them.

use std::collections::BTreeMap;

use etcd_api::EtcdCluster;
use etcd_api::tls::{Side, cert_manager_member_secret_name, mounted_peer_secret_name, secret_keys};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use x509_parser::pem::Pem;

use crate::build;
use crate::plan::ca_overlap::{
    self, CertChoice, CertTrust, Held, MemberPeer, MountWrite, OverlapPhase, OverlapPlan, Running,
};
use crate::tls::{TlsError, TlsWrite, data_of, issued_of};
use crate::trust::{self, PeerTrust};

/// Event reason of a step of a peer CA change the operator carries through the mounted copies.
pub const PEER_CA_OVERLAP: &str = "PeerCAOverlap";

/// The Secret `member`'s mounted copy is made from: the one you provide (shared by every
/// member) or the one cert-manager fills for it. `None` when the peer side has no copy.
pub fn source_secret_name(cluster: &EtcdCluster, member: &str) -> Option<String> {
    let peer = cluster.spec.tls.as_ref()?.peer.as_ref()?;
    match (&peer.secret_ref, &peer.cert_manager) {
        (Some(reference), _) => Some(reference.name.clone()),
        (None, Some(_)) => Some(cert_manager_member_secret_name(member, Side::Peer)),
        (None, None) => None,
    }
}

/// The copies of one pass: the writes (in the planner's order: copies that only change their
/// trust first), each copy's data as the writes leave it (by Secret name), and the plan.
#[derive(Debug)]
pub struct Copies {
    /// Creates and replaces of `<member>-peer-mounted`.
    pub writes: Vec<TlsWrite>,
    /// Each existing or written copy's data after the writes, by Secret name.
    pub data: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// What the planner decided (held-back members, phase), for events and status.
    pub plan: OverlapPlan,
}

/// Plans every known member's mounted copy from what was read (pure): `members` every known
/// member (Pod, PVC or etcd entry); `pods` member Pods; `sources` the data of each member's
/// source Secret that is usable now, by member (missing: pending or refused);
/// `copies` each member's copy Secret as read, by member.
pub fn plan_copies(
    cluster: &EtcdCluster,
    members: &[String],
    pods: &BTreeMap<String, Pod>,
    sources: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    copies: &BTreeMap<String, &Secret>,
) -> Result<Copies, TlsError> {
    let read_copies: BTreeMap<&String, BTreeMap<String, Vec<u8>>> = copies
        .iter()
        .map(|(member, secret)| (member, data_of(secret)))
        .collect();
    let observed: Vec<MemberPeer> = members
        .iter()
        .map(|member| MemberPeer {
            member: member.clone(),
            source: sources.get(member).and_then(held_of),
            mounted: read_copies.get(member).and_then(held_of),
            running: pods
                .get(member)
                .filter(|pod| pod.metadata.deletion_timestamp.is_none())
                .filter(|pod| serves_peer_tls(pod))
                .map(running_of),
        })
        .collect();
    let plan = ca_overlap::plan(&observed);
    let pems = ca_pems(sources.values().chain(read_copies.values()));
    let empty = BTreeMap::new();
    let mut writes = Vec::new();
    let mut data: BTreeMap<String, BTreeMap<String, Vec<u8>>> = read_copies
        .iter()
        .map(|(member, data)| (mounted_peer_secret_name(member), data.clone()))
        .collect();
    for write in &plan.writes {
        let name = mounted_peer_secret_name(&write.member);
        let source = sources.get(&write.member).unwrap_or(&empty);
        let built =
            copy_data(write, source, read_copies.get(&write.member), &pems).map_err(|missing| {
                TlsError::BadManagedSecret {
                    name: format!("{}/{name}", cluster.namespace().unwrap_or_default()),
                    problems: missing.to_string(),
                }
            })?;
        let issued = issued_of(&built).ok_or_else(|| TlsError::BadManagedSecret {
            name: format!("{}/{name}", cluster.namespace().unwrap_or_default()),
            problems: "would have no tls.crt or tls.key".into(),
        })?;
        let bundle = String::from_utf8_lossy(&built[secret_keys::CA]).into_owned();
        let secret = match copies.get(&write.member) {
            Some(old) => TlsWrite::ReplaceSecret(Box::new(crate::tls::writes::replacement(
                cluster,
                old,
                &issued,
                Some(&bundle),
                None,
            )?)),
            None => TlsWrite::CreateSecret(Box::new(build::tls_secret(
                cluster,
                &name,
                &issued,
                Some(&bundle),
            )?)),
        };
        writes.push(secret);
        data.insert(name, built);
    }
    Ok(Copies { writes, data, plan })
}

/// Before `member`'s Pod is created: its mounted copy exists (`digests`: [`build::secret_digest`]
/// of the Secrets as this pass left them), or the Pod waits, naming the copy. `Ok` when the
/// peer side has no copy.
pub fn copy_ready(
    cluster: &EtcdCluster,
    member: &str,
    digests: &BTreeMap<String, String>,
) -> Result<(), TlsError> {
    let copied = cluster
        .spec
        .tls
        .as_ref()
        .is_some_and(etcd_api::tls::peer_copied);
    let copy = mounted_peer_secret_name(member);
    if !copied || digests.contains_key(&copy) {
        return Ok(());
    }
    Err(TlsError::WaitingForPeerCopy {
        member: member.to_owned(),
        secret: format!("{}/{copy}", cluster.namespace().unwrap_or_default()),
    })
}

/// Whether a member Pod may present or verify a peer certificate: not one that listens for
/// peers on plain `http://` alone (a plaintext member, before a switch to TLS rolls it), which
/// the planner then does not count as a running peer. A Pod whose flags cannot be read is
/// counted.
fn serves_peer_tls(pod: &Pod) -> bool {
    crate::observe::pod_listeners(pod)
        .is_none_or(|listen| listen.peer != crate::plan::tls_switch::Listen::Http)
}

/// The event note of a pass that wrote copies during a CA change; `None` when the copies only
/// follow their sources (a first copy, a renewal by the same CA).
pub fn overlap_note(plan: &OverlapPlan) -> Option<String> {
    if plan.writes.is_empty() {
        return None;
    }
    let list = |cas: &std::collections::BTreeSet<String>| {
        cas.iter().cloned().collect::<Vec<_>>().join(", ")
    };
    match &plan.phase {
        OverlapPhase::Stable => None,
        OverlapPhase::Trusting(cas) => {
            let held: Vec<String> = plan
                .held_back
                .iter()
                .map(|h| format!("{} (until {} trust it)", h.member, h.untrusting.join(", ")))
                .collect();
            Some(format!(
                "peer CA change: the members' mounted copies trust CA {} next to the current \
                 one and members roll onto them one at a time; certificates of it wait: {}",
                list(cas),
                held.join("; ")
            ))
        }
        OverlapPhase::Presenting => Some(
            "peer CA change: every running member trusts the new CA; mounted copies take its \
             certificates and members roll onto them one at a time"
                .to_owned(),
        ),
        OverlapPhase::Dropping(cas) => Some(format!(
            "peer CA change: CA {} is no longer presented; mounted copies stop trusting it and \
             members roll a last time",
            list(cas)
        )),
    }
}

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
/// readable record may have been started on anything. A Pod built before mounted copies
/// existed (it mounts its source directly, until the one roll that moves it onto its copy) is
/// read by its record too: it trusts what it was started on, and presents that certificate or
/// its source's current one (the kubelet refreshes the volume), both of which every bundle
/// holds (a bundle holds every source's CA).
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
    use crate::certs::{self, Use};
    use crate::plan::ca_overlap;
    use crate::tls::TlsWrite;

    // The same certificates as the trust check's tests: the overlap feeds that check.
    use crate::trust::tests::{names, now, secret};

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

    fn cert_manager_cluster() -> EtcdCluster {
        let mut cluster = EtcdCluster::new(
            "main",
            serde_json::from_value(serde_json::json!({
                "size": 3,
                "tls": {"peer": {"certManager": {"issuerRef": {"name": "ca"}}}},
            }))
            .unwrap(),
        );
        cluster.metadata.namespace = Some("db".into());
        cluster.metadata.uid = Some("uid-1".into());
        cluster
    }

    /// A running Pod started on `data` (its peer trust record).
    fn pod_on(data: &BTreeMap<String, Vec<u8>>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some(BTreeMap::from([(
            trust::ANNOTATION_PEER_TRUST.to_owned(),
            PeerTrust::of_secret(data).unwrap().annotation(),
        )]));
        pod
    }

    fn as_secret(cluster: &EtcdCluster, name: &str, data: &BTreeMap<String, Vec<u8>>) -> Secret {
        let issued = issued_of(data).unwrap();
        let ca = String::from_utf8_lossy(&data["ca.crt"]).into_owned();
        let mut secret = build::tls_secret(cluster, name, &issued, Some(&ca)).unwrap();
        secret.metadata.resource_version = Some("7".into());
        secret
    }

    /// The migration: members whose Pods mount their cert-manager Secrets directly (built
    /// before copies existed, each recording what it started on) get copies holding exactly
    /// their source's certificate and CA, owned by the cluster, created; a member whose source
    /// is not filled yet gets none (its Pod waits, naming the copy).
    #[test]
    fn copies_are_created_from_the_sources_the_pods_run_on() {
        let cluster = cert_manager_cluster();
        let a = certs::new_ca(&names(), now()).unwrap();
        let members: Vec<String> = (0..3).map(|i| format!("main-{i}")).collect();
        let mut sources: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members
            .iter()
            .map(|m| (m.clone(), secret(&a, m, &[&a])))
            .collect();
        let pods: BTreeMap<String, Pod> = members
            .iter()
            .map(|m| (m.clone(), pod_on(&sources[m])))
            .collect();
        sources.remove("main-2");
        let copies = plan_copies(&cluster, &members, &pods, &sources, &BTreeMap::new()).unwrap();
        let summaries: Vec<String> = copies.writes.iter().map(TlsWrite::summary).collect();
        assert_eq!(
            summaries,
            [
                "create Secret main-0-peer-mounted",
                "create Secret main-1-peer-mounted"
            ]
        );
        for member in ["main-0", "main-1"] {
            let copy = &copies.data[&mounted_peer_secret_name(member)];
            assert_eq!(held_of(copy), held_of(&sources[member]), "{member}");
            let host = vec![names().member_host(member)];
            assert_eq!(certs::check_secret(copy, &Use::Peer(host), now()), []);
        }
        let TlsWrite::CreateSecret(created) = &copies.writes[0] else {
            unreachable!()
        };
        assert_eq!(
            created.owner_references()[0].uid,
            "uid-1",
            "owned by the cluster"
        );
        assert_eq!(overlap_note(&copies.plan), None, "no CA change");
        let digests: BTreeMap<String, String> = copies
            .data
            .iter()
            .map(|(name, data)| (name.clone(), build::secret_digest(data)))
            .collect();
        assert!(copy_ready(&cluster, "main-0", &digests).is_ok());
        assert!(matches!(
            copy_ready(&cluster, "main-2", &digests),
            Err(TlsError::WaitingForPeerCopy { ref secret, .. }) if secret == "db/main-2-peer-mounted"
        ));
    }

    /// cert-manager renewed main-1 from a replaced issuer (CA B, `ca.crt` B alone): every copy
    /// is replaced at the version read, trusting A and B, main-1's keeping its certificate of
    /// A; the event names the CA and whom main-1 waits for. A new member whose source is of B
    /// gets no copy until the running members trust B.
    #[test]
    fn a_one_step_ca_change_is_replaced_by_an_overlap_in_the_copies() {
        let cluster = cert_manager_cluster();
        let (a, b) = (
            certs::new_ca(&names(), now()).unwrap(),
            certs::new_ca(&names(), now()).unwrap(),
        );
        let members: Vec<String> = (0..3).map(|i| format!("main-{i}")).collect();
        let mut sources: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members
            .iter()
            .map(|m| (m.clone(), secret(&a, m, &[&a])))
            .collect();
        let copy_secrets: BTreeMap<String, Secret> = members
            .iter()
            .map(|m| {
                let name = mounted_peer_secret_name(m);
                (m.clone(), as_secret(&cluster, &name, &sources[m]))
            })
            .collect();
        let copies: BTreeMap<String, &Secret> =
            copy_secrets.iter().map(|(m, s)| (m.clone(), s)).collect();
        let pods: BTreeMap<String, Pod> = members
            .iter()
            .map(|m| (m.clone(), pod_on(&sources[m])))
            .collect();
        let settled = plan_copies(&cluster, &members, &pods, &sources, &copies).unwrap();
        assert!(settled.writes.is_empty(), "settled: {:?}", settled.plan);

        let old_main_1 = sources["main-1"].clone();
        sources.insert("main-1".into(), secret(&b, "main-1", &[&b]));
        let mut known = members.clone();
        known.push("main-3".into());
        sources.insert("main-3".into(), secret(&b, "main-3", &[&b]));
        let changed = plan_copies(&cluster, &known, &pods, &sources, &copies).unwrap();
        let summaries: Vec<String> = changed.writes.iter().map(TlsWrite::summary).collect();
        assert_eq!(
            summaries,
            [
                "replace Secret main-0-peer-mounted",
                "replace Secret main-1-peer-mounted",
                "replace Secret main-2-peer-mounted",
            ]
        );
        for write in &changed.writes {
            let TlsWrite::ReplaceSecret(secret) = write else {
                unreachable!()
            };
            assert_eq!(secret.metadata.resource_version.as_deref(), Some("7"));
        }
        let both: BTreeSet<String> = [&a, &b]
            .iter()
            .map(|ca| held_of(&secret(ca, "main-0", &[ca])).unwrap().trust.issuer)
            .collect();
        let main_1 = held_of(&changed.data["main-1-peer-mounted"]).unwrap();
        assert_eq!(main_1.cert, held_of(&old_main_1).unwrap().cert, "A kept");
        assert_eq!(main_1.trust.trusts, both);
        assert!(!changed.data.contains_key("main-3-peer-mounted"));
        let note = overlap_note(&changed.plan).unwrap();
        assert!(
            note.contains("main-1 (until main-0, main-2 trust it)")
                && note.contains("main-3 (until main-0, main-1, main-2 trust it)"),
            "{note}"
        );
    }

    /// A plaintext cluster switched to TLS with a peer Secret you provide (or cert-manager's):
    /// its running Pods listen for peers on plain http:// only and record no peer trust. They
    /// present and verify no peer certificate, so they hold no copy back: every member gets
    /// its copy, and the switch's rolls can move the members onto it.
    #[test]
    fn plaintext_pods_hold_no_copy_back_in_a_switch_to_tls() {
        use k8s_openapi::api::core::v1::{Container, PodSpec};
        let cluster = cert_manager_cluster();
        let a = certs::new_ca(&names(), now()).unwrap();
        let members: Vec<String> = (0..3).map(|i| format!("main-{i}")).collect();
        let sources: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members
            .iter()
            .map(|m| (m.clone(), secret(&a, m, &[&a])))
            .collect();
        let plain = |peer: &str| Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: build::CONTAINER_NAME.into(),
                    args: Some(vec![
                        format!("--listen-peer-urls={peer}"),
                        "--listen-client-urls=http://0.0.0.0:2379".to_owned(),
                    ]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let mut pods: BTreeMap<String, Pod> = members
            .iter()
            .map(|m| (m.clone(), plain("http://0.0.0.0:2380")))
            .collect();
        let copies = plan_copies(&cluster, &members, &pods, &sources, &BTreeMap::new()).unwrap();
        assert_eq!(copies.writes.len(), 3, "{:?}", copies.plan);
        // A Pod serving peer TLS without a record (or whose flags cannot be read) may trust
        // anything: it still holds the others' copies back.
        pods.insert("main-0".into(), plain("https://0.0.0.0:2380"));
        let copies = plan_copies(&cluster, &members, &pods, &sources, &BTreeMap::new()).unwrap();
        let written: Vec<String> = copies.writes.iter().map(TlsWrite::summary).collect();
        assert_eq!(written, ["create Secret main-0-peer-mounted"]);
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
