//! The backup operator end to end (issue #7): the chart installed with helm on the local control
//! plane, the backup operator in its Pod, a real etcd cluster in Pods and a real S3 store
//! (SeaweedFS) in a Pod behind a Service. The chart's CronJob, on a one-minute schedule, produces
//! Succeeded EtcdBackups of the live cluster and retention keeps exactly `RETAIN` (their objects
//! too); an on-demand EtcdBackup's object restores with `etcdutl snapshot restore` to the keys
//! written; a backup naming a missing Secret fails with `SecretNotFound` in its status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use common::*;
use etcd_api::{BackupArtifact, BackupPhase, EtcdBackup};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::ListParams;
use sha2::{Digest, Sha256};
use test_support::process::TestDir;
use test_support::{AddressBlock, ClusterState, EtcdMember, EtcdMemberConfig, EtcdVersion, Tools};

const VERSION: &str = "3.5.1";
const CLUSTER: &str = "main";
const BUCKET: &str = "etcd-backups";
/// The S3 Service as Pods reach it, through cluster DNS.
const S3_ENDPOINT: &str = "http://s3.db.svc.cluster.local:8333";
const S3_SECRET: &str = "etcd-backup-s3";
/// Scheduled runs waited for, and Succeeded scheduled backups retention keeps.
const RUNS: usize = 3;
const RETAIN: usize = 2;
const SCHEDULED_PREFIX: &str = "scheduled/";
const MANUAL_PREFIX: &str = "manual/";
/// Keys written before the on-demand backup; its restored snapshot must hold each of them.
const KEYS: usize = 50;
const SCHEDULED_LABEL: &str = "etcd.operator.rs/scheduled=true";
/// Generous for a 2-core machine shared with other scenarios.
const STEP: Duration = Duration::from_secs(180);
/// First minute boundary (≤ 60 s) plus `RUNS - 1` more minutes plus the last run itself.
const SCHEDULED_RUNS: Duration = Duration::from_secs(60 * RUNS as u64 + 90);

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_backups_are_retained_and_an_on_demand_backup_restores() {
    let env = Env::start().await;
    let tools = Tools::from_env();
    let weed = tools.weed().unwrap();
    // Everything the scenario needs starts at once: the S3 Pod, its Service, the credentials
    // (weed without an S3 config accepts any), and the cluster.
    env.apply(&s3_manifests(&weed.display().to_string()))
        .unwrap_or_else(|e| panic!("applying the S3 Pod: {e}"));
    env.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {S3_SECRET}}}\nstringData:\n  \
         AWS_ACCESS_KEY_ID: e2e-access\n  AWS_SECRET_ACCESS_KEY: e2e-secret\n"
    ))
    .unwrap();
    env.apply(&cluster_yaml(CLUSTER, 1, VERSION)).unwrap();

    let s3 = s3_from_host(&env).await;
    env.wait_available(CLUSTER, 1, VERSION, STEP).await;
    let written = write_keys(&env).await;

    // The scheduled backup, once the bucket it writes to exists.
    let scheduled_values = format!(
        "scheduledBackup.enabled=true,scheduledBackup.schedule=*/1 * * * *,\
         scheduledBackup.clusterName={CLUSTER},scheduledBackup.namespace={NS},\
         scheduledBackup.s3.bucket={BUCKET},scheduledBackup.s3.prefix={SCHEDULED_PREFIX},\
         scheduledBackup.s3.endpoint={S3_ENDPOINT},scheduledBackup.s3.forcePathStyle=true,\
         scheduledBackup.s3.credentialsSecret={S3_SECRET},scheduledBackup.timeoutSeconds=120,\
         scheduledBackup.retain={RETAIN},scheduledBackup.deleteObjects=true"
    );
    env.helm_upgrade(&["--set", &scheduled_values]);

    // While the CronJob waits for its minute: an on-demand backup and one naming no Secret.
    env.apply(&on_demand_backup("main-manual-1", S3_SECRET))
        .unwrap();
    env.apply(&on_demand_backup("main-no-secret", "no-such-secret"))
        .unwrap();

    let manual = wait_finished(&env, "main-manual-1").await;
    let status = manual.status.clone().unwrap();
    if status.phase != Some(BackupPhase::Succeeded) {
        fail(&env, &format!("main-manual-1 did not succeed: {status:?}"));
    }
    let artifact = status.artifact.unwrap();
    check_artifact(&env, "main-manual-1", &artifact, written.revision);
    let key = object_key(&artifact, MANUAL_PREFIX);
    let object = get_object(&s3, &key).await;
    assert_eq!(object.len() as i64, artifact.size_bytes, "{}", artifact.uri);
    assert_eq!(
        hex(&Sha256::digest(&object)),
        artifact.sha256,
        "the object's SHA-256 is the one in status.artifact"
    );
    let restored = restore(&tools, &object).await;
    assert!(
        restored.revision >= written.revision,
        "the snapshot is at revision {} but the keys were written by revision {}",
        restored.revision,
        written.revision
    );
    assert_eq!(
        restored.keys, written.keys,
        "the restored snapshot holds exactly the keys written"
    );

    let refused = wait_finished(&env, "main-no-secret").await;
    let status = refused.status.unwrap();
    assert_eq!(status.phase, Some(BackupPhase::Failed), "{status:?}");
    assert_eq!(
        status.reason.as_deref(),
        Some("SecretNotFound"),
        "{status:?}"
    );
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains(&format!("{NS}/no-such-secret")),
        "{message}"
    );
    assert!(status.artifact.is_none(), "{status:?}");
    let failed = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed")
        .unwrap_or_else(|| panic!("no Failed condition: {status:?}"));
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "SecretNotFound")
    );
    let events = env.events_for("main-no-secret").await.join("\n");
    assert!(events.contains("SecretNotFound"), "{events}");

    // The CronJob's runs: each Job succeeds; retention keeps the newest RETAIN Succeeded
    // scheduled backups and deletes the others' objects.
    let seen = wait_scheduled_runs(&env).await;
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let remaining = backups
        .list(&ListParams::default().labels(SCHEDULED_LABEL))
        .await
        .unwrap()
        .items;
    assert!(
        seen.len() >= RUNS,
        "each of the {RUNS} completed runs produced a Succeeded backup; seen: {seen:?}"
    );
    // name → (object key, artifact) of the scheduled backups that remain.
    let mut kept = BTreeMap::new();
    for backup in &remaining {
        let name = backup.metadata.name.clone().unwrap();
        let status = backup.status.clone().unwrap_or_default();
        if status.phase != Some(BackupPhase::Succeeded) {
            fail(
                &env,
                &format!("scheduled backup {name} is not Succeeded: {status:?}"),
            );
        }
        assert_eq!(backup.spec.cluster_name.as_deref(), Some(CLUSTER), "{name}");
        let artifact = status.artifact.unwrap();
        check_artifact(&env, &name, &artifact, written.revision);
        kept.insert(name, (object_key(&artifact, SCHEDULED_PREFIX), artifact));
    }
    let kept_keys: BTreeSet<String> = kept.values().map(|(key, _)| key.clone()).collect();
    if kept.len() != RETAIN {
        fail(
            &env,
            &format!(
                "{} scheduled backups remain after {} runs, expected {RETAIN}: {kept_keys:?} (seen: {seen:?})",
                kept.len(),
                seen.len()
            ),
        );
    }
    // The newest were kept: object keys start with the snapshot's UTC time (fixed width), and
    // the runs are a minute apart, so key order is time order.
    let mut by_age: Vec<&String> = seen.values().collect();
    by_age.sort();
    let newest: BTreeSet<String> = by_age
        .iter()
        .rev()
        .take(RETAIN)
        .map(|k| (*k).clone())
        .collect();
    assert_eq!(
        kept_keys, newest,
        "retention keeps the newest; seen: {seen:?}"
    );
    // deleteObjects: the bucket holds exactly the remaining backups' objects, intact.
    let stored = list_keys(&s3, SCHEDULED_PREFIX).await;
    assert_eq!(
        stored, kept_keys,
        "objects under {SCHEDULED_PREFIX}; seen: {seen:?}"
    );
    for (key, artifact) in kept.values() {
        let object = get_object(&s3, key).await;
        assert_eq!(object.len() as i64, artifact.size_bytes, "{key}");
        assert_eq!(hex(&Sha256::digest(&object)), artifact.sha256, "{key}");
    }
    // The on-demand backup is not scheduled: retention never touches it or its object.
    assert!(backups.get("main-manual-1").await.is_ok());
    assert_eq!(list_keys(&s3, MANUAL_PREFIX).await.len(), 1);
}

