use super::*;

use crate::certs::{self, Issued};
use crate::naming::ClusterName;
use crate::tls::ManagedCa;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use time::OffsetDateTime;

pub(crate) fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

pub(crate) fn names() -> ClusterName {
    ClusterName::new("db", "main").with_tls(true, false)
}

fn members() -> Vec<String> {
    (0..3).map(|i| format!("main-{i}")).collect()
}

fn tls_cluster(peer: serde_json::Value) -> EtcdCluster {
    let mut cluster = EtcdCluster::new(
        "main",
        serde_json::from_value(serde_json::json!({"size": 3, "tls": {"peer": peer}})).unwrap(),
    );
    cluster.metadata.namespace = Some("db".into());
    cluster.metadata.uid = Some("uid-1".into());
    cluster
}

fn cert_manager() -> EtcdCluster {
    tls_cluster(serde_json::json!({"certManager": {"issuerRef": {"name": "ca"}}}))
}

fn provided() -> EtcdCluster {
    tls_cluster(serde_json::json!({"secretRef": {"name": "peer-certs"}}))
}

/// A peer Secret's data: a certificate for `member` issued by `issuer`, and `trusted` as
/// `ca.crt`.
pub(crate) fn secret(
    issuer: &Issued,
    member: &str,
    trusted: &[&Issued],
) -> BTreeMap<String, Vec<u8>> {
    let leaf = certs::issue_member(issuer, &names(), member, now(), certs::LEAF_VALIDITY).unwrap();
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

/// The Secrets as they are now, by name: their digests, peer trusts and client-side trust.
struct Secrets {
    digests: BTreeMap<String, String>,
    trusts: BTreeMap<String, PeerTrust>,
    public: BTreeMap<String, PublicTls>,
}

fn secrets(data: &BTreeMap<String, BTreeMap<String, Vec<u8>>>) -> Secrets {
    Secrets {
        digests: data
            .iter()
            .map(|(name, data)| (name.clone(), build::secret_digest(data)))
            .collect(),
        trusts: data
            .iter()
            .filter_map(|(name, data)| Some((name.clone(), PeerTrust::of_secret(data)?)))
            .collect(),
        public: data
            .iter()
            .filter_map(|(name, data)| Some((name.clone(), PublicTls::of_secret(data)?)))
            .collect(),
    }
}

/// A member Pod created from `at` (the Secrets then), as the executor annotates it.
fn pod_created(cluster: &EtcdCluster, member: &str, at: &Secrets) -> Pod {
    let mut annotations = BTreeMap::new();
    if let Some(hash) = build::member_tls_hash(cluster, member, &at.digests) {
        annotations.insert(build::ANNOTATION_TLS_HASH.to_owned(), hash);
    }
    if let Some(trust) = pod_annotation(cluster, member, &at.trusts) {
        annotations.insert(ANNOTATION_PEER_TRUST.to_owned(), trust);
    }
    let mut pod = Pod::default();
    pod.metadata.name = Some(member.to_owned());
    pod.metadata.annotations = Some(annotations);
    pod
}

fn refusals(cluster: &EtcdCluster, pods: &BTreeMap<String, Pod>, now: &Secrets) -> Vec<FieldError> {
    peer_trust_refusals(cluster, pods, &members(), &now.trusts, &now.digests)
}

/// Issue 19, CA overlap, the safety defect: cert-manager renewed member 1's peer certificate
/// from an issuer whose CA was replaced (A by B: `ca.crt` B alone, as a CA issuer writes it).
/// Members mount it through their copy (crate::overlap), which takes such a certificate only
/// once every peer trusts B; these tests put the change in the copy itself (as a copy written
/// without the overlap, or edited by hand, would be): the guard behind the copies.
/// The planner rolls main-1 onto it at once (its Secret changed); started on it, main-1 would
/// present a certificate main-0 and main-2 do not trust and refuse theirs: cut off, with the
/// other two the only voters left, and the next renewal or crash of either loses quorum.
/// Refused instead, before anything restarts, naming the Secret, the members and both ways.
#[test]
fn a_member_is_not_rolled_onto_a_certificate_of_a_ca_its_peers_do_not_trust() {
    let cluster = cert_manager();
    let (a, b) = (
        certs::new_ca(&names(), now()).unwrap(),
        certs::new_ca(&names(), now()).unwrap(),
    );
    let mut data: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members()
        .iter()
        .map(|m| (format!("{m}-peer-mounted"), secret(&a, m, &[&a])))
        .collect();
    let before = secrets(&data);
    let pods: BTreeMap<String, Pod> = members()
        .iter()
        .map(|m| (m.clone(), pod_created(&cluster, m, &before)))
        .collect();
    assert_eq!(refusals(&cluster, &pods, &before), [], "settled on CA A");

    data.insert("main-1-peer-mounted".into(), secret(&b, "main-1", &[&b]));
    let after = secrets(&data);
    // What the planner does with it: main-1's certificate hash changed, so main-1 is rolled.
    let mut observed = cluster_of_three();
    for member in members() {
        let pod_hash = pods[&member].annotations()[build::ANNOTATION_TLS_HASH].clone();
        observed.pods.get_mut(&member).unwrap().tls_hash = Some(pod_hash);
        let now = build::member_tls_hash(&cluster, &member, &after.digests).unwrap();
        observed.tls_hashes.insert(member, now);
    }
    let action = etcd_member::plan::next_action(&observed, &etcd_member::plan::Policy::default());
    assert!(
        matches!(&action, etcd_member::plan::Action::RollMember { member, .. } if member == "main-1"),
        "{action:?}"
    );
    // What the trust check says: refused, so the planner is not asked.
    let refused = refusals(&cluster, &pods, &after);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].field, "spec.tls.peer.certManager");
    let message = &refused[0].message;
    for part in [
        "Secret db/main-1-peer-mounted",
        "that members main-0, main-2 do not trust",
        "does not trust the CA of the certificates members main-0, main-2 present",
        "overlap",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

/// A settled 3-member cluster for the planner (main-0 leads).
fn cluster_of_three() -> etcd_member::state::Observed {
    use etcd_member::fixtures::{Build, V35, healthy};
    etcd_member::fixtures::cluster(3, V35)
        .members(vec![
            healthy(0, V35, true),
            healthy(1, V35, false),
            healthy(2, V35, false),
        ])
        .pods(&[0, 1, 2])
        .ready(&[0, 1, 2])
        .pvcs(&[0, 1, 2])
}

/// A renewal from the same CA, as cert-manager does every cycle, is no CA change.
#[test]
fn a_renewal_from_the_same_ca_passes() {
    let cluster = cert_manager();
    let a = certs::new_ca(&names(), now()).unwrap();
    let mut data: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members()
        .iter()
        .map(|m| (format!("{m}-peer-mounted"), secret(&a, m, &[&a])))
        .collect();
    let before = secrets(&data);
    let pods: BTreeMap<String, Pod> = members()
        .iter()
        .map(|m| (m.clone(), pod_created(&cluster, m, &before)))
        .collect();
    for member in ["main-1", "main-2"] {
        data.insert(format!("{member}-peer-mounted"), secret(&a, member, &[&a]));
    }
    assert_eq!(refusals(&cluster, &pods, &secrets(&data)), []);
}

/// A Secret you provide (one for every member) moved from CA A to B: with the overlap every
/// step passes once the previous one was rolled onto every member; a step taken before that,
/// or A to B at once, is refused.
#[test]
fn a_provided_secret_changes_ca_only_with_an_overlap_rolled_step_by_step() {
    let cluster = provided();
    let (a, b) = (
        certs::new_ca(&names(), now()).unwrap(),
        certs::new_ca(&names(), now()).unwrap(),
    );
    // One certificate for every member (a wildcard in practice; here main-0's names suffice,
    // the check reads only its CA).
    // Members mount it through their copies (crate::overlap); here each copy holds the
    // Secret as provided, as copies written without the overlap would.
    let step = |issuer: &Issued, trusted: &[&Issued]| {
        let shared = secret(issuer, "main-0", trusted);
        secrets(
            &members()
                .iter()
                .map(|m| (format!("{m}-peer-mounted"), shared.clone()))
                .collect(),
        )
    };
    let start = step(&a, &[&a]);
    let both = step(&a, &[&a, &b]);
    let issued_by_b = step(&b, &[&a, &b]);
    let done = step(&b, &[&b]);
    let all_on = |at: &Secrets| -> BTreeMap<String, Pod> {
        members()
            .iter()
            .map(|m| (m.clone(), pod_created(&cluster, m, at)))
            .collect()
    };
    // Each step against members that rolled onto the previous one: fine.
    for (running, next) in [
        (&start, &both),
        (&both, &issued_by_b),
        (&issued_by_b, &done),
    ] {
        assert_eq!(refusals(&cluster, &all_on(running), next), []);
    }
    // Mid-roll (main-0 rolled onto the previous step, the others not yet): the members still on
    // the step before are checked too.
    let mut mid = all_on(&start);
    mid.insert("main-0".into(), pod_created(&cluster, "main-0", &both));
    assert_eq!(refusals(&cluster, &mid, &both), []);
    // One refusal per copy: main-0's certificate of B is trusted by neither other member,
    // main-1's not by main-2 and main-2's not by main-1 (main-0 trusts both already).
    let early = refusals(&cluster, &mid, &issued_by_b);
    assert_eq!(early.len(), 3, "{early:?}");
    assert!(
        early[0]
            .message
            .starts_with("Secret db/main-0-peer-mounted")
            && early[0]
                .message
                .contains("that members main-1, main-2 do not trust"),
        "{}",
        early[0].message
    );
    assert!(early.iter().all(|e| e.field == "spec.tls.peer.secretRef"));
    // A to B at once: every member's copy.
    let at_once = refusals(&cluster, &all_on(&start), &done);
    assert_eq!(at_once.len(), 3, "{at_once:?}");
    assert!(at_once[1].message.contains("Secret db/main-1-peer-mounted"));
}

/// The operator-managed CA rotation (plan::ca_rotation) is the overlap: every step's member
/// Secrets pass against members on the step before, in every phase.
#[test]
fn every_step_of_the_operator_managed_ca_rotation_passes() {
    let cluster = tls_cluster(serde_json::json!({}));
    let a = certs::new_ca(&names(), now()).unwrap();
    let b = certs::new_ca(&names(), now()).unwrap();
    let [stable_a, trusting, issuing, stable_b] = crate::tls::rotation_phases(&a, &b);
    let at = |ca: &ManagedCa| -> Secrets {
        secrets(
            &members()
                .iter()
                .map(|m| {
                    let leaf =
                        certs::issue_member(&ca.issuing, &names(), m, now(), certs::LEAF_VALIDITY)
                            .unwrap();
                    (
                        format!("{m}-tls"),
                        BTreeMap::from([
                            ("tls.crt".to_owned(), leaf.cert_pem.into_bytes()),
                            ("tls.key".to_owned(), leaf.key_pem.into_bytes()),
                            ("ca.crt".to_owned(), ca.trust_pem.clone().into_bytes()),
                        ]),
                    )
                })
                .collect(),
        )
    };
    let phases = [&stable_a, &trusting, &issuing, &stable_b];
    for pair in phases.windows(2) {
        let (running, next) = (at(pair[0]), at(pair[1]));
        let pods: BTreeMap<String, Pod> = members()
            .iter()
            .map(|m| (m.clone(), pod_created(&cluster, m, &running)))
            .collect();
        assert_eq!(
            refusals(&cluster, &pods, &next),
            [],
            "{:?} -> {:?}",
            pair[0].phase(),
            pair[1].phase()
        );
    }
}

/// Who is judged: a Pod without the record is read from its Secret when its certificate hash
/// is current, and not judged otherwise; a member etcd lists without a Pod is judged (its
/// next Pod starts on the Secret as it is); a Pod being deleted is no peer to anyone.
#[test]
fn pods_without_a_record_members_without_a_pod_and_pods_being_deleted() {
    let cluster = cert_manager();
    let (a, b) = (
        certs::new_ca(&names(), now()).unwrap(),
        certs::new_ca(&names(), now()).unwrap(),
    );
    let mut data: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members()
        .iter()
        .map(|m| (format!("{m}-peer-mounted"), secret(&a, m, &[&a])))
        .collect();
    let before = secrets(&data);
    let mut pods: BTreeMap<String, Pod> = members()
        .iter()
        .map(|m| (m.clone(), pod_created(&cluster, m, &before)))
        .collect();
    // Pods an older operator created: only the certificate hash.
    for pod in pods.values_mut() {
        pod.metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(ANNOTATION_PEER_TRUST);
    }
    data.insert("main-1-peer-mounted".into(), secret(&b, "main-1", &[&b]));
    let after = secrets(&data);
    let refused = refusals(&cluster, &pods, &after);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].message.contains("main-0, main-2"));
    // main-1 has no Pod (it crashed): its next one would start on CA B.
    pods.remove("main-1");
    assert_eq!(refusals(&cluster, &pods, &after).len(), 1);
    // Not in etcd's list either (a PVC kept after a scale-down): nobody starts it.
    let listed = ["main-0".to_owned(), "main-2".to_owned()];
    assert_eq!(
        peer_trust_refusals(&cluster, &pods, &listed, &after.trusts, &after.digests),
        []
    );
    // Pods being deleted are no peers: with main-0's and main-2's going, main-1's next Pod
    // has no running member to be cut off from.
    let mut going = pods.clone();
    for member in ["main-0", "main-2"] {
        going.get_mut(member).unwrap().metadata.deletion_timestamp =
            Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    }
    assert_eq!(refusals(&cluster, &going, &after), []);
    // Without peer TLS there is nothing to check.
    let plain = cluster_without_peer_tls();
    assert_eq!(
        peer_trust_refusals(&plain, &pods, &members(), &after.trusts, &after.digests),
        []
    );

    fn cluster_without_peer_tls() -> EtcdCluster {
        let mut cluster = EtcdCluster::new(
            "main",
            serde_json::from_value(serde_json::json!({"size": 3, "tls": {"client": {}}})).unwrap(),
        );
        cluster.metadata.namespace = Some("db".into());
        cluster
    }
}

