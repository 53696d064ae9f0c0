//! The backup operator end to end (issue #7): the chart installed with helm on the local control
//! plane, the backup operator in its Pod, a real etcd cluster in Pods and a real S3 store
//! (SeaweedFS) in a Pod behind a Service. The chart's CronJob, installed from
//! examples/scheduled-backup.yaml on a one-minute schedule (its first run on the schedule, the
//! later ones started from it at once), produces Succeeded EtcdBackups of the live cluster and retention keeps exactly `RETAIN` (their objects too); an on-demand
//! EtcdBackup's object restores with `etcdutl snapshot restore` to the keys written; a backup
//! naming a missing Secret fails with `SecretNotFound` in its status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use etcd_api::{BackupArtifact, BackupPhase, EtcdBackup};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Api;
use kube::api::ListParams;
use sha2::{Digest, Sha256};
use test_support::process::TestDir;
use test_support::{AddressBlock, ClusterState, EtcdMember, EtcdMemberConfig, EtcdVersion, Tools};

const VERSION: &str = "3.6.16";
const CLUSTER: &str = "main";
/// Scheduled runs waited for, and Succeeded scheduled backups retention keeps.
const RUNS: usize = 3;
const RETAIN: usize = 2;
const SCHEDULED_PREFIX: &str = "scheduled/";
const MANUAL_PREFIX: &str = "manual/";
/// Where the cluster's own schedule (`spec.backup`) writes.
const PER_CLUSTER_PREFIX: &str = "percluster/";
/// Keys written before the on-demand backup; its restored snapshot must hold each of them.
const KEYS: usize = 50;
const SCHEDULED_LABEL: &str = "etcd.operator.rs/scheduled=true";
/// Generous for a 2-core machine shared with other scenarios.
const STEP: Duration = Duration::from_secs(180);
/// First minute boundary (≤ 60 s) plus `RUNS` runs (the later ones started at once by the test,
/// see `wait_scheduled_runs`), with room for a loaded machine.
const SCHEDULED_RUNS: Duration = Duration::from_secs(60 * RUNS as u64 + 90);

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_backups_are_retained_and_an_on_demand_backup_restores() {
    let env = Env::start().await;
    let tools = Tools::from_env();
    // Everything the scenario needs starts at once: the S3 Pod, its Service, the credentials
    // (weed without an S3 config accepts any), and the cluster.
    start_s3(&env);
    env.apply(&cluster_yaml(CLUSTER, 1, VERSION)).unwrap();

    let s3 = s3_from_host(&env).await;
    env.wait_available(CLUSTER, 1, VERSION, STEP).await;
    let written = write_keys(
        &env,
        CLUSTER,
        (0..KEYS).map(|i| (format!("e2e/{i:03}"), format!("value-{i}"))),
    )
    .await;

    // The scheduled backup, once the bucket it writes to exists: examples/scheduled-backup.yaml
    // as a user installs it, with only what must differ here set over it.
    let example = scheduled_backup_example();
    let scheduled_values = format!(
        "scheduledBackup.schedule=*/1 * * * *,scheduledBackup.namespace={NS},\
         scheduledBackup.s3.endpoint={S3_ENDPOINT},scheduledBackup.retain={RETAIN}"
    );
    env.helm_upgrade(&["-f", &example, "--set", &scheduled_values]);

    // While the CronJob waits for its minute: an on-demand backup and one naming no Secret.
    env.apply(&on_demand_backup(
        "main-manual-1",
        CLUSTER,
        MANUAL_PREFIX,
        S3_SECRET,
    ))
    .unwrap();
    env.apply(&on_demand_backup(
        "main-no-secret",
        CLUSTER,
        MANUAL_PREFIX,
        "no-such-secret",
    ))
    .unwrap();

    let manual = wait_backup_finished(&env, "main-manual-1").await;
    let status = manual.status.clone().unwrap();
    if status.phase != Some(BackupPhase::Succeeded) {
        fail(&env, &format!("main-manual-1 did not succeed: {status:?}"));
    }
    let artifact = status.artifact.unwrap();
    check_artifact(&env, "main-manual-1", &artifact, written.revision);
    let key = object_key(&artifact, MANUAL_PREFIX, CLUSTER);
    let object = get_object(&s3, &key).await;
    assert_eq!(object.len() as i64, artifact.size_bytes, "{}", artifact.uri);
    // The printer column's human size matches the byte count.
    assert_eq!(artifact.size, etcd_api::human_size(artifact.size_bytes));
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

    let refused = wait_backup_finished(&env, "main-no-secret").await;
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
    // The event follows the status (see wait_events).
    env.wait_events("main-no-secret", "naming SecretNotFound", STEP, |events| {
        events.iter().any(|e| e.contains("SecretNotFound"))
    })
    .await;
    // `kubectl get etcdbackup` answers why without a describe.
    let table = env.kubectl(&["get", "etcdbackup", "main-no-secret", "-n", NS]);
    assert!(
        table.contains("REASON") && table.contains("SecretNotFound"),
        "{table}"
    );

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
        kept.insert(
            name,
            (object_key(&artifact, SCHEDULED_PREFIX, CLUSTER), artifact),
        );
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
    // each run starts after the previous one completed, seconds apart, so key order is time order.
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

    per_cluster_schedule(&env, &s3, written.revision).await;
}

