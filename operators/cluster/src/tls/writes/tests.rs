//! The TLS writes a pass plans, from what it read, without a cluster: each write the executor
//! would make, in order, and that a pass after them plans none (reconciles are idempotent).

use std::collections::BTreeMap;

use etcd_api::EtcdCluster;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use serde_json::json;
use time::OffsetDateTime;

use super::{TlsPlan, TlsRead, TlsWrite, member_secret, plan};
use crate::build;
use crate::cert_manager::member_ready;
use crate::tls::{
    CA_ROTATION, CERTIFICATE_RENEWED, ClusterTls, MemberSets, Prepared, ROTATE_CA_ANNOTATION,
    Renewal, TlsError,
};

const UID: &str = "4b2c0a3e-0000-4000-8000-000000000002";

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

/// `main` in `db`, three members, with `tls` as its spec.tls.
fn cluster(tls: serde_json::Value) -> EtcdCluster {
    let spec = serde_json::from_value(json!({"size": 3, "version": "3.5.35", "tls": tls})).unwrap();
    let mut cluster = EtcdCluster::new("main", spec);
    cluster.metadata.namespace = Some("db".into());
    cluster.metadata.uid = Some(UID.into());
    cluster
}

/// Both sides operator-managed.
fn managed() -> EtcdCluster {
    cluster(json!({"peer": {}, "client": {}}))
}

fn members(n: u32) -> Vec<String> {
    (0..n).map(|i| format!("main-{i}")).collect()
}

/// A member Pod carrying the certificate hash of the Secrets it mounts now (adopted).
fn pods_of(
    cluster: &EtcdCluster,
    members: &[String],
    digests: &BTreeMap<String, String>,
) -> BTreeMap<String, Pod> {
    members
        .iter()
        .map(|member| {
            let mut pod = Pod::default();
            pod.metadata.name = Some(member.clone());
            let hash = build::member_tls_hash(cluster, member, digests).unwrap_or_default();
            pod.metadata.annotations = Some(BTreeMap::from([(
                build::ANNOTATION_TLS_HASH.to_owned(),
                hash,
            )]));
            pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
                conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            (member.clone(), pod)
        })
        .collect()
}

/// What the pass plans for `cluster` with `members` (all with a volume) and `pods`, from `read`
/// (every Secret the plan looks at not read yet is taken as missing).
fn plan_at(
    cluster: &EtcdCluster,
    members: &[String],
    pods: &BTreeMap<String, Pod>,
    read: &TlsRead,
    at: OffsetDateTime,
) -> Result<TlsPlan, TlsError> {
    let sets = MemberSets {
        known: members,
        with_volume: members,
        pods,
    };
    plan(cluster, &sets, read, at, crate::certs::LEAF_VALIDITY)
}

fn summaries(writes: &[TlsWrite]) -> Vec<String> {
    writes.iter().map(TlsWrite::summary).collect()
}

fn ready(prepared: Prepared) -> ClusterTls {
    match prepared {
        Prepared::Ready(tls) => *tls,
        Prepared::Invalid(errors) => panic!("refused: {errors:?}"),
    }
}

/// Makes `writes` on `read` as the API server would: a created Secret gets resourceVersion 1,
/// a replaced one the next; a created Certificate exists.
fn apply(read: &mut TlsRead, writes: &[TlsWrite]) {
    for write in writes {
        match write {
            TlsWrite::CreateSecret(secret) => {
                let mut secret = (**secret).clone();
                assert!(read.secret(&secret.name_any()).is_none(), "created twice");
                secret.metadata.resource_version = Some("1".into());
                read.secrets.insert(secret.name_any(), Some(secret));
            }
            TlsWrite::ReplaceSecret(secret) => {
                let mut secret = (**secret).clone();
                let old = read
                    .secret(&secret.name_any())
                    .expect("replaced a missing Secret");
                assert_eq!(
                    old.metadata.resource_version, secret.metadata.resource_version,
                    "a replace carries the resourceVersion read"
                );
                let version: u64 = old
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap()
                    .parse()
                    .unwrap();
                secret.metadata.resource_version = Some((version + 1).to_string());
                read.secrets.insert(secret.name_any(), Some(secret));
            }
            TlsWrite::CreateCertificate(certificate) => {
                read.certificates.insert(certificate.name_any(), true);
            }
        }
    }
}