#[test]
fn the_record_reads_back_and_nothing_else_reads_as_one() {
    let a = certs::new_ca(&names(), now()).unwrap();
    let b = certs::new_ca(&names(), now()).unwrap();
    let trust = PeerTrust::of_secret(&secret(&a, "main-0", &[&b, &a])).unwrap();
    assert_eq!(trust.trusted.len(), 2);
    assert!(trust.trusted.contains(&trust.issuer));
    assert_eq!(PeerTrust::parse(&trust.annotation()), Some(trust.clone()));
    for garbage in ["", "trusts=ab", "issuer= trusts=ab", "issuer=ab other=1"] {
        assert_eq!(PeerTrust::parse(garbage), None, "{garbage:?}");
    }
    // ca.crt that did not sign the certificate: no record (the Secret is refused anyway).
    assert_eq!(PeerTrust::of_secret(&secret(&a, "main-0", &[&b])), None);
}

mod client_port {
    use super::*;

    fn client_cluster(client: serde_json::Value) -> EtcdCluster {
        let mut cluster = EtcdCluster::new(
            "main",
            serde_json::from_value(serde_json::json!({"size": 3, "tls": {"client": client}}))
                .unwrap(),
        );
        cluster.metadata.namespace = Some("db".into());
        cluster
    }

