//! kube-rs (client and kube-runtime) against localkube, spec §g item 5: a watcher over 1,200
//! objects (paginated list), compaction then a 410 ERROR event then a relist, selector
//! transitions, the finalizer JSON patches, status/spec isolation, RV-checked Lease updates,
//! and RBAC for a ServiceAccount token.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>() },
        "data": { "k": name },
    }))
    .unwrap()
}

#[tokio::test]
async fn watcher_lists_in_pages_and_relists_after_compaction() {
    let lk = start().await;
    let client = client(&lk).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..1200 {
        api.create(
            &PostParams::default(),
            &cm(&format!("cm-{i:04}"), &[("batch", "a")]),
        )
        .await
        .unwrap();
    }
    // A paginated list: 500 + 500 + 200, one consistent revision.
    let page = api
        .list(&ListParams::default().labels("batch=a").limit(500))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 500);
    let token = page.metadata.continue_.clone().expect("a continue token");
    assert_eq!(
        page.metadata.remaining_item_count, None,
        "no count with a selector"
    );
    let page2 = api
        .list(
            &ListParams::default()
                .labels("batch=a")
                .limit(500)
                .continue_token(&token),
        )
        .await
        .unwrap();
    assert_eq!(page2.items.len(), 500);
    assert_eq!(
        page2.metadata.resource_version,
        page.metadata.resource_version
    );

    // The watcher's initial list sees all 1,200.
    let stream = watcher(
        api.clone(),
        watcher::Config::default().labels("batch=a").page_size(500),
    );
    let mut stream = Box::pin(stream);
    let mut seen = 0;
    while let Some(event) = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .unwrap()
    {
        match event.unwrap() {
            watcher::Event::InitApply(_) => seen += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen, 1200);

    // An old resourceVersion after compaction: the ERROR 410 event inside a 200 stream.
    let old_rv = page.metadata.resource_version.clone().unwrap();
    // Two writes after it, then compaction up to the latest: old_rv + 1 is history now.
    api.create(&PostParams::default(), &cm("after", &[("batch", "a")]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("after-2", &[("batch", "a")]))
        .await
        .unwrap();
    let mut etcd = etcd_client::Client::connect([lk.etcd_endpoint().unwrap()], None)
        .await
        .unwrap();
    let rev = etcd
        .get(
            "/registry/",
            Some(etcd_client::GetOptions::new().with_count_only()),
        )
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    etcd.compact(
        rev,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    let mut raw = api
        .watch(&kube::api::WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(10), raw.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        kube::api::WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert!(
                e.message.starts_with("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // A continue token from before the compaction is now a 410 on the list itself.
    let expired = api
        .list(
            &ListParams::default()
                .labels("batch=a")
                .limit(500)
                .continue_token(&token),
        )
        .await
        .unwrap_err();
    match expired {
        kube::Error::Api(s) => assert_eq!(s.code, 410, "{s:?}"),
        other => panic!("{other:?}"),
    }
    // The watcher's own watch started from its list's resourceVersion, which is compacted
    // now: kube-runtime sees the 410 ERROR event and relists (all 1,202 objects).
    let mut saw_expired = false;
    let mut relisted = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .unwrap()
            .unwrap()
        {
            Err(watcher::Error::WatchError(s)) if s.code == 410 => saw_expired = true,
            Err(other) => panic!("unexpected watcher error: {other}"),
            Ok(watcher::Event::InitApply(_)) => relisted += 1,
            Ok(watcher::Event::InitDone) => break,
            Ok(_) => {}
        }
    }
    assert!(saw_expired, "the watcher got the 410");
    assert_eq!(relisted, 1202, "and relisted everything");
    // Events keep flowing; a label change out of the selector is a delete.
    api.patch(
        "cm-0001",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"batch": "b"}}})),
    )
    .await
    .unwrap();
    let deleted = loop {
        match tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Delete(o) => break o,
            _ => continue,
        }
    };
    assert_eq!(deleted.metadata.name.as_deref(), Some("cm-0001"));
}