/// A new operator-managed cluster: the CA first (it signs the rest), the operators' client
/// certificate, then each member's; the pass after them writes nothing.
#[test]
fn a_new_cluster_gets_its_ca_then_the_client_and_member_certificates_once() {
    let c = managed();
    let members = members(3);
    let mut read = TlsRead::default();
    let first = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    assert_eq!(
        summaries(&first.writes),
        [
            "create Secret main-ca",
            "create Secret main-operator-client-tls",
            "create Secret main-0-tls",
            "create Secret main-1-tls",
            "create Secret main-2-tls",
        ]
    );
    let tls = ready(first.prepared);
    assert!(tls.ca.is_some() && tls.etcd.is_some());
    assert_eq!(
        tls.secret_digests.keys().collect::<Vec<_>>(),
        ["main-0-tls", "main-1-tls", "main-2-tls"]
    );
    // The Secrets as written, read by the next pass: nothing more to write, the same digests.
    apply(&mut read, &first.writes);
    let pods = pods_of(&c, &members, &tls.secret_digests);
    let second = plan_at(&c, &members, &pods, &read, now()).unwrap();
    assert!(second.writes.is_empty(), "{:?}", summaries(&second.writes));
    assert_eq!(ready(second.prepared).secret_digests, tls.secret_digests);
}

/// A third of its lifetime left: a member and the operators' client certificate are issued
/// again in the same Secret (a replace at the version read), each reported; a member whose Pod
/// an older operator built (no certificate hash) keeps its certificate until it is adopted.
#[test]
fn due_certificates_are_replaced_in_place_except_an_unadopted_members() {
    let c = managed();
    let members = members(2);
    let mut read = TlsRead::default();
    let first = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    apply(&mut read, &first.writes);
    let digests = ready(first.prepared).secret_digests;
    let mut pods = pods_of(&c, &members, &digests);
    pods.get_mut("main-1").unwrap().metadata.annotations = None;
    let later = now() + time::Duration::days(2 * 365 + 1);
    let renewal = plan_at(&c, &members, &pods, &read, later).unwrap();
    assert_eq!(
        summaries(&renewal.writes),
        [
            "replace Secret main-operator-client-tls",
            "replace Secret main-0-tls",
        ]
    );
    let tls = ready(renewal.prepared);
    let reasons: Vec<&str> = tls.changes.iter().map(|(reason, _)| *reason).collect();
    assert_eq!(reasons, [CERTIFICATE_RENEWED, CERTIFICATE_RENEWED]);
    assert_ne!(tls.secret_digests["main-0-tls"], digests["main-0-tls"]);
    assert_eq!(tls.secret_digests["main-1-tls"], digests["main-1-tls"]);
    apply(&mut read, &renewal.writes);
}

/// The CA Secret is missing while a member certificate it issued exists: a new CA would cut
/// the members off from each other. Refused, naming the Secrets, and nothing is written.
#[test]
fn a_lost_ca_is_refused_and_nothing_is_written() {
    let c = managed();
    let members = members(3);
    let mut read = TlsRead::default();
    let first = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    apply(&mut read, &first.writes);
    read.secrets.insert("main-ca".into(), None);
    let planned = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    assert!(
        planned.writes.is_empty(),
        "{:?}",
        summaries(&planned.writes)
    );
    let Prepared::Invalid(errors) = planned.prepared else {
        panic!("not refused");
    };
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "spec.tls");
    assert!(
        errors[0].message.contains("db/main-ca") && errors[0].message.contains("main-0-tls"),
        "{}",
        errors[0].message
    );
}

/// A Secret you provide that is missing: refused naming the field and the Secret; the operator
/// issues nothing for such a cluster.
#[test]
fn a_missing_provided_secret_is_refused_and_nothing_is_written() {
    let c = cluster(json!({"peer": {"secretRef": {"name": "peer-certs"}}}));
    let planned = plan_at(
        &c,
        &members(3),
        &BTreeMap::new(),
        &TlsRead::default(),
        now(),
    )
    .unwrap();
    assert!(planned.writes.is_empty());
    let Prepared::Invalid(errors) = planned.prepared else {
        panic!("not refused");
    };
    assert_eq!(errors[0].field, "spec.tls.peer.secretRef");
    assert_eq!(errors[0].message, "Secret db/peer-certs does not exist");
}

