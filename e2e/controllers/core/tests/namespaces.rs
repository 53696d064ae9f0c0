#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Namespace defaults (default ServiceAccount, kube-root-ca.crt) and namespace deletion that waits
//! for the content's own finalizers.

mod common;

use std::time::Duration;

use common::{api_server, eventually, obj};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

async fn root_ca(maps: &Api<ConfigMap>) -> ConfigMap {
    eventually("kube-root-ca.crt as published", WAIT, || async {
        let cm = maps
            .get_opt("kube-root-ca.crt")
            .await
            .unwrap()
            .ok_or("missing")?;
        let data_ok = cm
            .data
            .as_ref()
            .and_then(|d| d.get("ca.crt"))
            .map(String::as_str)
            == Some(PEM)
            && cm.data.as_ref().map(|d| d.len()) == Some(1);
        if data_ok {
            Ok(cm)
        } else {
            Err(format!("{:?}", cm.data))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_then_deletion_waits_for_finalizers() {
    let (_lk, client) = api_server().await;
    tokio::spawn(localkube_core_controllers::run_service_accounts(
        client.clone(),
        PEM.into(),
    ));
    tokio::spawn(localkube_core_controllers::run_namespaces(client.clone()));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &obj(json!({ "metadata": { "name": "app" } })),
        )
        .await
        .unwrap();

    // defaults appear, and come back when deleted or edited
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "app");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "app");
    eventually("default ServiceAccount", WAIT, || async {
        accounts
            .get_opt("default")
            .await
            .unwrap()
            .map(|_| ())
            .ok_or_else(|| "missing".to_string())
    })
    .await;
    let cm = root_ca(&maps).await;
    assert_eq!(
        cm.metadata.annotations.unwrap()["kubernetes.io/description"],
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
    );
    // the bootstrap namespaces get them too
    root_ca(&Api::namespaced(client.clone(), "kube-system")).await;
    maps.patch(
        "kube-root-ca.crt",
        &PatchParams::default(),
        &kube::api::Patch::Merge(json!({ "data": { "ca.crt": "forged", "x": "y" } })),
    )
    .await
    .unwrap();
    root_ca(&maps).await;
    maps.delete("kube-root-ca.crt", &Default::default())
        .await
        .unwrap();
    root_ca(&maps).await;
    accounts
        .delete("default", &Default::default())
        .await
        .unwrap();
    eventually("default ServiceAccount re-created", WAIT, || async {
        accounts
            .get_opt("default")
            .await
            .unwrap()
            .map(|_| ())
            .ok_or_else(|| "missing".to_string())
    })
    .await;

    // content: a held ConfigMap, a held custom resource, a plain Secret
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &obj(json!({
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }],
        },
    })))
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "app", &ar);
    eventually("widget created", WAIT, || async {
        let w: DynamicObject = obj(json!({ "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": { "name": "w", "finalizers": ["example.com/cleanup"] } }));
        widgets
            .create(&PostParams::default(), &w)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    maps.create(
        &PostParams::default(),
        &obj(json!({ "metadata": { "name": "held", "finalizers": ["example.com/cleanup"] } })),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "app");
    secrets
        .create(
            &PostParams::default(),
            &obj(json!({ "metadata": { "name": "plain" } })),
        )
        .await
        .unwrap();

    namespaces.delete("app", &Default::default()).await.unwrap();
    let ns = eventually("finalizers reported", WAIT, || async {
        let ns = namespaces.get("app").await.unwrap();
        let conds = ns
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let fin = conds
            .iter()
            .find(|c| c.type_ == "NamespaceFinalizersRemaining");
        match fin {
            Some(c) if c.status == "True" => Ok(ns),
            _ => Err(format!("{conds:?}")),
        }
    })
    .await;
    assert_eq!(
        ns.status.as_ref().unwrap().phase.as_deref(),
        Some("Terminating")
    );
    let conds = ns.status.unwrap().conditions.unwrap();
    let get = |t: &str| conds.iter().find(|c| c.type_ == t).unwrap().clone();
    let fin = get("NamespaceFinalizersRemaining");
    assert_eq!(fin.reason.as_deref(), Some("SomeFinalizersRemain"));
    assert_eq!(
        fin.message.as_deref(),
        Some(
            "Some content in the namespace has finalizers remaining: example.com/cleanup in 2 resource instances"
        )
    );
    let rem = get("NamespaceContentRemaining");
    assert_eq!(rem.reason.as_deref(), Some("SomeResourcesRemain"));
    assert_eq!(
        rem.message.as_deref(),
        Some(
            "Some resources are remaining: configmaps. has 1 resource instances, widgets.example.com has 1 resource instances"
        )
    );
    assert_eq!(
        get("NamespaceDeletionDiscoveryFailure").reason.as_deref(),
        Some("ResourcesDiscovered")
    );
    assert!(secrets.get_opt("plain").await.unwrap().is_none());
    // the defaults were deleted with everything else and are not re-created while terminating
    assert!(accounts.get_opt("default").await.unwrap().is_none());

    // the "operator" finishes: the namespace goes
    let release = json!({ "metadata": { "finalizers": null } });
    maps.patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    assert!(
        namespaces.get_opt("app").await.unwrap().is_some(),
        "finalized while a widget is held"
    );
    widgets
        .patch("w", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    eventually("namespace gone", WAIT, || async {
        match namespaces.get_opt("app").await.unwrap() {
            None => Ok(()),
            Some(ns) => Err(format!("{:?} {:?}", ns.spec, ns.status)),
        }
    })
    .await;
}
