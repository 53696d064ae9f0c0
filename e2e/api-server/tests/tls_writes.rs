//! The cluster operator's TLS writes (`tls::prepare`: read, `tls::writes::plan`, write) against a
//! real API server. Two passes that race on a new cluster's Secrets (two operator processes,
//! one not yet aware it lost its Lease) must end on one CA: a pass whose create of a Secret
//! loses to another writer's plans again from theirs, so nothing it issued from its own CA is
//! written. A pass after them writes nothing.
//!
//! A racing pass may also read the CA Secret before the other created it and the member
//! Secrets after: it then refuses (the CA missing while member certificates exist) and writes
//! nothing, as the operator did before its writes were planned (same reads, same order); the
//! next pass reads both as they are.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use etcd_api::EtcdCluster;
use etcd_cluster_operator::certs;
use etcd_cluster_operator::tls::{ClusterTls, MemberSets, Prepared, prepare};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::PostParams;
use time::OffsetDateTime;

const NS: &str = "db";

fn ready(prepared: Prepared) -> ClusterTls {
    match prepared {
        Prepared::Ready(tls) => *tls,
        Prepared::Invalid(errors) => panic!("refused: {errors:?}"),
    }
}

fn pem(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn racing_passes_settle_on_one_ca_and_a_later_pass_writes_nothing() {
    let (_lk, client) = common::api_server().await;
    common::create_namespace(&client, NS).await;
    common::install_crds(&client, NS).await;
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), NS);
    let cluster: EtcdCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "etcd.operator.rs/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": NS},
        "spec": {"size": 3, "version": "3.5.35", "tls": {"peer": {}, "client": {}}},
    }))
    .unwrap();
    let cluster = clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let members: Vec<String> = (0..3).map(|i| format!("main-{i}")).collect();
    let pods: BTreeMap<String, Pod> = BTreeMap::new();
    let sets = MemberSets {
        known: &members,
        with_volume: &members,
        pods: &pods,
    };
    let now = OffsetDateTime::now_utc();
    let validity = certs::LEAF_VALIDITY;

    let (a, b) = tokio::join!(
        prepare(&client, &cluster, &sets, now, validity),
        prepare(&client, &cluster, &sets, now, validity),
    );
    let mut passed = vec![];
    for prepared in [a.unwrap(), b.unwrap()] {
        match prepared {
            Prepared::Ready(tls) => passed.push(*tls),
            Prepared::Invalid(errors) => {
                assert_eq!(errors.len(), 1, "{errors:?}");
                assert!(
                    errors[0]
                        .message
                        .contains("is missing while member certificates it issued"),
                    "{errors:?}"
                );
            }
        }
    }
    let a = passed.first().expect("both racing passes refused").clone();
    let ca = a.ca.clone().unwrap().issuing.cert_pem;
    for other in &passed {
        let other_ca = &other.ca.as_ref().unwrap().issuing.cert_pem;
        assert_eq!(*other_ca, ca, "the two passes saw two CAs");
        assert_eq!(other.secret_digests, a.secret_digests);
    }

    // What is stored: the one CA, and every certificate issued by it.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    assert_eq!(pem(&secrets.get("main-ca").await.unwrap(), "tls.crt"), ca);
    let mut names: Vec<String> = members.iter().map(|m| format!("{m}-tls")).collect();
    names.push("main-operator-client-tls".into());
    let mut versions = BTreeMap::new();
    for name in &names {
        let secret = secrets.get(name).await.unwrap();
        assert!(
            certs::signed_by(&pem(&secret, "tls.crt"), &ca),
            "{name} was issued by another CA"
        );
        assert_eq!(pem(&secret, "ca.crt"), ca, "{name} trusts another CA");
        versions.insert(name.clone(), secret.metadata.resource_version.clone());
    }

    // A pass after them finds everything as it should be and writes nothing.
    let again = ready(
        prepare(&client, &cluster, &sets, now, validity)
            .await
            .unwrap(),
    );
    assert_eq!(again.secret_digests, a.secret_digests);
    for name in &names {
        let secret = secrets.get(name).await.unwrap();
        assert_eq!(
            secret.metadata.resource_version, versions[name],
            "{name} was written again"
        );
    }
}