/// A rotation asked for by the annotation, with every member settled on the current Secrets:
/// the CA Secret is replaced last in the pass (the members' certificates were made sure of
/// first), carrying the next CA; asking again with the same value does nothing.
#[test]
fn a_requested_ca_rotation_replaces_the_ca_secret_last() {
    let mut c = managed();
    let members = members(3);
    let mut read = TlsRead::default();
    let first = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    apply(&mut read, &first.writes);
    let pods = pods_of(&c, &members, &ready(first.prepared).secret_digests);
    c.metadata.annotations = Some(BTreeMap::from([(
        ROTATE_CA_ANNOTATION.to_owned(),
        "2026-11-26".to_owned(),
    )]));
    let rotation = plan_at(&c, &members, &pods, &read, now()).unwrap();
    assert_eq!(summaries(&rotation.writes), ["replace Secret main-ca"]);
    let reasons: Vec<&str> = ready(rotation.prepared)
        .changes
        .iter()
        .map(|(reason, _)| *reason)
        .collect();
    assert_eq!(reasons, [CA_ROTATION]);
    let TlsWrite::ReplaceSecret(ca) = &rotation.writes[0] else {
        unreachable!()
    };
    assert!(ca.data.as_ref().unwrap().contains_key("next.crt"));
    apply(&mut read, &rotation.writes);
    // The next pass gives every member the bundle of both CAs (each Secret replaced); none
    // starts a second rotation for the same request.
    let trusting = plan_at(&c, &members, &pods, &read, now()).unwrap();
    assert_eq!(
        summaries(&trusting.writes),
        [
            "replace Secret main-operator-client-tls",
            "replace Secret main-0-tls",
            "replace Secret main-1-tls",
            "replace Secret main-2-tls",
        ]
    );
}

/// cert-manager on both sides: the missing Certificates are created (the operators' client one
/// first); while their Secrets are unfilled nothing is known and nothing refused; once filled
/// and the Certificates exist, nothing is written.
#[test]
fn cert_manager_certificates_are_created_once_and_their_secrets_judged() {
    let c = cluster(json!({
        "peer": {"certManager": {"issuerRef": {"name": "etcd-ca"}}},
        "client": {"certManager": {"issuerRef": {"name": "etcd-ca"}}},
    }));
    let members = members(1);
    let mut read = TlsRead::default();
    let first = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    assert_eq!(
        summaries(&first.writes),
        [
            "create Certificate main-operator-client-tls",
            "create Certificate main-0-peer-tls",
            "create Certificate main-0-client-tls",
        ]
    );
    let tls = ready(first.prepared);
    assert!(tls.etcd.is_none() && tls.secret_digests.is_empty());
    apply(&mut read, &first.writes);
    let second = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    assert!(second.writes.is_empty(), "{:?}", summaries(&second.writes));

    // Before the member's Pod: it waits for cert-manager, naming the Certificate.
    let ready_now = member_ready(&c, "main-0", &read, now()).unwrap();
    assert!(ready_now.writes.is_empty());
    assert!(matches!(
        ready_now.ready,
        Err(TlsError::WaitingForCertManager { ref certificate, .. }) if certificate == "db/main-0-peer-tls"
    ));
    // With the Certificates not there yet, they are planned too.
    let fresh = member_ready(&c, "main-0", &TlsRead::default(), now()).unwrap();
    assert_eq!(
        summaries(&fresh.writes),
        [
            "create Certificate main-0-peer-tls",
            "create Certificate main-0-client-tls",
            "create Certificate main-operator-client-tls",
        ]
    );
}

/// The member certificate made just before its Pod: created when missing, kept when sound;
/// with renewal not allowed, a due one is kept too.
#[test]
fn a_member_certificate_before_its_pod() {
    let c = managed();
    let members = members(1);
    let mut read = TlsRead::default();
    let first = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    apply(&mut read, &first.writes);
    let ca = ready(first.prepared).ca.unwrap();
    let renew = Renewal::WhenDue(crate::certs::LEAF_VALIDITY);
    let (write, (name, _, change)) = member_secret(&c, &ca, "main-1", None, now(), renew).unwrap();
    assert_eq!(name, "main-1-tls");
    assert_eq!(
        write.as_ref().map(TlsWrite::summary).as_deref(),
        Some("create Secret main-1-tls")
    );
    assert!(change.is_none());
    let existing: Option<&Secret> = read.secret("main-0-tls");
    let (write, _) = member_secret(&c, &ca, "main-0", existing, now(), renew).unwrap();
    assert!(write.is_none());
    let later = now() + time::Duration::days(2 * 365 + 1);
    let (write, _) = member_secret(&c, &ca, "main-0", existing, later, Renewal::Never).unwrap();
    assert!(write.is_none());
    let (write, (_, _, change)) = member_secret(&c, &ca, "main-0", existing, later, renew).unwrap();
    assert_eq!(
        write.as_ref().map(TlsWrite::summary).as_deref(),
        Some("replace Secret main-0-tls")
    );
    assert_eq!(change.map(|(reason, _)| reason), Some(CERTIFICATE_RENEWED));
}

