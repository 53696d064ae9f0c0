#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The garbage collector: Background, Foreground and Orphan deletion across built-in kinds and
//! custom resources, and dangling references found at start.

mod common;

use std::time::Duration;

use common::{api_server, eventually, obj};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn owned(name: &str, owner: &ConfigMapOrCr, block: bool, finalizers: &[&str]) -> ConfigMap {
    obj(json!({
        "metadata": {
            "name": name,
            "finalizers": finalizers,
            "ownerReferences": [{
                "apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid,
                "blockOwnerDeletion": block,
            }],
        },
    }))
}

struct ConfigMapOrCr {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
}

async fn config_map(api: &Api<ConfigMap>, name: &str) -> ConfigMapOrCr {
    let cm = api
        .create(
            &PostParams::default(),
            &obj(json!({ "metadata": { "name": name } })),
        )
        .await
        .unwrap();
    ConfigMapOrCr {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        uid: cm.metadata.uid.unwrap(),
    }
}

async fn gone(api: &Api<ConfigMap>, name: &str) {
    eventually(&format!("{name} deleted"), WAIT, || async {
        match api.get_opt(name).await.unwrap() {
            None => Ok(()),
            Some(cm) => Err(format!("{:?}", cm.metadata)),
        }
    })
    .await;
}

fn with_policy(policy: &str) -> DeleteParams {
    match policy {
        "Foreground" => DeleteParams::foreground(),
        "Orphan" => DeleteParams::orphan(),
        _ => DeleteParams::background(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_foreground_orphan_and_custom_resources() {
    let (_lk, client) = api_server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    // a dangling reference that exists before the collector starts
    let ghost = ConfigMapOrCr {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "ghost".into(),
        uid: "00000000-dead".into(),
    };
    cms.create(
        &PostParams::default(),
        &owned("dangling", &ghost, false, &[]),
    )
    .await
    .unwrap();
    // and one whose owner exists: it stays
    let keeper = config_map(&cms, "keeper").await;
    cms.create(&PostParams::default(), &owned("kept", &keeper, false, &[]))
        .await
        .unwrap();

    tokio::spawn(localkube_core_controllers::run_gc(client.clone()));
    gone(&cms, "dangling").await;

    // Background: dependents of a deleted owner go
    let bg = config_map(&cms, "bg-owner").await;
    cms.create(&PostParams::default(), &owned("bg-a", &bg, true, &[]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &owned("bg-b", &bg, false, &[]))
        .await
        .unwrap();
    cms.delete("bg-owner", &with_policy("Background"))
        .await
        .unwrap();
    gone(&cms, "bg-a").await;
    gone(&cms, "bg-b").await;

    // Foreground: the owner stays until its blocking dependent is gone
    let fg = config_map(&cms, "fg-owner").await;
    cms.create(
        &PostParams::default(),
        &owned("fg-a", &fg, true, &["test.localkube.io/hold"]),
    )
    .await
    .unwrap();
    cms.delete("fg-owner", &with_policy("Foreground"))
        .await
        .unwrap();
    eventually("fg-a being deleted", WAIT, || async {
        let a = cms.get("fg-a").await.unwrap();
        if a.metadata.deletion_timestamp.is_some() {
            Ok(())
        } else {
            Err("not deleting".to_string())
        }
    })
    .await;
    let owner = cms.get("fg-owner").await.unwrap();
    assert_eq!(
        owner.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    cms.patch(
        "fg-a",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
    gone(&cms, "fg-a").await;
    gone(&cms, "fg-owner").await;

    // Orphan: the owner goes, the dependent stays without the reference
    let or = config_map(&cms, "or-owner").await;
    cms.create(&PostParams::default(), &owned("or-a", &or, true, &[]))
        .await
        .unwrap();
    cms.delete("or-owner", &with_policy("Orphan"))
        .await
        .unwrap();
    gone(&cms, "or-owner").await;
    let a = cms.get("or-a").await.unwrap();
    assert!(a.metadata.owner_references.unwrap_or_default().is_empty());
    assert!(a.metadata.deletion_timestamp.is_none());

    // custom resources: a CR owning a ConfigMap, a ConfigMap owning a CR
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = obj(json!({
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }],
        },
    }));
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w: DynamicObject = eventually("widget created", WAIT, || async {
        let w: DynamicObject = obj(json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "w1" } }));
        widgets.create(&PostParams::default(), &w).await.map_err(|e| e.to_string())
    })
    .await;
    let w_owner = ConfigMapOrCr {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        name: "w1".into(),
        uid: w.metadata.uid.unwrap(),
    };
    cms.create(
        &PostParams::default(),
        &owned("of-widget", &w_owner, true, &[]),
    )
    .await
    .unwrap();
    let cm_owner = config_map(&cms, "widget-owner").await;
    let owned_widget: DynamicObject = obj(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": { "name": "w2", "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "widget-owner", "uid": cm_owner.uid }] },
    }));
    widgets
        .create(&PostParams::default(), &owned_widget)
        .await
        .unwrap();

    widgets
        .delete("w1", &with_policy("Background"))
        .await
        .unwrap();
    gone(&cms, "of-widget").await;
    cms.delete("widget-owner", &with_policy("Background"))
        .await
        .unwrap();
    eventually("w2 deleted", WAIT, || async {
        match widgets.get_opt("w2").await.unwrap() {
            None => Ok(()),
            Some(w) => Err(format!("{:?}", w.metadata)),
        }
    })
    .await;

    // nothing with a live owner was touched
    let kept = cms.get("kept").await.unwrap();
    assert_eq!(kept.metadata.owner_references.unwrap().len(), 1);
}