    fn cert_manager(client_cert_auth: bool) -> EtcdCluster {
        client_cluster(serde_json::json!({
            "clientCertAuth": client_cert_auth,
            "certManager": {"issuerRef": {"name": "ca"}},
        }))
    }

    /// The operators' client Secret: a client certificate of `issuer`, `trusted` as `ca.crt`.
    fn operators(issuer: &Issued, trusted: &[&Issued]) -> BTreeMap<String, Vec<u8>> {
        let leaf =
            certs::issue_operator_client(issuer, &names(), now(), certs::LEAF_VALIDITY).unwrap();
        let mut data = secret(issuer, "main-0", trusted);
        data.insert("tls.crt".into(), leaf.cert_pem.into_bytes());
        data.insert("tls.key".into(), leaf.key_pem.into_bytes());
        data
    }

    /// Member Pods built from the Secrets of `at` (their certificate hash).
    fn pods_at(cluster: &EtcdCluster, at: &Secrets) -> BTreeMap<String, Pod> {
        members()
            .iter()
            .map(|m| {
                let mut pod = Pod::default();
                pod.metadata.name = Some(m.clone());
                pod.metadata.annotations = Some(BTreeMap::from([(
                    build::ANNOTATION_TLS_HASH.to_owned(),
                    build::member_tls_hash(cluster, m, &at.digests).unwrap(),
                )]));
                (m.clone(), pod)
            })
            .collect()
    }