/// The SeaweedFS Pod (the host's `weed` through the busybox image, data in an emptyDir) and its
/// Service. Explicit ports and socket paths: a Pod sees the host's filesystem, so weed's default
/// sockets under /tmp would clash with other weed servers on the machine.
fn s3_manifests(weed: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: s3
  labels: {{app: s3}}
spec:
  containers:
    - name: weed
      image: busybox
      command: ["{weed}"]
      args:
        - mini
        - -dir=/data
        - -ip=$(POD_IP)
        - -ip.bind=0.0.0.0
        - -master.port=9333
        - -volume.port=8080
        - -filer.port=8888
        - -s3.port=8333
        - -admin.port=23646
        - -master.telemetry=false
        - -admin.ui=false
        - -webdav=false
        - -s3.port.iceberg=0
        - -s3.port.lance=0
        - -filer.localSocket=/data/filer.sock
        - -s3.localSocket=/data/s3.sock
      env:
        - name: POD_IP
          valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
      ports: [{{name: s3, containerPort: 8333}}]
      readinessProbe:
        tcpSocket: {{port: 8333}}
        periodSeconds: 1
      volumeMounts: [{{name: data, mountPath: /data}}]
  volumes: [{{name: data, emptyDir: {{}}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: s3}}
spec:
  selector: {{app: s3}}
  ports: [{{name: s3, port: 8333, targetPort: 8333}}]
"#
    )
}