#[tokio::test]
async fn finalizers_status_isolation_leases_and_rbac() {
    let lk = start().await;
    let client = client(&lk).await;

    // kube-runtime's finalizer patch: `test` null on a missing field, then add.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("fin", &[]))
        .await
        .unwrap();
    let add: json_patch_ops::Ops = json_patch_ops::add_first_finalizer("example.com/cleanup");
    cms.patch("fin", &PatchParams::default(), &Patch::Json::<()>(add.0))
        .await
        .unwrap();
    cms.delete("fin", &DeleteParams::default()).await.unwrap();
    let marked = cms.get("fin").await.unwrap();
    assert!(
        marked.metadata.deletion_timestamp.is_some(),
        "still there, marked for deletion"
    );
    let remove = json_patch_ops::remove_finalizer(0, "example.com/cleanup");
    cms.patch("fin", &PatchParams::default(), &Patch::Json::<()>(remove.0))
        .await
        .unwrap();
    assert!(
        cms.get_opt("fin").await.unwrap().is_none(),
        "gone once the last finalizer is removed"
    );

    // A status write cannot change spec; a spec write cannot change status.
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}
    }))
    .unwrap();
    deploys.create(&PostParams::default(), &d).await.unwrap();
    deploys
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 9}, "status": {"replicas": 3}})),
        )
        .await
        .unwrap();
    deploys
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}, "status": {"replicas": 7}})),
        )
        .await
        .unwrap();
    let now = deploys.get("d").await.unwrap();
    assert_eq!(now.spec.unwrap().replicas, Some(2));
    assert_eq!(now.status.unwrap().replicas, Some(3));
    assert_eq!(now.metadata.generation, Some(2));

    // Leases: an update with a stale resourceVersion is a 409, as leader election needs.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})).unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut by_b = created.clone();
    by_b.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases
        .replace("leader", &PostParams::default(), &by_b)
        .await
        .unwrap();
    let mut by_c = created.clone();
    by_c.spec.as_mut().unwrap().holder_identity = Some("c".into());
    match leases
        .replace("leader", &PostParams::default(), &by_c)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(
                s.message,
                "Operation cannot be fulfilled on leases.coordination.k8s.io \"leader\": the object has been modified; please apply your changes to the latest version and try again"
            );
        }
        other => panic!("{other:?}"),
    }

    // RBAC: a ServiceAccount token is forbidden until a Role allows it.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "apps"}})).unwrap(),
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "apps");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "op"}})).unwrap(),
    )
    .await
    .unwrap();
    let token = sas
        .create_token_request(
            "op",
            &PostParams::default(),
            &serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap(),
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let as_sa = token_client(&lk, &token).await;
    let sa_cms: Api<ConfigMap> = Api::namespaced(as_sa.clone(), "apps");
    match sa_cms.list(&ListParams::default()).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 403);
            assert_eq!(
                s.message,
                r#"configmaps is forbidden: User "system:serviceaccount:apps:op" cannot list resource "configmaps" in API group "" in the namespace "apps""#
            );
        }
        other => panic!("{other:?}"),
    }
    let rbac = json!([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "read-cm", "namespace": "apps"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "read-cm", "namespace": "apps"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
         "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "apps"}]}
    ]);
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(client.clone(), "apps");
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(rbac[0].clone()).unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(client.clone(), "apps");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(rbac[1].clone()).unwrap(),
        )
        .await
        .unwrap();
    // Allowed now (the binding applies at once); creating is still not.
    sa_cms
        .list(&ListParams::default())
        .await
        .expect("list allowed by the Role");
    let created = sa_cms
        .create(&PostParams::default(), &cm("nope", &[]))
        .await
        .unwrap_err();
    match created {
        kube::Error::Api(s) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("{other:?}"),
    }
}

/// The JSON patches kube-runtime's `finalizer()` sends (kube-runtime `finalizer.rs`).
mod json_patch_ops {
    pub struct Ops(pub json_patch::Patch);

    pub fn add_first_finalizer(name: &str) -> Ops {
        Ops(serde_json::from_value(serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [name]}
        ]))
        .unwrap())
    }

    pub fn remove_finalizer(index: usize, name: &str) -> Ops {
        Ops(serde_json::from_value(serde_json::json!([
            {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": name},
            {"op": "remove", "path": format!("/metadata/finalizers/{index}")}
        ]))
        .unwrap())
    }
}