    fn check(cluster: &EtcdCluster, pods: &BTreeMap<String, Pod>, at: &Secrets) -> Vec<FieldError> {
        client_trust_refusals(cluster, pods, &members(), &at.public, &at.digests)
    }

    fn on_ca(ca: &Issued) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
        let mut data: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members()
            .iter()
            .map(|m| (format!("{m}-client-tls"), secret(ca, m, &[ca])))
            .collect();
        data.insert("main-operator-client-tls".into(), operators(ca, &[ca]));
        data
    }

    /// Issue 19, the client port: cert-manager renewed member 1's client certificate from an
    /// issuer whose CA was replaced (A by B, `ca.crt` B alone) while the operators' client
    /// Secret is still of A. Rolled onto it, main-1 would serve a certificate the operators
    /// cannot verify and refuse the one they present: the roll would stall on a member the
    /// operator cannot see. Refused before the roll, naming both Secrets and both ways.
    #[test]
    fn a_member_is_not_rolled_onto_a_client_certificate_the_operators_cannot_verify() {
        let cluster = cert_manager(true);
        let (a, b) = (
            certs::new_ca(&names(), now()).unwrap(),
            certs::new_ca(&names(), now()).unwrap(),
        );
        let mut data = on_ca(&a);
        let before = secrets(&data);
        let pods = pods_at(&cluster, &before);
        assert_eq!(check(&cluster, &pods, &before), [], "settled on CA A");

        data.insert("main-1-client-tls".into(), secret(&b, "main-1", &[&b]));
        let after = secrets(&data);
        let refused = check(&cluster, &pods, &after);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].field, "spec.tls.client.certManager");
        let message = &refused[0].message;
        for part in [
            "Secret db/main-1-client-tls:",
            "not signed by a CA of the ca.crt the operators trust (Secret \
             db/main-operator-client-tls)",
            "does not trust the client certificate the operators present",
            "(members main-1)",
        ] {
            assert!(message.contains(part), "{part:?} not in {message}");
        }
        // Without clientCertAuth the members do not check the operators' certificate.
        let lenient = cert_manager(false);
        let refused = check(&lenient, &pods_at(&lenient, &before), &after);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(!refused[0].message.contains("operators present"));

        // With an overlap (both sides trusting A and B) the same certificate passes.
        data.insert("main-operator-client-tls".into(), operators(&a, &[&a, &b]));
        data.insert("main-1-client-tls".into(), secret(&b, "main-1", &[&a, &b]));
        let overlap = secrets(&data);
        assert_eq!(check(&cluster, &pods, &overlap), []);
    }

    /// Who is judged: a member whose roll is pending or that etcd lists without a Pod; not a
    /// Pod running on the Secrets as they are (restarting nothing, the check has nothing to
    /// refuse), nor a Pod being deleted.
    #[test]
    fn only_members_about_to_start_are_judged() {
        let cluster = cert_manager(true);
        let (a, b) = (
            certs::new_ca(&names(), now()).unwrap(),
            certs::new_ca(&names(), now()).unwrap(),
        );
        let mut data = on_ca(&a);
        let mut pods = pods_at(&cluster, &secrets(&data));
        // The operators' Secret alone moved to B: no member restarts onto anything.
        data.insert("main-operator-client-tls".into(), operators(&b, &[&b]));
        assert_eq!(check(&cluster, &pods, &secrets(&data)), []);
        // main-2 has no Pod: its next one starts on its A certificate, which B does not sign.
        pods.remove("main-2");
        let refused = check(&cluster, &pods, &secrets(&data));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].message.contains("(members main-2)"));
        // Not in etcd's list (a PVC kept after a scale-down): nobody starts it.
        let listed = ["main-0".to_owned(), "main-1".to_owned()];
        let at = secrets(&data);
        assert_eq!(
            client_trust_refusals(&cluster, &pods, &listed, &at.public, &at.digests),
            []
        );
    }

    /// A Secret you provide for every member, and the operators' own: one refusal for the
    /// Secret, naming every member about to start on it; without `operatorSecretRef` the
    /// operators trust the members' own `ca.crt`, which always signs their certificate.
    #[test]
    fn secrets_you_provide() {
        let (a, b) = (
            certs::new_ca(&names(), now()).unwrap(),
            certs::new_ca(&names(), now()).unwrap(),
        );
        let cluster = client_cluster(serde_json::json!({
            "clientCertAuth": true,
            "secretRef": {"name": "serving"},
            "operatorSecretRef": {"name": "ops"},
        }));
        let mut data = BTreeMap::from([
            ("serving".to_owned(), secret(&a, "main-0", &[&a])),
            ("ops".to_owned(), operators(&a, &[&a])),
        ]);
        let pods = pods_at(&cluster, &secrets(&data));
        data.insert("serving".into(), secret(&b, "main-0", &[&b]));
        let refused = check(&cluster, &pods, &secrets(&data));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].field, "spec.tls.client.secretRef");
        assert!(
            refused[0]
                .message
                .contains("(members main-0, main-1, main-2)")
        );
        assert!(refused[0].message.contains("Secret db/ops"));

        let own = client_cluster(serde_json::json!({"secretRef": {"name": "serving"}}));
        let data = BTreeMap::from([("serving".to_owned(), secret(&a, "main-0", &[&a]))]);
        let pods = pods_at(&own, &secrets(&data));
        let data = BTreeMap::from([("serving".to_owned(), secret(&b, "main-0", &[&b]))]);
        assert_eq!(check(&own, &pods, &secrets(&data)), []);
    }

    /// The operator-managed CA rotation keeps both sides trusting each other at every step:
    /// the members' Secrets and the operators' client Secret move together.
    #[test]
    fn every_step_of_the_operator_managed_ca_rotation_passes_on_the_client_port() {
        let cluster = client_cluster(serde_json::json!({"clientCertAuth": true}));
        let a = certs::new_ca(&names(), now()).unwrap();
        let b = certs::new_ca(&names(), now()).unwrap();
        let [stable_a, trusting, issuing, stable_b] = crate::tls::rotation_phases(&a, &b);
        let at = |ca: &ManagedCa| -> Secrets {
            let bundle = ca.trust_pem.clone().into_bytes();
            let mut data: BTreeMap<String, BTreeMap<String, Vec<u8>>> = members()
                .iter()
                .map(|m| {
                    let mut secret = secret(&ca.issuing, m, &[]);
                    secret.insert("ca.crt".into(), bundle.clone());
                    (format!("{m}-tls"), secret)
                })
                .collect();
            let mut ops = operators(&ca.issuing, &[]);
            ops.insert("ca.crt".into(), bundle.clone());
            data.insert("main-operator-client-tls".into(), ops);
            secrets(&data)
        };
        let phases = [&stable_a, &trusting, &issuing, &stable_b];
        for pair in phases.windows(2) {
            let (running, next) = (at(pair[0]), at(pair[1]));
            let pods = pods_at(&cluster, &running);
            assert_eq!(
                check(&cluster, &pods, &next),
                [],
                "{:?} -> {:?}",
                pair[0].phase(),
                pair[1].phase()
            );
        }
    }
}
