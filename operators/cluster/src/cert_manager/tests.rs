use super::*;
use etcd_api::{CertManagerSource, ClientTls, EtcdClusterSpec, PeerTls, TlsSpec};
use k8s_openapi::ByteString;

const UID: &str = "4b2c0a3e-0000-4000-8000-000000000001";

fn issuer(name: &str, kind: Option<&str>) -> IssuerReference {
    IssuerReference {
        name: name.to_owned(),
        kind: kind.map(str::to_owned),
        group: None,
    }
}

/// A cluster `main` in `db`; cert-manager on the sides given an issuer.
fn cluster(peer: Option<IssuerReference>, client: Option<IssuerReference>) -> EtcdCluster {
    let mut spec: EtcdClusterSpec =
        serde_json::from_value(json!({"size": 3, "version": "3.6.16"})).unwrap();
    spec.tls = Some(TlsSpec {
        peer: Some(PeerTls {
            cert_manager: peer.map(|issuer_ref| CertManagerSource { issuer_ref }),
            ..PeerTls::default()
        }),
        client: Some(ClientTls {
            cert_manager: client.map(|issuer_ref| CertManagerSource { issuer_ref }),
            ..ClientTls::default()
        }),
    });
    let mut cluster = EtcdCluster::new("main", spec);
    cluster.metadata.namespace = Some("db".into());
    cluster.metadata.uid = Some(UID.into());
    cluster
}

fn names() -> ClusterName {
    ClusterName::new("db", "main").with_tls(true, true)
}

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

#[test]
fn member_certificate_names_the_members_sans_usages_issuer_and_owner() {
    let c = cluster(Some(issuer("etcd-ca", None)), None);
    let object =
        member_certificate(&c, &names(), "main-1", Side::Peer, &issuer("etcd-ca", None)).unwrap();
    let value = serde_json::to_value(&object).unwrap();
    assert_eq!(value["apiVersion"], "cert-manager.io/v1");
    assert_eq!(value["kind"], "Certificate");
    assert_eq!(value["metadata"]["name"], "main-1-peer-tls");
    assert_eq!(value["metadata"]["namespace"], "db");
    let spec = &value["spec"];
    assert_eq!(spec["secretName"], "main-1-peer-tls");
    assert_eq!(spec["commonName"], "main-1");
    let dns: Vec<&str> = spec["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(dns, certs::member_dns_names(&names(), "main-1"));
    // What etcd checks a peer by, and what clients through the client Service dial.
    for needed in [
        "main-1.main.db.svc",
        "main-client.db.svc",
        "main-client",
        "localhost",
    ] {
        assert!(dns.contains(&needed), "{needed} in {dns:?}");
    }
    assert_eq!(spec["ipAddresses"], json!(["127.0.0.1", "::1"]));
    assert_eq!(
        spec["usages"],
        json!([
            "server auth",
            "client auth",
            "digital signature",
            "key encipherment"
        ])
    );
    // cert-manager's defaults, written out.
    assert_eq!(
        spec["issuerRef"],
        json!({"name": "etcd-ca", "kind": "Issuer", "group": "cert-manager.io"})
    );
    assert_eq!(
        spec["secretTemplate"]["labels"]["etcd.operator.rs/cluster"],
        "main"
    );
    let owners = object.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "EtcdCluster");
    assert_eq!(owners[0].name, "main");
    assert_eq!(owners[0].uid, UID);
    assert_eq!(owners[0].controller, Some(true));
}

#[test]
fn client_side_certificates_and_the_operators_one() {
    let cluster_issuer = IssuerReference {
        name: "corp-ca".into(),
        kind: Some("ClusterIssuer".into()),
        group: Some("cert-manager.io".into()),
    };
    let c = cluster(None, Some(cluster_issuer.clone()));
    let member = member_certificate(&c, &names(), "main-0", Side::Client, &cluster_issuer).unwrap();
    let member = serde_json::to_value(&member).unwrap();
    assert_eq!(member["spec"]["secretName"], "main-0-client-tls");
    assert_eq!(
        member["spec"]["issuerRef"],
        json!({"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"})
    );
    let operator = operator_client_certificate(&c, &names(), &cluster_issuer).unwrap();
    let operator = serde_json::to_value(&operator).unwrap();
    assert_eq!(operator["metadata"]["name"], "main-operator-client-tls");
    assert_eq!(operator["spec"]["secretName"], "main-operator-client-tls");
    assert_eq!(operator["spec"]["commonName"], "etcd-operator");
    // A client certificate only: no serverAuth, no SANs.
    assert_eq!(
        operator["spec"]["usages"],
        json!(["client auth", "digital signature", "key encipherment"])
    );
    assert!(operator["spec"].get("dnsNames").is_none());
    // The Secret the backup and restore operators read for this cluster.
    assert_eq!(
        c.operator_client_secret()
            .map(|s| (s.name, s.present_certificate)),
        Some(("main-operator-client-tls".to_owned(), true))
    );
}

