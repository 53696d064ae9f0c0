#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The controller and `create-backup` against a real API server (localkube, API only), a real
//! etcd 3.5 and a real SeaweedFS: a backup reaches Succeeded with its artifact and is never run
//! again, a backup left Running by a dead operator is marked Interrupted, a missing Secret fails
//! with SecretNotFound and an event, and `create-backup --retain 2` keeps two backups.

mod common;

use std::time::Duration;

use common::{api_server, create_namespace, eventually};
use etcd_api::{BackupPhase, EtcdBackup, EtcdBackupStatus, EtcdCluster, EtcdClusterStatus};
use etcd_backup_operator::controller::{self, FIELD_MANAGER, Settings};
use etcd_backup_operator::create::{CreateBackup, create_backup};
use etcd_snapshot::SnapshotKey;
use k8s_apiextensions::CustomResourceDefinition;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as k8s_apiextensions;
use kube::Api;
use kube::api::{ListParams, PostParams};
use operator_runtime::{Readiness, apply_status};
use test_support::{EtcdCluster as Etcd, EtcdVersion, S3Server};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const NS: &str = "db";
const BUCKET: &str = "etcd-backups";

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn setup(client: &kube::Client, s3: &S3Server) {
    create_namespace(client, NS).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in etcd_api::crd::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let backups: Api<EtcdBackup> = Api::namespaced(client.clone(), NS);
    eventually("EtcdBackup served", Duration::from_secs(30), || async {
        backups
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret: Secret = from_json(serde_json::json!({
        "metadata": {"name": "s3-creds"},
        "stringData": {
            "AWS_ACCESS_KEY_ID": s3.access_key(),
            "AWS_SECRET_ACCESS_KEY": s3.secret_key(),
        },
    }));
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

fn s3_spec(s3: &S3Server, secret: &str) -> serde_json::Value {
    serde_json::json!({
        "bucket": BUCKET,
        "prefix": "nightly/",
        "endpoint": s3.endpoint(),
        "region": s3.region(),
        "forcePathStyle": true,
        "credentialsSecretRef": {"name": secret},
    })
}

async fn create(client: &kube::Client, name: &str, spec: serde_json::Value) -> EtcdBackup {
    let api: Api<EtcdBackup> = Api::namespaced(client.clone(), NS);
    let backup: EtcdBackup = from_json(serde_json::json!({
        "apiVersion": "etcd.operator.rs/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }));
    api.create(&PostParams::default(), &backup).await.unwrap()
}

async fn finished(client: &kube::Client, name: &str) -> EtcdBackupStatus {
    let api: Api<EtcdBackup> = Api::namespaced(client.clone(), NS);
    eventually(
        &format!("{name} finished"),
        Duration::from_secs(90),
        || async {
            let b = api.get(name).await.map_err(|e| e.to_string())?;
            match b.status {
                Some(s) if s.phase.is_some_and(BackupPhase::is_finished) => Ok(s),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

async fn objects(s3: &aws_sdk_s3::Client) -> Vec<String> {
    let out = s3.list_objects_v2().bucket(BUCKET).send().await.unwrap();
    out.contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

fn start_controller(client: &kube::Client) -> (CancellationToken, JoinHandle<()>) {
    let stop = CancellationToken::new();
    let settings = Settings {
        namespace: Some(NS.into()),
        max_concurrent_backups: 2,
        pod_name: Some("backup-operator-0".into()),
        install: "ops/test-etcd-operator-backup".into(),
    };
    let task = tokio::spawn(controller::run(
        client.clone(),
        settings,
        stop.clone(),
        Readiness::new(),
    ));
    (stop, task)
}

#[tokio::test(flavor = "multi_thread")]
async fn controller_runs_each_backup_once_and_reports_failures() {
    let ((_lk, client), etcd, s3) = tokio::join!(
        api_server(),
        async { Etcd::start(EtcdVersion::V3_5, 1).await.unwrap() },
        async {
            let s3 = S3Server::start().await.unwrap();
            s3.create_bucket(BUCKET).await.unwrap();
            s3
        }
    );
    setup(&client, &s3).await;
    let mut etcd_client = etcd.client().await.unwrap();
    etcd_client.put("/k", "v", None).await.unwrap();
    let s3_admin = s3.client();
    let api: Api<EtcdBackup> = Api::namespaced(client.clone(), NS);

    let (stop, task) = start_controller(&client);
    let first = create(
        &client,
        "first",
        serde_json::json!({"endpoints": etcd.endpoints(), "s3": s3_spec(&s3, "s3-creds")}),
    )
    .await;
    let done = finished(&client, "first").await;
    assert_eq!(done.phase, Some(BackupPhase::Succeeded), "{done:?}");
    let artifact = done.artifact.clone().unwrap();
    assert!(
        artifact
            .uri
            .starts_with(&format!("s3://{BUCKET}/nightly/first/")),
        "{}",
        artifact.uri
    );
    assert!(
        artifact
            .uri
            .contains(first.metadata.uid.as_deref().unwrap())
    );
    assert_eq!(artifact.cluster_id, format!("{:x}", etcd.cluster_id()));
    assert!(artifact.size_bytes > 0 && artifact.sha256.len() == 64);
    assert!(done.start_time.is_some() && done.completion_time.is_some());
    assert_eq!(objects(&s3_admin).await.len(), 1);

    // A missing Secret: Failed, reason and message naming it, and a Warning event.
    create(
        &client,
        "no-secret",
        serde_json::json!({"endpoints": etcd.endpoints(), "s3": s3_spec(&s3, "absent")}),
    )
    .await;
    let failed = finished(&client, "no-secret").await;
    assert_eq!(failed.phase, Some(BackupPhase::Failed));
    assert_eq!(failed.reason.as_deref(), Some("SecretNotFound"));
    assert_eq!(
        failed.message.as_deref(),
        Some("S3 credentials Secret db/absent not found")
    );
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    eventually("BackupFailed event", Duration::from_secs(20), || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("no-secret")
                    && e.reason.as_deref() == Some("BackupFailed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("SecretNotFound"))
            })
            .map(|_| ())
            .ok_or_else(|| format!("{} events", list.items.len()))
    })
    .await;

    // Stop the operator. Meanwhile a backup is "left Running" by a crashed operator.
    stop.cancel();
    task.await.unwrap();
    create(
        &client,
        "crashed",
        serde_json::json!({"endpoints": etcd.endpoints(), "s3": s3_spec(&s3, "s3-creds")}),
    )
    .await;
    let running: EtcdBackupStatus =
        from_json(serde_json::json!({"phase": "Running", "startTime": "2024-01-01T00:00:00Z"}));
    apply_status(&api, "crashed", FIELD_MANAGER, &running)
        .await
        .unwrap();
    // Another crashed run got further: its upload completed, only the outcome was not written
    // (the executor runs to completion, the status stays Running). Issue 17, defect 14.
    let completed = create(
        &client,
        "completed",
        serde_json::json!({"endpoints": etcd.endpoints(), "s3": s3_spec(&s3, "s3-creds")}),
    )
    .await;
    let job = etcd_backup_operator::execute::resolve(&client, &completed)
        .await
        .unwrap();
    let uploaded = etcd_backup_operator::execute::execute(&job, &CancellationToken::new())
        .await
        .unwrap();
    apply_status(&api, "completed", FIELD_MANAGER, &running)
        .await
        .unwrap();

    // A new operator: the crashed one is Interrupted, the first is left alone, a new one runs.
    let (stop, task) = start_controller(&client);
    let interrupted = finished(&client, "crashed").await;
    assert_eq!(interrupted.phase, Some(BackupPhase::Failed));
    assert_eq!(interrupted.reason.as_deref(), Some("Interrupted"));
    // It looked for an object before saying there is none (issue 17, defect 14).
    let message = interrupted.message.unwrap();
    assert!(
        message.contains("not re-run")
            && message.contains(&format!("under s3://{BUCKET}/nightly/crashed/ (checked)")),
        "{message}"
    );
    // The completed one is adopted: Succeeded with the artifact the lost write would have
    // recorded, read back and verified.
    let adopted = finished(&client, "completed").await;
    assert_eq!(adopted.phase, Some(BackupPhase::Succeeded), "{adopted:?}");
    assert_eq!(adopted.artifact.as_ref(), Some(&uploaded));
    assert!(
        adopted.message.as_deref().unwrap().contains("adopted"),
        "{adopted:?}"
    );
    etcd_client.put("/k", "v2", None).await.unwrap();
    create(
        &client,
        "second",
        serde_json::json!({"endpoints": etcd.endpoints(), "s3": s3_spec(&s3, "s3-creds")}),
    )
    .await;
    assert_eq!(
        finished(&client, "second").await.phase,
        Some(BackupPhase::Succeeded)
    );
    // The first backup was reconciled again by the new operator (it lists everything at start)
    // and not re-run: same status, and only the two objects exist.
    assert_eq!(api.get("first").await.unwrap().status.unwrap(), done);
    assert_eq!(objects(&s3_admin).await.len(), 3);
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn create_backup_with_retain_keeps_the_newest() {
    let ((_lk, client), etcd, s3) = tokio::join!(
        api_server(),
        async { Etcd::start(EtcdVersion::V3_5, 1).await.unwrap() },
        async {
            let s3 = S3Server::start().await.unwrap();
            s3.create_bucket(BUCKET).await.unwrap();
            s3
        }
    );
    setup(&client, &s3).await;
    // An EtcdCluster whose status (as the cluster operator writes it) points at the real etcd.
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), NS);
    let cluster: EtcdCluster = from_json(serde_json::json!({
        "apiVersion": "etcd.operator.rs/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": NS},
        "spec": {"size": 1, "version": "3.6.16"},
    }));
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let status: EtcdClusterStatus = from_json(serde_json::json!({
        "members": [{"name": "main-0", "clientURL": etcd.endpoints()[0], "healthy": true, "leader": true}],
    }));
    apply_status(&clusters, "main", "etcd-cluster-operator", &status)
        .await
        .unwrap();

    let (stop, task) = start_controller(&client);
    let mut etcd_client = etcd.client().await.unwrap();
    let s3_admin = s3.client();
    let request = CreateBackup {
        cluster: "main".into(),
        namespace: NS.into(),
        s3: from_json(s3_spec(&s3, "s3-creds")),
        timeout_seconds: None,
        wait: Some(Duration::from_secs(90)),
        retain: Some(2),
        delete_objects: true,
    };
    let api: Api<EtcdBackup> = Api::namespaced(client.clone(), NS);
    let mut names = Vec::new();
    let mut uris = Vec::new();
    for i in 0..3 {
        // A new revision each time: the keys differ in revision even within one second.
        etcd_client
            .put("/counter", i.to_string(), None)
            .await
            .unwrap();
        let outcome = create_backup(&client, &request).await.unwrap();
        assert!(outcome.succeeded(true), "{outcome:?}");
        assert!(outcome.name.starts_with("main-"), "{}", outcome.name);
        let status = api.get(&outcome.name).await.unwrap().status.unwrap();
        uris.push(status.artifact.unwrap().uri);
        names.push(outcome.name);
    }
    let mut left: Vec<String> = api
        .list(
            &ListParams::default()
                .labels("etcd.operator.rs/cluster=main,etcd.operator.rs/scheduled=true"),
        )
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|b| b.metadata.name)
        .collect();
    left.sort();
    let mut newest = names[1..].to_vec();
    newest.sort();
    assert_eq!(left, newest, "the oldest ({}) is gone", names[0]);
    let mut stored: Vec<String> = objects(&s3_admin)
        .await
        .iter()
        .map(|k| format!("s3://{BUCKET}/{k}"))
        .collect();
    stored.sort();
    let mut kept = uris[1..].to_vec();
    kept.sort();
    assert_eq!(stored, kept, "its object is gone too");
    // The newest by parsed key is the last one created.
    let newest_key = stored
        .iter()
        .map(|u| SnapshotKey::parse(u).unwrap())
        .max()
        .unwrap();
    assert_eq!(
        format!("s3://{BUCKET}/nightly/main/{}", newest_key.file_name()),
        uris[2]
    );
    stop.cancel();
    task.await.unwrap();
}