/// cert-manager issues the peer certificates: each pass reads every member's mounted copy;
/// the first creates them from the filled Secrets (after the Certificates), their digests and
/// peer trusts are what the Pods are built from, and a pass after them writes nothing. Then
/// cert-manager renews main-1 from a replaced issuer (CA B, `ca.crt` B alone): the copies are
/// replaced with the overlap (trusting A and B, main-1's keeping its certificate of A), reported
/// as an event, and the trust guard (crate::trust) lets every member roll onto them.
#[test]
fn peer_certificates_reach_members_through_their_copies() {
    use crate::trust::{PeerTrust, peer_trust_refusals, pod_annotation};
    let c = cluster(json!({"peer": {"certManager": {"issuerRef": {"name": "etcd-ca"}}}}));
    let names = crate::observe::cluster_name(&c);
    let members = members(3);
    let (a, b) = (
        crate::certs::new_ca(&names, now()).unwrap(),
        crate::certs::new_ca(&names, now()).unwrap(),
    );
    let fill = |read: &mut TlsRead, member: &str, ca: &crate::certs::Issued| {
        let leaf =
            crate::certs::issue_member(ca, &names, member, now(), crate::certs::LEAF_VALIDITY)
                .unwrap();
        let mut secret =
            build::tls_secret(&c, &format!("{member}-peer-tls"), &leaf, Some(&ca.cert_pem))
                .unwrap();
        secret.metadata.owner_references = None;
        read.secrets.insert(secret.name_any(), Some(secret));
    };
    let mut read = TlsRead::default();
    let certificates = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    apply(&mut read, &certificates.writes);
    for member in &members {
        fill(&mut read, member, &a);
    }
    let first = plan_at(&c, &members, &BTreeMap::new(), &read, now()).unwrap();
    assert_eq!(
        summaries(&first.writes),
        [
            "create Secret main-0-peer-mounted",
            "create Secret main-1-peer-mounted",
            "create Secret main-2-peer-mounted",
        ]
    );
    let tls = ready(first.prepared);
    assert!(tls.peer_trusts.contains_key("main-0-peer-mounted"));
    apply(&mut read, &first.writes);
    // Pods built as the executor builds them: the certificate hash and the peer trust record.
    let mut pods = pods_of(&c, &members, &tls.secret_digests);
    for (member, pod) in &mut pods {
        let record = pod_annotation(&c, member, &tls.peer_trusts).unwrap();
        pod.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(crate::trust::ANNOTATION_PEER_TRUST.to_owned(), record);
    }
    let second = plan_at(&c, &members, &pods, &read, now()).unwrap();
    assert!(second.writes.is_empty(), "{:?}", summaries(&second.writes));

    fill(&mut read, "main-1", &b);
    let change = plan_at(&c, &members, &pods, &read, now()).unwrap();
    assert_eq!(
        summaries(&change.writes),
        [
            "replace Secret main-0-peer-mounted",
            "replace Secret main-1-peer-mounted",
            "replace Secret main-2-peer-mounted",
        ]
    );
    let tls_now = ready(change.prepared);
    let reasons: Vec<&str> = tls_now.changes.iter().map(|(r, _)| *r).collect();
    assert_eq!(reasons, [crate::overlap::PEER_CA_OVERLAP]);
    let main_1: &PeerTrust = &tls_now.peer_trusts["main-1-peer-mounted"];
    assert_eq!(main_1.issuer, tls.peer_trusts["main-1-peer-mounted"].issuer);
    assert_eq!(main_1.trusted.len(), 2, "A and B");
    // Every member rolls (its copy changed), and the guard lets each one.
    for member in &members {
        assert_ne!(
            build::member_tls_hash(&c, member, &tls_now.secret_digests),
            build::member_tls_hash(&c, member, &tls.secret_digests),
            "{member}"
        );
    }
    let refused = peer_trust_refusals(
        &c,
        &pods,
        &members,
        &tls_now.peer_trusts,
        &tls_now.secret_digests,
    );
    assert_eq!(refused, []);
}