#[test]
fn expected_secrets_per_side() {
    let n = names();
    // No cert-manager side: nothing to wait for.
    assert!(expected_for_member(&cluster(None, None), &n, "main-0").is_empty());
    // Peer only: the member's peer certificate; the operators' one is operator-managed.
    let peer = expected_for_member(&cluster(Some(issuer("a", None)), None), &n, "main-0");
    assert_eq!(
        peer.iter()
            .map(|e| (e.name.as_str(), e.field))
            .collect::<Vec<_>>(),
        [("main-0-peer-tls", "spec.tls.peer.certManager")]
    );
    assert_eq!(peer[0].usage, Use::Peer(vec!["main-0.main.db.svc".into()]));
    // Both sides, each with its issuer, and the operators' client certificate.
    let both = expected_for_member(
        &cluster(Some(issuer("a", None)), Some(issuer("b", None))),
        &n,
        "main-4",
    );
    assert_eq!(
        both.iter()
            .map(|e| (e.name.as_str(), e.issuer.name.as_str(), e.usage.clone()))
            .collect::<Vec<_>>(),
        [
            (
                "main-4-peer-tls",
                "a",
                Use::Peer(vec!["main-4.main.db.svc".into()])
            ),
            (
                "main-4-client-tls",
                "b",
                Use::ClientServing(vec!["main-4.main.db.svc".into()])
            ),
            ("main-operator-client-tls", "b", Use::OperatorClient),
        ]
    );
    // cert-manager sides are not operator-managed: no CA of the operator's own.
    assert!(!etcd_api::tls::operator_managed(c_tls(&cluster(
        Some(issuer("a", None)),
        Some(issuer("b", None))
    ))));
    assert!(etcd_api::tls::operator_managed(c_tls(&cluster(
        Some(issuer("a", None)),
        None
    ))));
}

fn c_tls(c: &EtcdCluster) -> &TlsSpec {
    c.spec.tls.as_ref().unwrap()
}