/// `spec.backup` (issue 21): the cluster operator keeps a CronJob in the cluster's namespace
/// that runs the same create-backup with the Jobs' own ServiceAccount and Role. Its runs are
/// started as users start one at once (`kubectl create job --from=cronjob/...`: the chart's
/// CronJob above already showed a schedule firing); retention keeps the newest `RETAIN`
/// (deleting their objects); removing `spec.backup` removes the CronJob, its ServiceAccount,
/// Role and RoleBinding, and no backup or object.
async fn per_cluster_schedule(env: &Env, s3: &aws_sdk_s3::Client, written_revision: i64) {
    let started = std::time::Instant::now();
    let name = format!("{CLUSTER}-backups");
    // The chart's CronJob must not run meanwhile (it shares the retention count, see below).
    let chart_cron = env
        .kubectl(&["get", "cronjob", "-n", OPERATOR_NAMESPACE, "-o", "name"])
        .trim()
        .to_string();
    env.kubectl(&[
        "patch",
        &chart_cron,
        "-n",
        OPERATOR_NAMESPACE,
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    let backup = serde_json::json!({"spec": {"backup": {
        // Not before next New Year: the runs below are started by hand.
        "schedule": "0 0 1 1 *",
        "s3": {"bucket": BUCKET, "prefix": PER_CLUSTER_PREFIX, "endpoint": S3_ENDPOINT,
               "forcePathStyle": true, "credentialsSecretRef": {"name": S3_SECRET}},
        "retain": RETAIN, "deleteObjects": true, "timeoutSeconds": 300}}});
    env.kubectl(&[
        "patch",
        "etcdcluster",
        CLUSTER,
        "-n",
        NS,
        "--type=merge",
        "-p",
        &backup.to_string(),
    ]);
    let cron_jobs: Api<CronJob> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + STEP;
    let cron = loop {
        if let Some(cron) = cron_jobs.get_opt(&name).await.unwrap() {
            break cron;
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!("no CronJob {NS}/{name} after setting spec.backup"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let owner = &cron.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owner
            .iter()
            .any(|o| o.kind == "EtcdCluster" && o.name == CLUSTER),
        "{owner:?}"
    );
    assert_eq!(cron.spec.as_ref().unwrap().schedule, "0 0 1 1 *");
    for kind in ["serviceaccount", "role", "rolebinding"] {
        env.kubectl(&["get", kind, &name, "-n", NS]);
    }

    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let mut made = vec![];
    for run in 1..=RUNS {
        let job = format!("per-cluster-{run}");
        env.kubectl(&[
            "create",
            "job",
            &job,
            &format!("--from=cronjob/{name}"),
            "-n",
            NS,
        ]);
        wait_job_complete(env, NS, &job).await;
        // The newest scheduled backup is this run's (each run waits for its backup).
        let listed = backups
            .list(&ListParams::default().labels(SCHEDULED_LABEL))
            .await
            .unwrap()
            .items;
        let newest = listed
            .iter()
            .filter_map(|b| {
                let artifact = b.status.as_ref()?.artifact.clone()?;
                // The chart's older scheduled backups until retention removed them.
                if !artifact
                    .uri
                    .starts_with(&format!("s3://{BUCKET}/{PER_CLUSTER_PREFIX}"))
                {
                    return None;
                }
                let key = object_key(&artifact, PER_CLUSTER_PREFIX, CLUSTER);
                Some((key, b.metadata.name.clone().unwrap(), artifact))
            })
            .max_by(|a, b| a.0.cmp(&b.0))
            .unwrap_or_else(|| {
                fail(
                    env,
                    &format!("run {run}: no per-cluster backup: {listed:?}"),
                )
            });
        check_artifact(env, &newest.1, &newest.2, written_revision);
        made.push(newest.0);
    }
    made.dedup();
    assert_eq!(made.len(), RUNS, "each run made its own backup: {made:?}");
    // Retention: the newest RETAIN per-cluster backups remain, objects and all. The chart's
    // scheduled backups of the same cluster count in the same retention (both are the
    // cluster's scheduled backups) and were older: they are gone with their objects.
    let remaining: BTreeSet<String> = backups
        .list(&ListParams::default().labels(SCHEDULED_LABEL))
        .await
        .unwrap()
        .items
        .iter()
        .map(|b| {
            let artifact = b.status.clone().unwrap().artifact.unwrap();
            object_key(&artifact, PER_CLUSTER_PREFIX, CLUSTER)
        })
        .collect();
    let newest: BTreeSet<String> = made.iter().rev().take(RETAIN).cloned().collect();
    assert_eq!(
        remaining, newest,
        "retention keeps the newest; made: {made:?}"
    );
    assert_eq!(list_keys(s3, PER_CLUSTER_PREFIX).await, newest);
    assert_eq!(list_keys(s3, SCHEDULED_PREFIX).await, BTreeSet::new());

    // Removing spec.backup: the CronJob and its RBAC go, the backups and objects stay.
    env.kubectl(&[
        "patch",
        "etcdcluster",
        CLUSTER,
        "-n",
        NS,
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/backup"}]"#,
    ]);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let left: Vec<&str> = ["cronjob", "serviceaccount", "role", "rolebinding"]
            .into_iter()
            .filter(|kind| env.try_kubectl(&["get", kind, &name, "-n", NS]).is_ok())
            .collect();
        if left.is_empty() {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            fail(env, &format!("spec.backup removed, still there: {left:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after: BTreeSet<String> = backups
        .list(&ListParams::default().labels(SCHEDULED_LABEL))
        .await
        .unwrap()
        .items
        .iter()
        .map(|b| {
            object_key(
                &b.status.clone().unwrap().artifact.unwrap(),
                PER_CLUSTER_PREFIX,
                CLUSTER,
            )
        })
        .collect();
    assert_eq!(after, newest, "no EtcdBackup goes with spec.backup");
    assert_eq!(list_keys(s3, PER_CLUSTER_PREFIX).await, newest);
    // The operator publishes BackupScheduleRemoved after its last delete: wait for it.
    env.wait_events(
        CLUSTER,
        "BackupScheduleCreated and BackupScheduleRemoved",
        STEP,
        |events| {
            ["BackupScheduleCreated", "BackupScheduleRemoved"]
                .iter()
                .all(|reason| events.iter().any(|e| e.starts_with(&format!("{reason}:"))))
        },
    )
    .await;
    eprintln!("spec.backup part: {:.1} s", started.elapsed().as_secs_f64());
}

/// Waits until Job `name` completed; fails at once if it failed.
async fn wait_job_complete(env: &Env, namespace: &str, name: &str) {
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let job = jobs.get(name).await.unwrap();
        let conditions = job.status.and_then(|s| s.conditions).unwrap_or_default();
        let is = |t: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == t && c.status == "True")
        };
        if is("Complete") {
            return;
        }
        if is("Failed") || tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!("Job {namespace}/{name} did not complete: {conditions:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// examples/scheduled-backup.yaml, after checking that what this scenario relies on and does not
/// set over it is what the example says: the cluster, bucket, prefix, Secret, path-style
/// addressing and deleteObjects. (The schedule, namespace, endpoint and retain are set over it.)
fn scheduled_backup_example() -> String {
    let path = workspace().join("examples/scheduled-backup.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    // Lines without their comments (the example's layout is plain block YAML).
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim_end())
        .collect();
    for expected in [
        "  enabled: true".to_owned(),
        format!("  clusterName: {CLUSTER}"),
        format!("    bucket: {BUCKET}"),
        format!("    prefix: {SCHEDULED_PREFIX}"),
        "    forcePathStyle: true".to_owned(),
        format!("    credentialsSecret: {S3_SECRET}"),
        "  deleteObjects: true".to_owned(),
    ] {
        assert!(
            lines.contains(&expected.as_str()),
            "{} no longer has the line {expected:?}; the backup scenario relies on it",
            path.display()
        );
    }
    path.to_str().unwrap().to_owned()
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
    // The cluster runs the default 3.6, restored with its etcdutl.
    let mut member = EtcdMember::spawn(tools, EtcdVersion::DEFAULT, config).unwrap();
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
///
/// The first run is the schedule's own (it proves the schedule fires). Waiting a minute for each
/// later run only tested the clock, so once the first completed the CronJob is suspended (no
/// scheduled run starts during the checks that follow) and each later run is its Job template
/// started at once, one after another, as `kubectl create job --from=cronjob/...` does: the same
/// Pod, the same command, owned by the CronJob.
async fn wait_scheduled_runs(env: &Env) -> BTreeMap<String, String> {
    let cronjob = env
        .kubectl(&["get", "cronjob", "-n", OPERATOR_NAMESPACE, "-o", "name"])
        .trim()
        .to_string();
    assert!(
        cronjob.starts_with("cronjob.batch/") && !cronjob.contains('\n'),
        "exactly one CronJob in {OPERATOR_NAMESPACE}: {cronjob:?}"
    );
    let mut suspended = false;
    let mut started_by_hand = 0;
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
                    seen.insert(name, object_key(&a, SCHEDULED_PREFIX, CLUSTER));
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
        if !completed.is_empty() && running == 0 {
            if !suspended {
                env.kubectl(&[
                    "patch",
                    &cronjob,
                    "-n",
                    OPERATOR_NAMESPACE,
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"suspend":true}}"#,
                ]);
                suspended = true;
                // A run the schedule started just before the suspension shows as running next
                // round and is waited for like the others.
                continue;
            }
            started_by_hand += 1;
            let name = format!("run-now-{started_by_hand}");
            env.kubectl(&[
                "create",
                "job",
                &name,
                &format!(
                    "--from=cronjob/{}",
                    cronjob.trim_start_matches("cronjob.batch/")
                ),
                "-n",
                OPERATOR_NAMESPACE,
            ]);
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