/// An on-demand EtcdBackup as examples/backup.yaml writes one.
fn on_demand_backup(name: &str, secret: &str) -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdBackup\nmetadata: {{name: {name}}}\n\
         spec:\n  clusterName: {CLUSTER}\n  s3:\n    bucket: {BUCKET}\n    prefix: {MANUAL_PREFIX}\n    \
         endpoint: {S3_ENDPOINT}\n    region: us-east-1\n    forcePathStyle: true\n    \
         credentialsSecretRef: {{name: {secret}}}\n  timeoutSeconds: 120\n"
    )
}

/// Waits for the S3 Pod to be Ready and creates the bucket from the host through the Service's
/// ClusterIP (localkube's proxy). Returns that client.
async fn s3_from_host(env: &Env) -> aws_sdk_s3::Client {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let ready = pods.get_opt("s3").await.ok().flatten().is_some_and(|p| {
            p.status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        });
        if ready {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            fail(env, "the S3 Pod is not Ready");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let services: Api<Service> = Api::namespaced(env.client.clone(), NS);
    let ip = services
        .get("s3")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "e2e-access",
            "e2e-secret",
            None,
            None,
            "e2e",
        ))
        .endpoint_url(format!("http://{ip}:8333"))
        .force_path_style(true)
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(config);
    // The S3 port opens before the filer behind it serves: retry until the bucket is made.
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        match s3.create_bucket().bucket(BUCKET).send().await {
            Ok(_) => return s3,
            Err(e) => last = aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    fail(
        env,
        &format!("creating bucket {BUCKET} through {ip}:8333: {last}"),
    )
}

struct Written {
    keys: BTreeMap<String, String>,
    /// The cluster's revision once every key was acknowledged.
    revision: i64,
}

