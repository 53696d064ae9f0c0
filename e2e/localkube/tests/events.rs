//! Events through both views (spec §a10, §g item 2): kube-rs's `Recorder` writes
//! events.k8s.io/v1 (a create, then a merge patch of `series` for a repeat), and
//! `kubectl describe` finds them through core/v1 with `involvedObject.*` field selectors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::json;

#[tokio::test]
async fn recorder_events_show_in_kubectl_describe() {
    let lk = start().await;
    let client = client(&lk).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "watched"}})).unwrap(),
        )
        .await
        .unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "etcd-cluster-operator".into(),
            instance: Some("op-0".into()),
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "MemberAdded".into(),
        note: Some("added member main-2 as a learner".into()),
        action: "Scale".into(),
        secondary: None,
    };
    let reference = cm.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    // The core view, selected the way kubectl describe selects.
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let selected = core
        .list(&ListParams::default().fields(&format!(
            "involvedObject.name=watched,involvedObject.namespace=default,involvedObject.uid={}",
            cm.metadata.uid.clone().unwrap()
        )))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 1, "one event, repeated as a series");
    let e = &selected.items[0];
    assert_eq!(e.reason.as_deref(), Some("MemberAdded"));
    assert_eq!(
        e.message.as_deref(),
        Some("added member main-2 as a learner")
    );
    assert_eq!(
        e.reporting_component.as_deref(),
        Some("etcd-cluster-operator")
    );
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));

    let k = clients(KubePair::Current);
    let described = lk
        .kubectl(&k, &["describe", "configmap", "watched"])
        .unwrap();
    assert!(described.contains("MemberAdded"), "{described}");
    assert!(
        described.contains("added member main-2 as a learner"),
        "{described}"
    );
}
