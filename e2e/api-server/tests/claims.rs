//! Namespace claims against a real API server: the first install to act in a namespace holds it,
//! a second install is refused there (and told so by a Warning event on the object) but not in
//! another namespace, a clean stop hands the namespace over at once, a claim whose holder
//! stopped renewing is taken over, two installs racing for an expired claim never both win, one
//! install's concurrent reconciles in a namespace are all admitted, and an install whose RBAC
//! forbids the claims acts unguarded instead of stopping.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ListParams, PostParams};
use operator_runtime::claim::{OVERLAPPING_INSTALL, claim_lease_name};
use operator_runtime::{Claim, Events, NamespaceClaims};

const BINARY: &str = "etcd-cluster-operator";
const A: &str = "ops/a-etcd-operator-cluster";
const B: &str = "ops/b-etcd-operator-cluster";

async fn holder(client: &kube::Client, namespace: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), namespace)
        .get(&claim_lease_name(BINARY))
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
}

#[tokio::test(flavor = "multi_thread")]
async fn namespace_claims_against_the_api_server() {
    let (lk, client) = common::api_server().await;
    for ns in ["team-a", "team-b", "team-c", "team-d", "team-e"] {
        common::create_namespace(&client, ns).await;
    }
    let a = NamespaceClaims::new(client.clone(), BINARY, A.into());
    let b = NamespaceClaims::new(client.clone(), BINARY, B.into());

    // The first install to act in a namespace holds it; the second is refused there only.
    assert_eq!(a.claim("team-a").await.unwrap(), Claim::Ours);
    assert_eq!(holder(&client, "team-a").await.as_deref(), Some(A));
    assert_eq!(
        b.claim("team-a").await.unwrap(),
        Claim::Theirs { holder: A.into() }
    );
    assert_eq!(b.claim("team-b").await.unwrap(), Claim::Ours);
    assert_eq!(a.claim("team-a").await.unwrap(), Claim::Ours, "renewal");

    // `admit` says why on the object it leaves alone.
    let object = Api::<ConfigMap>::namespaced(client.clone(), "team-a")
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("main".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
        .unwrap();
    let events = Events::new(client.clone(), BINARY, Some("b-0".into()));
    assert!(!b.admit(&object, &events).await.unwrap());
    assert!(a.admit(&object, &events).await.unwrap());
    let warned = common::eventually(
        "the OverlappingInstall event",
        Duration::from_secs(10),
        || {
            let client = client.clone();
            async move {
                let list = Api::<Event>::namespaced(client, "team-a")
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                list.items
                    .into_iter()
                    .find(|e| {
                        e.reason.as_deref() == Some(OVERLAPPING_INSTALL)
                            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("main")
                    })
                    .ok_or_else(|| "no event yet".to_owned())
            }
        },
    )
    .await;
    let note = warned.note.unwrap_or_default();
    assert!(
        note.contains(A) && note.contains(B) && note.contains("team-a"),
        "{note}"
    );

    // A clean stop lets go: the other install takes the namespace at once.
    a.release_all().await;
    assert_eq!(holder(&client, "team-a").await, None);
    assert_eq!(b.claim("team-a").await.unwrap(), Claim::Ours);
    assert_eq!(holder(&client, "team-a").await.as_deref(), Some(B));

    // A holder that stopped renewing (its claim expired) is taken over.
    let stale = Timestamp::now() - SignedDuration::from_secs(600);
    let lease = |holder: &str| Lease {
        metadata: ObjectMeta {
            name: Some(claim_lease_name(BINARY)),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(stale)),
            lease_duration_seconds: Some(300),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), "team-c")
        .create(&PostParams::default(), &lease("ops/gone"))
        .await
        .unwrap();
    assert_eq!(a.claim("team-c").await.unwrap(), Claim::Ours);
    assert_eq!(holder(&client, "team-c").await.as_deref(), Some(A));

    // Two installs racing for one expired claim: exactly one wins, the other is refused or
    // gets the write conflict (and does not act either way).
    Api::<Lease>::namespaced(client.clone(), "team-d")
        .create(&PostParams::default(), &lease("ops/gone"))
        .await
        .unwrap();
    let (first, second) = tokio::join!(a.claim("team-d"), b.claim("team-d"));
    let winners = [first, second]
        .into_iter()
        .filter(|r| matches!(r, Ok(Claim::Ours)))
        .count();
    assert_eq!(winners, 1);
    let winner = holder(&client, "team-d").await.unwrap();
    assert!(winner == A || winner == B, "{winner}");

    // One install's many reconciles in one namespace at once (100 EtcdClusters applied
    // together, issue 24): every one of them is admitted, none fails on the claim's write
    // conflict with its own siblings.
    let one_process = std::sync::Arc::new(NamespaceClaims::new(client.clone(), BINARY, A.into()));
    let mut reconciles = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let claims = one_process.clone();
        reconciles.spawn(async move { claims.claim("team-e").await });
    }
    let results = reconciles.join_all().await;
    let refused: Vec<String> = results
        .iter()
        .filter(|r| !matches!(r, Ok(Claim::Ours)))
        .map(|r| format!("{r:?}"))
        .collect();
    assert!(
        refused.is_empty(),
        "{} of 20 concurrent claims of one install not Ours: {refused:?}",
        refused.len()
    );
    assert_eq!(holder(&client, "team-e").await.as_deref(), Some(A));

    // An install whose RBAC predates the claims (an older chart's Role) is refused the Lease:
    // it acts as it did before claims existed, rather than stopping.
    let kubeconfig = kube::config::Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some("system:serviceaccount:ops:old-chart".into());
    let old = NamespaceClaims::new(
        kube::Client::try_from(config).unwrap(),
        BINARY,
        "ops/old".into(),
    );
    assert_eq!(old.claim("team-c").await.unwrap(), Claim::Unguarded);
    assert!(old.admit(&object, &events).await.unwrap());
}