fn secret(data: &[(&str, &str)]) -> Secret {
    Secret {
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

#[test]
fn a_secret_is_pending_until_filled_then_checked() {
    let n = names();
    let usage = Use::Peer(vec![n.member_host("main-0")]);
    // cert-manager creates the Secret late, or empty first.
    assert_eq!(judge(None, &usage, now()), Issued::Pending);
    assert_eq!(
        judge(
            Some(&secret(&[("tls.crt", ""), ("tls.key", "")])),
            &usage,
            now()
        ),
        Issued::Pending
    );
    let ca = certs::new_ca(&n, now()).unwrap();
    let good = certs::issue_member(&ca, &n, "main-0", now(), certs::LEAF_VALIDITY).unwrap();
    let filled = secret(&[
        ("tls.crt", &good.cert_pem),
        ("tls.key", &good.key_pem),
        ("ca.crt", &ca.cert_pem),
    ]);
    assert!(matches!(
        judge(Some(&filled), &usage, now()),
        Issued::Usable(_)
    ));
    // An issuer that does not fill ca.crt: unusable, said so.
    let no_ca = secret(&[("tls.crt", &good.cert_pem), ("tls.key", &good.key_pem)]);
    assert_eq!(
        judge(Some(&no_ca), &usage, now()),
        Issued::Unusable(vec![CertProblem::MissingKey { key: "ca.crt" }])
    );
    // Another member's certificate: the SAN is missing.
    let other = certs::issue_member(&ca, &n, "main-1", now(), certs::LEAF_VALIDITY).unwrap();
    let wrong = secret(&[
        ("tls.crt", &other.cert_pem),
        ("tls.key", &other.key_pem),
        ("ca.crt", &ca.cert_pem),
    ]);
    assert_eq!(
        judge(Some(&wrong), &usage, now()),
        Issued::Unusable(vec![CertProblem::MissingSan {
            name: "main-0.main.db.svc".into()
        }])
    );
}

#[test]
fn members_mount_the_secrets_cert_manager_fills() {
    let c = cluster(Some(issuer("a", None)), Some(issuer("b", None)));
    let volumes = build::member_tls_volumes(&c, "main-2");
    assert_eq!(
        volumes
            .iter()
            .map(|(_, dir, secret)| (*dir, secret.as_str()))
            .collect::<Vec<_>>(),
        [
            // The peer Secret through the operator's mounted copy of it (crate::overlap).
            (build::PEER_TLS_DIR, "main-2-peer-mounted"),
            (build::CLIENT_TLS_DIR, "main-2-client-tls")
        ]
    );
    // Peer from cert-manager, client operator-managed.
    let mixed = cluster(Some(issuer("a", None)), None);
    let volumes = build::member_tls_volumes(&mixed, "main-2");
    assert_eq!(volumes[1].2, "main-2-tls");
}

/// cert-manager renews a certificate by writing a new one into the same Secret. The member
/// Pods record the digest of the Secrets they mount (`etcd.operator.rs/tls-hash`), so the
/// renewal must change the hash of the members that mount that Secret, and only theirs; while
/// a Secret is pending or unusable its members' hash is unknown (the planner rolls nobody for
/// an unknown hash). Before, usable cert-manager Secrets had no digest at all: member Pods of
/// a cert-manager cluster carried no hash and a renewal never rolled them.
#[test]
fn a_renewal_by_cert_manager_changes_the_certificate_hash_of_its_member_only() {
    let n = names();
    let c = cluster(Some(issuer("a", None)), Some(issuer("b", None)));
    let ca = certs::new_ca(&n, now()).unwrap();
    let filled = |member: &str, side: Side| {
        let issued = certs::issue_member(&ca, &n, member, now(), certs::LEAF_VALIDITY).unwrap();
        let usage = match side {
            Side::Peer => Use::Peer(vec![n.member_host(member)]),
            Side::Client => Use::ClientServing(vec![n.member_host(member)]),
        };
        let data = secret(&[
            ("tls.crt", &issued.cert_pem),
            ("tls.key", &issued.key_pem),
            ("ca.crt", &ca.cert_pem),
        ]);
        judge(Some(&data), &usage, now())
    };
    // A peer Secret reaches its member through the mounted copy (crate::overlap), which takes
    // a renewal by the same CA at once: the copy's digest changes with it.
    let mounted = |member: &str, side: Side| match side {
        Side::Peer => etcd_api::tls::mounted_peer_secret_name(member),
        Side::Client => cert_manager_member_secret_name(member, side),
    };
    let mut digests = BTreeMap::new();
    for member in ["main-0", "main-1"] {
        for side in [Side::Peer, Side::Client] {
            let digest = filled(member, side).digest().unwrap();
            digests.insert(mounted(member, side), digest);
        }
    }
    let hash = |digests: &BTreeMap<String, String>, member: &str| {
        build::member_tls_hash(&c, member, digests)
    };
    let (before_0, before_1) = (hash(&digests, "main-0"), hash(&digests, "main-1"));
    assert!(before_0.is_some() && before_1.is_some());

    // cert-manager renews main-1's peer certificate: a new key and certificate, same Secret.
    let renewed = filled("main-1", Side::Peer).digest().unwrap();
    digests.insert(mounted("main-1", Side::Peer), renewed);
    assert_eq!(
        hash(&digests, "main-0"),
        before_0,
        "main-0 mounts nothing renewed"
    );
    assert!(
        hash(&digests, "main-1").is_some_and(|h| Some(&h) != before_1.as_ref()),
        "main-1 must roll onto its renewed certificate"
    );

    // Pending (being re-created) or unusable: no digest, the hash is unknown.
    assert_eq!(Issued::Pending.digest(), None);
    assert_eq!(
        Issued::Unusable(vec![CertProblem::MissingKey { key: "ca.crt" }]).digest(),
        None
    );
    digests.remove("main-1-client-tls");
    assert_eq!(hash(&digests, "main-1"), None);
}