/// Writes `KEYS` keys through the client Service. A put that fails (the connection through the
/// proxy dropped) is retried on a new connection: the same key and value, so a retry of a put
/// that did apply changes nothing that is checked.
async fn write_keys(env: &Env) -> Written {
    let url = env.client_url(CLUSTER).await;
    let deadline = tokio::time::Instant::now() + STEP;
    let mut client: Option<etcd_client::Client> = None;
    let mut keys = BTreeMap::new();
    let mut revision = 0;
    let mut last = String::new();
    for i in 0..KEYS {
        let (key, value) = (format!("e2e/{i:03}"), format!("value-{i}"));
        loop {
            if tokio::time::Instant::now() > deadline {
                fail(env, &format!("writing {key} through {url}: {last}"));
            }
            if client.is_none() {
                let options = etcd_client::ConnectOptions::new()
                    .with_connect_timeout(Duration::from_secs(2))
                    .with_timeout(Duration::from_secs(5));
                match etcd_client::Client::connect([url.as_str()], Some(options)).await {
                    Ok(c) => client = Some(c),
                    Err(e) => last = e.to_string(),
                }
            }
            if let Some(c) = client.as_mut() {
                match c.put(key.as_str(), value.as_str(), None).await {
                    Ok(put) => {
                        revision = put.header().unwrap().revision();
                        break;
                    }
                    Err(e) => {
                        last = e.to_string();
                        client = None;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        keys.insert(key, value);
    }
    Written { keys, revision }
}

/// Waits until the EtcdBackup is Succeeded or Failed.
async fn wait_finished(env: &Env, name: &str) -> EtcdBackup {
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        if let Ok(b) = backups.get(name).await
            && b.status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(BackupPhase::is_finished)
        {
            return b;
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!("EtcdBackup {name} did not finish within {STEP:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Everything `status.artifact` promises: the object, its size and digest, a revision at least
/// the one the keys were written at, the etcd version and cluster ID.
fn check_artifact(env: &Env, name: &str, artifact: &BackupArtifact, written_revision: i64) {
    let ok = artifact.uri.starts_with(&format!("s3://{BUCKET}/"))
        && artifact.size_bytes > 32
        && artifact.sha256.len() == 64
        && artifact
            .sha256
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        && artifact.revision >= written_revision
        && artifact.etcd_version == VERSION
        && !artifact.cluster_id.is_empty();
    if !ok {
        fail(
            env,
            &format!(
                "{name}: incomplete artifact {artifact:?} (keys written by revision {written_revision})"
            ),
        );
    }
}

/// The object key of an artifact under `prefix`: `<prefix><cluster>/<time>-rev<n>-<uid>.db`.
fn object_key(artifact: &BackupArtifact, prefix: &str) -> String {
    let key = artifact
        .uri
        .strip_prefix(&format!("s3://{BUCKET}/"))
        .unwrap_or_else(|| panic!("{} is not in {BUCKET}", artifact.uri));
    assert!(
        key.starts_with(&format!("{prefix}{CLUSTER}/")) && key.ends_with(".db"),
        "{key}"
    );
    key.to_owned()
}

async fn get_object(s3: &aws_sdk_s3::Client, key: &str) -> Vec<u8> {
    let object = s3
        .get_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {key}: {}", aws_sdk_s3::error::DisplayErrorContext(&e)));
    object.body.collect().await.unwrap().into_bytes().to_vec()
}

async fn list_keys(s3: &aws_sdk_s3::Client, prefix: &str) -> BTreeSet<String> {
    let listed = s3
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix(prefix)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "LIST {prefix}: {}",
                aws_sdk_s3::error::DisplayErrorContext(&e)
            )
        });
    listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

struct Restored {
    keys: BTreeMap<String, String>,
    revision: i64,
}

/// `etcdutl snapshot restore` of the object (which checks etcd's SHA-256 trailer), then a
/// one-member etcd on the restored data dir, read back.
async fn restore(tools: &Tools, object: &[u8]) -> Restored {
    let dir = TestDir::new("backup-restore-").unwrap();
    let snapshot = dir.path().join("snapshot.db");
    std::fs::write(&snapshot, object).unwrap();
    let block = AddressBlock::claim().unwrap();
    let ip = block.ip(1);
    let peer = format!("http://{ip}:2380");
    let data_dir = dir.path().join("data");
    let output = std::process::Command::new(tools.etcdutl().unwrap())
        .arg("snapshot")
        .arg("restore")
        .arg(&snapshot)
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--name", "restored"])
        .args(["--initial-cluster", &format!("restored={peer}")])
        .args(["--initial-advertise-peer-urls", &peer])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "etcdutl snapshot restore failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let config = EtcdMemberConfig {
        name: "restored".into(),
        ip,
        data_dir,
        log_path: dir.path().join("etcd.log"),
        initial_cluster: format!("restored={peer}"),
        initial_cluster_state: ClusterState::New,
        initial_cluster_token: "restored".into(),
        extra_args: vec![],
    };
    let mut member = EtcdMember::spawn(tools, EtcdVersion::V3_5, config).unwrap();
    member
        .wait_ready(None, Duration::from_secs(60))
        .await
        .unwrap();
    let mut client = member.client().await.unwrap();
    let response = client
        .get("e2e/", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .unwrap();
    let keys = response
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap().to_owned(),
                kv.value_str().unwrap().to_owned(),
            )
        })
        .collect();
    Restored {
        keys,
        revision: response.header().unwrap().revision(),
    }
}

/// Polls until `RUNS` of the CronJob's Jobs completed and none is running, failing at once on
/// a failed Job or a failed scheduled backup. Returns every Succeeded scheduled backup seen
/// (name → object key), including those retention deleted since.
async fn wait_scheduled_runs(env: &Env) -> BTreeMap<String, String> {
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + SCHEDULED_RUNS;
    let mut seen = BTreeMap::new();
    let mut completed = BTreeSet::new();
    loop {
        for b in backups
            .list(&ListParams::default().labels(SCHEDULED_LABEL))
            .await
            .unwrap()
            .items
        {
            let name = b.metadata.name.clone().unwrap();
            let status = b.status.unwrap_or_default();
            match (status.phase, status.artifact) {
                (Some(BackupPhase::Succeeded), Some(a)) => {
                    seen.insert(name, object_key(&a, SCHEDULED_PREFIX));
                }
                (Some(BackupPhase::Failed), _) => fail(
                    env,
                    &format!(
                        "scheduled backup {name} failed: {:?}: {:?}",
                        status.reason, status.message
                    ),
                ),
                _ => {}
            }
        }
        let mut running = 0;
        for job in jobs.list(&ListParams::default()).await.unwrap().items {
            let name = job.metadata.name.clone().unwrap();
            let conditions = job.status.and_then(|s| s.conditions).unwrap_or_default();
            let is = |t: &str| {
                conditions
                    .iter()
                    .any(|c| c.type_ == t && c.status == "True")
            };
            if is("Failed") {
                fail(
                    env,
                    &format!("scheduled backup Job {name} failed: {conditions:?}"),
                );
            } else if is("Complete") {
                completed.insert(name);
            } else {
                running += 1;
            }
        }
        if completed.len() >= RUNS && running == 0 {
            return seen;
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!(
                    "{} of {RUNS} scheduled runs completed within {SCHEDULED_RUNS:?} ({running} running); backups seen: {seen:?}",
                    completed.len()
                ),
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Panics with `what` and everything a human would look at: the common diagnostics, the
/// EtcdBackups, the backup operator's log, the CronJob's Jobs and their Pods' logs, the S3 Pod.
fn fail(env: &Env, what: &str) -> ! {
    let mut out = env.diagnostics();
    for args in [
        vec!["get", "etcdbackups", "-n", NS, "-o", "yaml"],
        vec![
            "get",
            "cronjobs,jobs,pods",
            "-n",
            OPERATOR_NAMESPACE,
            "-o",
            "wide",
        ],
        vec![
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            "app.kubernetes.io/component=backup-operator",
            "--tail",
            "100",
        ],
        vec![
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            "app.kubernetes.io/component=scheduled-backup",
            "--prefix",
            "--tail",
            "40",
        ],
        vec!["logs", "-n", NS, "s3", "--tail", "30"],
    ] {
        let text = env.try_kubectl(&args).unwrap_or_else(|e| e);
        out.push_str(&format!("----- kubectl {}\n{text}\n", args.join(" ")));
    }
    panic!("{what}\n{out}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
