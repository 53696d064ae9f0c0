//! The restore operator end to end: the chart installed with helm on the local control plane
//! (the cluster, backup and restore operators in their Pods), real etcd members in Pods and a
//! real S3 store (SeaweedFS) in a Pod behind a Service.
//!
//! - A 3-member cluster loses two members with their data; an EtcdRestore of an on-demand
//!   backup rebuilds it from a seed on a new ordinal, the cluster operator grows it back to 3,
//!   and it holds exactly the keys acknowledged up to the backup's revision. The surviving old
//!   member's PVC is kept, labelled as retained by the restore.
//! - Every refusal the contract names (`BackupNotFound`, `BackupNotSucceeded`, `ClusterNotFound`,
//!   `SecretNotFound`, `QuorumHeld`, `ChecksumMismatch`) fails the EtcdRestore and leaves the
//!   existing cluster untouched: its Pods and PVCs (same UIDs), no `restoring` annotation left,
//!   no PVC labelled as retained. A corrupt object without an expected SHA-256 is refused too
//!   (etcd's trailer), and so is a backup whose object was changed after it was recorded.
//! - A restore into a new cluster name with `clusterSpec` creates the cluster from the backup's
//!   S3 object (examples/restore-from-s3.yaml as it is, pointed at this run's object); with
//!   `force` a live cluster's data is replaced by the backup's.
//! - Across minors: a backup of a 3.5 cluster restored as a new 3.6 cluster (`clusterSpec`),
//!   the seed prepared with 3.6's etcdutl, grown to 3 members on 3.6 with exactly the backup's
//!   keys; the 3.5 cluster is left as it was.
//! - Monitoring, along the quorum loss and restore: a real Prometheus (common/prometheus.rs)
//!   scrapes the operators and the members with the chart's alert rules. Read back through
//!   its HTTP API: the quorum gauge is 0 while the new cluster bootstraps, without the
//!   quorum-lost alert even pending; 0 again when quorum is destroyed (the alert pending), 1
//!   after the restore; the last-success timestamp of backups is each backup's completion time
//!   and moves with the next one; a failed backup is counted; and every metric the dashboard
//!   and the alert rules query is in the scrape.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::netns::{nft, operator_pid};
use common::prometheus::{Prometheus, Sample};
use common::*;
use etcd_api::{
    BackupArtifact, BackupPhase, ClusterPhase, EtcdBackup, EtcdCluster, EtcdRestore, RestorePhase,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::ListParams;
use sha2::{Digest, Sha256};

const VERSION: &str = "3.6.16";
/// The hand-over contract (etcd-api's restore.rs): the annotation the restore operator puts on
/// the EtcdCluster while it rebuilds it, and the label of the old members' PVCs it keeps.
const RESTORING_ANNOTATION: &str = "etcd.operator.rs/restoring";
const RETAINED_LABEL: &str = "etcd.operator.rs/retained-by-restore";
/// The label of every Pod and PVC of an EtcdCluster (the cluster operator's build.rs).
const CLUSTER_LABEL: &str = "etcd.operator.rs/cluster";
const PREFIX: &str = "manual/";
/// Keys written before the backup, and again after it.
const KEYS: usize = 30;
/// Generous for a 2-core machine.
const STEP: Duration = Duration::from_secs(240);
const RESTORE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a refused restore may take to drop the annotation after reporting Failed.
const SETTLE: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread")]
async fn quorum_loss_is_restored_from_a_backup_with_exactly_the_acknowledged_keys() {
    let clock = tokio::time::Instant::now();
    let env = start_with_restore_operator().await;
    start_s3(&env);
    // Prometheus scrapes the operators before the cluster exists, so it sees the bootstrap.
    let mut prometheus = Prometheus::start(&env).await;
    prometheus
        .wait_until(
            "every operator Pod scraped",
            r#"up{job="etcd-operator"}"#,
            STEP,
            |s| s.len() >= 3 && all_equal(s, 1.0),
        )
        .await;
    // A seed answers a second or two after it starts, and a 1 s scrape can miss so short a
    // bootstrap on a loaded machine (it did in CI). So the bootstrap is held open: the cluster
    // operator reaches no member's client port until Prometheus has scraped bootstrapping 1.
    let hold = BootstrapHold::start(&env);
    env.apply(&cluster_yaml("main", 3, VERSION)).unwrap();
    prometheus
        .wait_until("bootstrapping 1 scraped", BOOTSTRAPPING, STEP, |s| {
            s.len() == 1 && s[0].value == 1.0
        })
        .await;
    hold.release();
    let _s3 = s3_from_host(&env).await;
    env.wait_available("main", 3, VERSION, STEP).await;
    eprintln!("[{:?}] main Available with 3 members", clock.elapsed());
    bootstrap_was_not_quorum_loss(&mut prometheus, &["main-0", "main-1", "main-2"]).await;
    eprintln!(
        "[{:?}] Prometheus: quorum 1, 3 members scraped, bootstrap seen without alert",
        clock.elapsed()
    );

    let before = write_keys(&env, "main", keys("e2e/before-", KEYS)).await;
    env.apply(&on_demand_backup(
        "main-backup-1",
        "main",
        PREFIX,
        S3_SECRET,
    ))
    .unwrap();
    let artifact = succeeded_backup(&env, "main-backup-1").await;
    let first_backup_at = last_backup_is(&env, &mut prometheus, "main-backup-1").await;
    assert!(
        artifact.revision >= before.revision,
        "the backup's revision {} is below the last acknowledged write's {}",
        artifact.revision,
        before.revision
    );
    // Acknowledged after the backup Succeeded: each at a revision above the snapshot's.
    let after = write_keys(&env, "main", keys("e2e/after-", KEYS)).await;
    let early: Vec<_> = after
        .revisions
        .iter()
        .filter(|(_, r)| **r <= artifact.revision)
        .collect();
    assert!(
        early.is_empty(),
        "writes acknowledged after the backup at revisions <= {}: {early:?}",
        artifact.revision
    );
    eprintln!(
        "[{:?}] backup at revision {}; {} keys before it, {} after (revisions {}..={})",
        clock.elapsed(),
        artifact.revision,
        before.keys.len(),
        after.keys.len(),
        after.revisions.values().min().unwrap(),
        after.revision
    );

    // Quorum loss: two of three members go with their data, in one request so that the
    // operator never sees one of them gone while the other two still hold quorum (it would
    // replace it). The PVCs go first: pvc-protection keeps them until their Pods are gone.
    let old = footprint(&env, "main").await;
    let old_members: BTreeSet<String> = old.pods.keys().cloned().collect();
    assert_eq!(
        old_members,
        BTreeSet::from([
            "main-0".to_owned(),
            "main-1".to_owned(),
            "main-2".to_owned()
        ]),
        "{old:?}"
    );
    env.kubectl(&[
        "delete",
        "-n",
        NS,
        "pvc/main-1",
        "pvc/main-2",
        "pod/main-1",
        "pod/main-2",
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    let lost = env
        .wait_status("main", "quorum loss reported", STEP, quorum_loss_reported)
        .await;
    wait_pvcs_gone(&env, &["main-1", "main-2"]).await;
    let survivor = footprint(&env, "main").await;
    if survivor.pods.keys().collect::<Vec<_>>() != ["main-0"]
        || survivor.pvcs.keys().collect::<Vec<_>>() != ["main-0"]
    {
        fail(
            &env,
            &format!(
                "after the quorum loss only main-0 (Pod and PVC) should be left: {survivor:?}"
            ),
        );
    }
    eprintln!(
        "[{:?}] quorum loss reported: phase {:?}, {}",
        clock.elapsed(),
        lost.status.as_ref().and_then(|s| s.phase),
        conditions_line(&lost)
    );
    // Prometheus sees it: the gauge at 0, not bootstrapping, the alert on its way.
    prometheus
        .wait_until("quorum 0", QUORUM, STEP, |s| {
            s.len() == 1 && s[0].value == 0.0
        })
        .await;
    prometheus
        .wait_until(
            "EtcdClusterQuorumLost pending or firing",
            r#"ALERTS{alertname="EtcdClusterQuorumLost",namespace="db",name="main"}"#,
            STEP,
            |s| s.len() == 1,
        )
        .await;
    prometheus
        .wait_until("not bootstrapping", BOOTSTRAPPING, STEP, |s| {
            s.len() == 1 && s[0].value == 0.0
        })
        .await;
    eprintln!(
        "[{:?}] Prometheus: quorum 0, EtcdClusterQuorumLost pending",
        clock.elapsed()
    );

    // The restore, as examples/restore.yaml writes it.
    env.apply(&restore_yaml(
        "main-restore-1",
        "main",
        &Source::Backup("main-backup-1"),
        false,
    ))
    .unwrap();
    let (restore, seen) = wait_restore(&env, "main-restore-1", "main", RESTORE_TIMEOUT).await;
    let status = restore.status.clone().unwrap_or_default();
    if status.phase != Some(RestorePhase::Succeeded) {
        fail(
            &env,
            &format!("main-restore-1 did not succeed: {status:?}\nseen: {seen:?}"),
        );
    }
    eprintln!(
        "[{:?}] main-restore-1 Succeeded; seen: {seen:?}",
        clock.elapsed()
    );

    // Succeeded only once the cluster is Available at full size: no waiting here.
    let cluster = env.clusters().get("main").await.unwrap();
    if !available_at(&cluster, 3, VERSION) {
        fail(
            &env,
            &format!(
                "main-restore-1 is Succeeded but main is not Available with 3 members on \
                 {VERSION}: {:?}",
                cluster.status
            ),
        );
    }
    assert!(
        !has_restoring_annotation(&cluster),
        "the annotation is left on main: {:?}",
        cluster.metadata.annotations
    );
    // The hand-over was visible: the annotation and the cluster operator's Restoring phase.
    assert!(
        seen.annotations.contains("main-restore-1"),
        "main was never annotated {RESTORING_ANNOTATION}=main-restore-1; seen: {seen:?}"
    );
    assert!(
        seen.cluster_phases.contains(&ClusterPhase::Restoring),
        "main never reported phase Restoring; seen: {seen:?}"
    );

    // The seed and the members grown from it are new members on new ordinals.
    let seed = status
        .seed_member
        .clone()
        .unwrap_or_else(|| panic!("no status.seedMember: {status:?}"));
    let members: BTreeSet<String> = cluster
        .status
        .as_ref()
        .unwrap()
        .members
        .iter()
        .map(|m| m.name.clone())
        .collect();
    assert!(
        !old_members.contains(&seed) && members.contains(&seed),
        "seed {seed} is not a new member of main: members {members:?}, old {old_members:?}"
    );
    assert!(
        members.is_disjoint(&old_members),
        "the restored members {members:?} reuse an old member's name {old_members:?}"
    );

    // The restored revision is the backup's: artifact.revision is the member's revision probed
    // just before the snapshot was streamed, restoredRevision the snapshot's own revision
    // (`etcdutl snapshot status`). In general the latter can be higher (writes between the
    // probe and the snapshot); here nothing was written during the backup, so they are equal.
    assert_eq!(
        status.restored_revision,
        Some(artifact.revision),
        "{status:?}"
    );

    // Exactly the keys acknowledged up to the backup's revision, with their values.
    let (present, revision) = read_keys(&env, "main", "e2e/").await;
    let acknowledged: BTreeMap<&String, (&String, i64)> = before
        .keys
        .iter()
        .chain(after.keys.iter())
        .map(|(k, v)| {
            let r = before.revisions.get(k).or(after.revisions.get(k)).unwrap();
            (k, (v, *r))
        })
        .collect();
    let missing: Vec<&String> = acknowledged
        .iter()
        .filter(|(k, (v, r))| *r <= artifact.revision && present.get(**k) != Some(*v))
        .map(|(k, _)| *k)
        .collect();
    assert!(
        missing.is_empty(),
        "{} keys acknowledged by revision {} missing or changed after the restore: {missing:?}",
        missing.len(),
        artifact.revision
    );
    let resurrected: Vec<&String> = present
        .keys()
        .filter(|k| after.keys.contains_key(*k))
        .collect();
    assert!(
        resurrected.is_empty(),
        "keys written after the backup are present after the restore: {resurrected:?}"
    );
    let expected: BTreeMap<String, String> = acknowledged
        .iter()
        .filter(|(_, (_, r))| *r <= artifact.revision)
        .map(|(k, (v, _))| ((*k).clone(), (*v).clone()))
        .collect();
    assert_eq!(
        present, expected,
        "the restored cluster holds exactly these keys"
    );
    assert!(
        revision >= artifact.revision,
        "the restored cluster is at revision {revision}, below the snapshot's {}",
        artifact.revision
    );

    // The old members: their Pods are gone, the survivor's PVC is kept and labelled.
    let now = footprint(&env, "main").await;
    let old_pods: Vec<&String> = now
        .pods
        .keys()
        .filter(|p| old_members.contains(*p))
        .collect();
    assert!(old_pods.is_empty(), "old member Pods remain: {now:?}");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let kept = pvcs
        .get_opt("main-0")
        .await
        .unwrap()
        .unwrap_or_else(|| fail(&env, "the surviving member's PVC main-0 is gone"));
    assert_eq!(
        kept.metadata.uid, old.pvcs["main-0"].uid,
        "main-0's PVC was replaced"
    );
    let label = kept
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(RETAINED_LABEL).cloned());
    assert_eq!(
        label.as_deref(),
        Some("main-restore-1"),
        "main-0's PVC labels: {:?}",
        kept.metadata.labels
    );
    for (name, pvc) in &now.pvcs {
        if !old_members.contains(name) {
            assert!(
                pvc.retained.is_none(),
                "the new member's PVC {name} is labelled retained: {now:?}"
            );
        }
    }

    // The rebuilt cluster takes writes, above the restored revision.
    let next = write_keys(&env, "main", keys("e2e/restored-", 3)).await;
    assert!(
        next.revisions.values().all(|r| *r > artifact.revision),
        "{:?}",
        next.revisions
    );
    let (fresh, _) = read_keys(&env, "main", "e2e/restored-").await;
    assert_eq!(fresh, next.keys);

    // What the user sees: a Complete condition, times, an event.
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True"),
        "no Complete condition: {status:?}"
    );
    assert!(
        status.start_time.is_some() && status.completion_time.is_some(),
        "{status:?}"
    );
    let events = env.events_for("main-restore-1").await;
    assert!(!events.is_empty(), "no event about main-restore-1");

    // Prometheus: quorum back to 1, the new members scraped, the restore's phase.
    prometheus
        .wait_until("quorum 1 again", QUORUM, STEP, |s| {
            s.len() == 1 && s[0].value == 1.0
        })
        .await;
    let member_names: Vec<&str> = members.iter().map(String::as_str).collect();
    members_scraped(&mut prometheus, &member_names).await;
    prometheus
        .wait_until(
            "the restore's phase Succeeded",
            r#"etcd_operator_restore_phase{namespace="db",name="main-restore-1",phase="Succeeded"}"#,
            STEP,
            |s| all_equal(s, 1.0) && !s.is_empty(),
        )
        .await;
    // The restored cluster is backed up: the timestamp moves; a backup that cannot read its
    // credentials is counted as a failure.
    env.apply(&on_demand_backup(
        "main-backup-2",
        "main",
        PREFIX,
        S3_SECRET,
    ))
    .unwrap();
    env.apply(&on_demand_backup(
        "main-backup-no-secret",
        "main",
        PREFIX,
        "no-such-secret",
    ))
    .unwrap();
    succeeded_backup(&env, "main-backup-2").await;
    let second_backup_at = last_backup_is(&env, &mut prometheus, "main-backup-2").await;
    assert!(
        second_backup_at > first_backup_at,
        "the last-success timestamp did not move: {first_backup_at} then {second_backup_at}"
    );
    let failed = wait_backup_finished(&env, "main-backup-no-secret").await;
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.phase),
        Some(BackupPhase::Failed),
        "{:?}",
        failed.status
    );
    prometheus
        .wait_until(
            "a backup failure counted",
            r#"sum(etcd_operator_backup_failures_total{namespace="db",cluster="main"})"#,
            STEP,
            |s| s.len() == 1 && s[0].value >= 1.0,
        )
        .await;
    every_queried_metric_is_scraped(&prometheus).await;
    eprintln!(
        "[{:?}] Prometheus: quorum 1, backups at {first_backup_at} then {second_backup_at}, \
         a failure counted, every dashboard and alert metric scraped",
        clock.elapsed()
    );
    // All three operators did their part under the chart's securityContext (non-root, no
    // capabilities, read-only root), and so did the seed's init container (read-only root).
    assert_operators_confined(&env);
    eprintln!(
        "[{:?}] checked {} keys at revision {revision}; events on main-restore-1:\n{}",
        clock.elapsed(),
        present.len(),
        events.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_leave_the_cluster_untouched() {
    let clock = tokio::time::Instant::now();
    let env = start_with_restore_operator().await;
    start_s3(&env);
    // "main" keeps quorum throughout; "lost" loses it (one of its two members, with its data).
    env.apply(&cluster_yaml("main", 1, VERSION)).unwrap();
    env.apply(&cluster_yaml("lost", 2, VERSION)).unwrap();
    let s3 = s3_from_host(&env).await;
    env.wait_available("main", 1, VERSION, STEP).await;
    env.wait_available("lost", 2, VERSION, STEP).await;
    eprintln!("[{:?}] main and lost Available", clock.elapsed());

    let written = write_keys(&env, "main", keys("e2e/", KEYS)).await;
    env.apply(&on_demand_backup("main-backup", "main", PREFIX, S3_SECRET))
        .unwrap();
    env.apply(&on_demand_backup(
        "main-backup-failed",
        "main",
        PREFIX,
        "no-such-secret",
    ))
    .unwrap();
    let artifact = succeeded_backup(&env, "main-backup").await;
    let failed = wait_backup_finished(&env, "main-backup-failed").await;
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.phase),
        Some(BackupPhase::Failed),
        "{:?}",
        failed.status
    );
    let key = object_key(&artifact, PREFIX, "main");

    env.kubectl(&[
        "delete",
        "-n",
        NS,
        "pvc/lost-1",
        "pod/lost-1",
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    env.wait_status("lost", "quorum loss reported", STEP, quorum_loss_reported)
        .await;
    wait_pvcs_gone(&env, &["lost-1"]).await;
    let main_before = footprint(&env, "main").await;
    let lost_before = footprint(&env, "lost").await;
    assert_eq!(
        lost_before.pods.keys().collect::<Vec<_>>(),
        ["lost-0"],
        "{lost_before:?}"
    );
    eprintln!(
        "[{:?}] backup at revision {}; lost lost quorum",
        clock.elapsed(),
        artifact.revision
    );

    // Nothing to restore from.
    refused(
        &env,
        "r-no-backup",
        &restore_yaml(
            "r-no-backup",
            "lost",
            &Source::Backup("no-such-backup"),
            false,
        ),
        Some("BackupNotFound"),
        Some(("lost", &lost_before)),
    )
    .await;
    refused(
        &env,
        "r-failed-backup",
        &restore_yaml(
            "r-failed-backup",
            "lost",
            &Source::Backup("main-backup-failed"),
            false,
        ),
        Some("BackupNotSucceeded"),
        Some(("lost", &lost_before)),
    )
    .await;
    refused(
        &env,
        "r-no-secret",
        &restore_yaml(
            "r-no-secret",
            "lost",
            &Source::S3 {
                key: &key,
                secret: "no-such-secret",
                sha256: None,
            },
            false,
        ),
        Some("SecretNotFound"),
        Some(("lost", &lost_before)),
    )
    .await;
    // Nothing to restore into, and nothing to create it from.
    refused(
        &env,
        "r-no-cluster",
        &restore_yaml(
            "r-no-cluster",
            "nowhere",
            &Source::Backup("main-backup"),
            false,
        ),
        Some("ClusterNotFound"),
        None,
    )
    .await;
    assert!(
        env.clusters().get_opt("nowhere").await.unwrap().is_none(),
        "an EtcdCluster was created without clusterSpec"
    );
    eprintln!("[{:?}] the input refusals are done", clock.elapsed());

    // A live cluster is not restored without force.
    refused(
        &env,
        "r-quorum-held",
        &restore_yaml(
            "r-quorum-held",
            "main",
            &Source::Backup("main-backup"),
            false,
        ),
        Some("QuorumHeld"),
        Some(("main", &main_before)),
    )
    .await;
    env.wait_available("main", 1, VERSION, STEP).await;
    let (present, _) = read_keys(&env, "main", "e2e/").await;
    assert_eq!(
        present, written.keys,
        "main's keys after the refused restore"
    );
    eprintln!("[{:?}] QuorumHeld refused", clock.elapsed());

    // A tampered object: the backup's bytes with some flipped in the middle, under another key,
    // restored with the original's SHA-256.
    let mut bytes = get_object(&s3, &key).await;
    assert_eq!(hex(&Sha256::digest(&bytes)), artifact.sha256);
    let middle = bytes.len() / 2;
    for b in &mut bytes[middle..middle + 16] {
        *b ^= 0xff;
    }
    let tampered = bytes;
    put_object(&s3, "tampered/main.db", tampered.clone()).await;
    refused(
        &env,
        "r-tampered",
        &restore_yaml(
            "r-tampered",
            "lost",
            &Source::S3 {
                key: "tampered/main.db",
                secret: S3_SECRET,
                sha256: Some(&artifact.sha256),
            },
            false,
        ),
        Some("ChecksumMismatch"),
        Some(("lost", &lost_before)),
    )
    .await;
    eprintln!("[{:?}] ChecksumMismatch refused", clock.elapsed());

    // Into a new cluster from an S3 object: examples/restore-from-s3.yaml itself (the object
    // key and endpoint replaced by this scenario's), creating its cluster from clusterSpec and
    // holding the backup's keys.
    env.apply(&restore_from_s3_example(&key)).unwrap();
    let (restore, seen) = wait_restore(&env, COPY_RESTORE, COPY, RESTORE_TIMEOUT).await;
    let status = restore.status.clone().unwrap_or_default();
    if status.phase != Some(RestorePhase::Succeeded) {
        fail(
            &env,
            &format!("{COPY_RESTORE} did not succeed: {status:?}\nseen: {seen:?}"),
        );
    }
    let copy = env.clusters().get(COPY).await.unwrap();
    assert_eq!(
        (copy.spec.size, copy.spec.version.as_str()),
        (COPY_SIZE as i32, VERSION),
        "{COPY}'s spec is the example's clusterSpec"
    );
    if !available_at(&copy, COPY_SIZE, VERSION) {
        fail(
            &env,
            &format!(
                "{COPY_RESTORE} is Succeeded but {COPY} is not Available with {COPY_SIZE} \
                 members: {:?}",
                copy.status
            ),
        );
    }
    assert!(!has_restoring_annotation(&copy), "{:?}", copy.metadata);
    assert_eq!(
        status.restored_revision,
        Some(artifact.revision),
        "{status:?}"
    );
    let (present, _) = read_keys(&env, COPY, "e2e/").await;
    assert_eq!(
        present, written.keys,
        "{COPY} holds exactly the backup's keys"
    );
    eprintln!("[{:?}] {COPY} restored; seen: {seen:?}", clock.elapsed());

    // The other clusters are still as they were.
    assert_untouched(&env, "main", &main_before, None).await;
    assert_untouched(&env, "lost", &lost_before, None).await;

    // With force, the live cluster's data is replaced by the snapshot's: what was written
    // after the backup is gone, the old member's PVC is kept and labelled.
    let later = write_keys(&env, "main", keys("e2e/later-", 5)).await;
    env.apply(&restore_yaml(
        "r-force",
        "main",
        &Source::Backup("main-backup"),
        true,
    ))
    .unwrap();
    let (restore, seen) = wait_restore(&env, "r-force", "main", RESTORE_TIMEOUT).await;
    let status = restore.status.clone().unwrap_or_default();
    if status.phase != Some(RestorePhase::Succeeded) {
        fail(
            &env,
            &format!("r-force did not succeed: {status:?}\nseen: {seen:?}"),
        );
    }
    let main = env.clusters().get("main").await.unwrap();
    if !available_at(&main, 1, VERSION) {
        fail(
            &env,
            &format!(
                "r-force is Succeeded but main is not Available: {:?}",
                main.status
            ),
        );
    }
    assert_eq!(
        status.restored_revision,
        Some(artifact.revision),
        "{status:?}"
    );
    let (present, _) = read_keys(&env, "main", "e2e/").await;
    assert_eq!(
        present, written.keys,
        "main holds exactly the backup's keys, none of {:?}",
        later.keys
    );
    let now = footprint(&env, "main").await;
    assert_eq!(
        now.pvcs.get("main-0").and_then(|p| p.retained.as_deref()),
        Some("r-force"),
        "{now:?}"
    );
    assert!(!now.pods.contains_key("main-0"), "{now:?}");
    eprintln!(
        "[{:?}] main force-restored; seen: {seen:?}",
        clock.elapsed()
    );

    // Without an expected SHA-256 a corrupt object is still refused: etcd's own trailer (the
    // reason is not part of the contract, any is accepted).
    refused(
        &env,
        "r-corrupt",
        &restore_yaml(
            "r-corrupt",
            "lost",
            &Source::S3 {
                key: "tampered/main.db",
                secret: S3_SECRET,
                sha256: None,
            },
            false,
        ),
        None,
        Some(("lost", &lost_before)),
    )
    .await;
    // The backup's own object tampered with in place: the SHA-256 its artifact recorded
    // refuses it.
    put_object(&s3, &key, tampered).await;
    refused(
        &env,
        "r-tampered-backup",
        &restore_yaml(
            "r-tampered-backup",
            "lost",
            &Source::Backup("main-backup"),
            false,
        ),
        Some("ChecksumMismatch"),
        Some(("lost", &lost_before)),
    )
    .await;
    eprintln!("[{:?}] corrupt objects refused", clock.elapsed());
}

/// The backup's source and the restore's target minor (issue 16: backup on 3.5, restore as 3.6).
const V35: &str = "3.5.35";
const V36: &str = "3.6.16";

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_of_a_3_5_cluster_is_restored_as_a_3_6_cluster() {
    let clock = tokio::time::Instant::now();
    let env = start_with_restore_operator().await;
    start_s3(&env);
    env.apply(&cluster_yaml("old", 1, V35)).unwrap();
    let _s3 = s3_from_host(&env).await;
    env.wait_available("old", 1, V35, STEP).await;
    let written = write_keys(&env, "old", keys("e2e/", KEYS)).await;
    env.apply(&on_demand_backup("old-backup", "old", PREFIX, S3_SECRET))
        .unwrap();
    let artifact = succeeded_backup(&env, "old-backup").await;
    assert_eq!(
        artifact.etcd_version, V35,
        "the backup records the version it was taken from: {artifact:?}"
    );
    let old_before = footprint(&env, "old").await;
    eprintln!(
        "[{:?}] old (etcd {V35}) backed up at revision {}",
        clock.elapsed(),
        artifact.revision
    );

    // A new cluster on 3.6 from the 3.5 backup.
    env.apply(&format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdRestore\n\
         metadata: {{name: to-3-6}}\n\
         spec:\n  clusterName: new\n  source: {{backupRef: {{name: old-backup}}}}\n  \
         clusterSpec: {{size: 3, version: {V36}}}\n"
    ))
    .unwrap();
    let (restore, seen) = wait_restore(&env, "to-3-6", "new", RESTORE_TIMEOUT).await;
    let status = restore.status.clone().unwrap_or_default();
    if status.phase != Some(RestorePhase::Succeeded) {
        fail(
            &env,
            &format!("to-3-6 did not succeed: {status:?}\nseen: {seen:?}"),
        );
    }
    let new = env.clusters().get("new").await.unwrap();
    if !available_at(&new, 3, V36) {
        fail(
            &env,
            &format!(
                "to-3-6 is Succeeded but new is not Available with 3 members on {V36}: {:?}",
                new.status
            ),
        );
    }
    let versions: Vec<Option<String>> = new
        .status
        .as_ref()
        .unwrap()
        .members
        .iter()
        .map(|m| m.version.clone())
        .collect();
    assert_eq!(versions, vec![Some(V36.to_owned()); 3], "{:?}", new.status);
    assert_eq!(
        status.restored_revision,
        Some(artifact.revision),
        "{status:?}"
    );

    // The seed's data directory was made by the target's etcdutl (3.6), not the backup's.
    let seed = status
        .seed_member
        .clone()
        .unwrap_or_else(|| panic!("no status.seedMember: {status:?}"));
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let seed_pod = pods.get(&seed).await.unwrap();
    let init_args: Vec<String> = seed_pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .flat_map(|c| c.args.iter().flatten().chain(c.command.iter().flatten()))
        .cloned()
        .collect();
    assert!(
        init_args
            .iter()
            .any(|a| a == "--etcdutl=/usr/local/bin/etcdutl-3.6"),
        "the seed {seed} was not prepared with etcdutl 3.6: {init_args:?}"
    );

    // Exactly the backup's keys, and it takes writes above the restored revision.
    let (present, _) = read_keys(&env, "new", "e2e/").await;
    assert_eq!(present, written.keys, "new holds exactly the backup's keys");
    let next = write_keys(&env, "new", keys("e2e/on-3-6-", 3)).await;
    assert!(
        next.revisions.values().all(|r| *r > artifact.revision),
        "{:?}",
        next.revisions
    );

    // The 3.5 cluster it came from is untouched and still on 3.5.
    assert_untouched(&env, "old", &old_before, None).await;
    env.wait_available("old", 1, V35, STEP).await;
    eprintln!(
        "[{:?}] new restored on {V36} from old's {V35} backup; seen: {seen:?}",
        clock.elapsed()
    );
}

/// The cluster operator's gauges for "main" (one series: one operator replica reconciles).
const QUORUM: &str = r#"max(etcd_operator_cluster_quorum{namespace="db",name="main"})"#;
const BOOTSTRAPPING: &str =
    r#"max(etcd_operator_cluster_bootstrapping{namespace="db",name="main"})"#;
/// How long a scraped value may take to be queryable (1 s scrapes; generous for 2 cores).
const SCRAPED: Duration = Duration::from_secs(30);

fn all_equal(samples: &[Sample], value: f64) -> bool {
    samples.iter().all(|s| s.value == value)
}

/// Each of `members` is scraped on its metrics port and knows a leader.
async fn members_scraped(prometheus: &mut Prometheus, members: &[&str]) {
    let want: BTreeSet<&str> = members.iter().copied().collect();
    prometheus
        .wait_until(
            &format!("etcd_server_has_leader 1 from {want:?}"),
            r#"etcd_server_has_leader{job="etcd",namespace="db",etcd_cluster="main"}"#,
            STEP,
            |s| {
                let pods: BTreeSet<&str> = s
                    .iter()
                    .filter(|s| s.value == 1.0)
                    .filter_map(|s| s.labels.get("pod").map(String::as_str))
                    .collect();
                pods == want
            },
        )
        .await;
}

/// The cluster operator's connections to etcd client ports (2379) refused, in its network
/// namespace, while held: its passes see no member answer, so the cluster stays bootstrapping.
struct BootstrapHold {
    operator: u32,
}

impl BootstrapHold {
    const TABLE: &str = "bootstrap_hold";

    fn start(env: &Env) -> BootstrapHold {
        let operator = operator_pid(env, "etcd-cluster-operator");
        nft(
            operator,
            &format!(
                "add table inet {table}; \
                 add chain inet {table} out {{ type filter hook output priority 0 ; }}; \
                 add rule inet {table} out tcp dport 2379 reject with tcp reset",
                table = Self::TABLE
            ),
        );
        BootstrapHold { operator }
    }

    fn release(self) {
        nft(self.operator, &format!("delete table inet {}", Self::TABLE));
    }
}

/// After the bootstrap: quorum 1 and the members scraped; while the seed was coming up the
/// quorum gauge was 0 with bootstrapping 1, and the quorum-lost alert was never even pending.
async fn bootstrap_was_not_quorum_loss(prometheus: &mut Prometheus, members: &[&str]) {
    prometheus
        .wait_until("quorum 1", QUORUM, SCRAPED, |s| {
            s.len() == 1 && s[0].value == 1.0
        })
        .await;
    members_scraped(prometheus, members).await;
    let window = "[1h]";
    let seen = prometheus
        .query(&format!(
            r#"max_over_time(etcd_operator_cluster_bootstrapping{{namespace="db",name="main"}}{window})"#
        ))
        .await
        .unwrap();
    assert!(
        seen.len() == 1 && seen[0].value == 1.0,
        "Prometheus never scraped bootstrapping 1 for main: {seen:?}"
    );
    let lowest = prometheus
        .query(&format!(
            r#"min_over_time(etcd_operator_cluster_quorum{{namespace="db",name="main"}}{window})"#
        ))
        .await
        .unwrap();
    assert!(
        lowest.len() == 1 && lowest[0].value == 0.0,
        "the quorum gauge was never 0 during the bootstrap: {lowest:?}"
    );
    let alerts = prometheus
        .query(&format!(
            r#"count_over_time(ALERTS{{alertname="EtcdClusterQuorumLost"}}{window})"#
        ))
        .await
        .unwrap();
    assert!(
        alerts.is_empty(),
        "EtcdClusterQuorumLost was pending or firing for a cluster being created: {alerts:?}"
    );
}

/// Waits until Prometheus' last-success timestamp of main's backups is the completion time of
/// EtcdBackup `name`; returns it.
async fn last_backup_is(env: &Env, prometheus: &mut Prometheus, name: &str) -> f64 {
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let backup = backups.get(name).await.unwrap();
    let completed = backup
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
        .unwrap_or_else(|| panic!("{name} has no completionTime: {:?}", backup.status))
        .0
        .as_second() as f64;
    let samples = prometheus
        .wait_until(
            &format!("the last-success timestamp at {name}'s completion ({completed})"),
            r#"etcd_operator_backup_last_success_timestamp_seconds{namespace="db",cluster="main"}"#,
            SCRAPED,
            |s| !s.is_empty() && all_equal(s, completed),
        )
        .await;
    samples[0].value
}

/// Metrics queried by an alert that have series only for clusters this scenario does not
/// make: one per certificate Secret the operator does not issue (a user's or cert-manager's);
/// this scenario's clusters are plaintext. The alert's expression is covered by its promtool
/// case (`charts/etcd-operator/files/alerts.test.yaml`).
const ONLY_FOR_OTHER_CLUSTERS: [&str; 1] = ["etcd_operator_cluster_certificate_near_expiry"];

/// Every metric name a dashboard panel or an alert rule queries is in Prometheus' scrape of
/// the operators and members (`up` is Prometheus' own per target), but
/// [`ONLY_FOR_OTHER_CLUSTERS`].
async fn every_queried_metric_is_scraped(prometheus: &Prometheus) {
    use test_support::monitoring::{alert_queries, dashboard_queries, metric_names};
    let scraped = prometheus.metric_names().await;
    let mut missing = Vec::new();
    let queries: Vec<(String, String)> = dashboard_queries()
        .into_iter()
        .chain(alert_queries())
        .collect();
    for (what, expr) in &queries {
        for name in metric_names(expr) {
            if !scraped.contains(&name) && !ONLY_FOR_OTHER_CLUSTERS.contains(&name.as_str()) {
                missing.push(format!("{what}: {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "queried but not in the scrape of the operators and members:\n{}\nscraped: {scraped:?}",
        missing.join("\n")
    );
}

fn keys(prefix: &str, n: usize) -> impl Iterator<Item = (String, String)> {
    let prefix = prefix.to_owned();
    (0..n).map(move |i| (format!("{prefix}{i:03}"), format!("{prefix}value-{i}")))
}

/// Waits for the EtcdBackup and returns its artifact, failing unless it Succeeded.
async fn succeeded_backup(env: &Env, name: &str) -> BackupArtifact {
    let backup = wait_backup_finished(env, name).await;
    let status = backup.status.unwrap_or_default();
    match (status.phase, status.artifact.clone()) {
        (Some(BackupPhase::Succeeded), Some(artifact)) => artifact,
        _ => fail(
            env,
            &format!("EtcdBackup {name} did not succeed: {status:?}"),
        ),
    }
}

enum Source<'a> {
    Backup(&'a str),
    S3 {
        key: &'a str,
        secret: &'a str,
        sha256: Option<&'a str>,
    },
}

/// An EtcdRestore manifest (examples/restore.yaml, examples/restore-from-s3.yaml without
/// clusterSpec).
fn restore_yaml(name: &str, cluster: &str, source: &Source, force: bool) -> String {
    let mut yaml = format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdRestore\nmetadata: {{name: {name}}}\n\
         spec:\n  clusterName: {cluster}\n  force: {force}\n  source:\n"
    );
    match source {
        Source::Backup(backup) => yaml.push_str(&format!("    backupRef: {{name: {backup}}}\n")),
        Source::S3 {
            key,
            secret,
            sha256,
        } => {
            yaml.push_str(&format!(
                "    s3:\n      bucket: {BUCKET}\n      key: {key}\n      endpoint: {S3_ENDPOINT}\n      \
                 region: us-east-1\n      forcePathStyle: true\n      \
                 credentialsSecretRef: {{name: {secret}}}\n"
            ));
            if let Some(sha256) = sha256 {
                yaml.push_str(&format!("    sha256: {sha256}\n"));
            }
        }
    }
    yaml
}

/// What examples/restore-from-s3.yaml names: the restore, the cluster it creates, its size.
const COPY_RESTORE: &str = "main-copy-restore";
const COPY: &str = "main-copy";
const COPY_SIZE: usize = 3;

/// examples/restore-from-s3.yaml as a user applies it, with the two values that point at the
/// user's store replaced by this scenario's: `key` (the object of this run's backup, for the
/// example's `prod/main/...` one) and the endpoint ([`S3_ENDPOINT`], the S3 Service in this
/// namespace, for the example's `s3.storage` one). Everything else is the example's own, and
/// what the scenario relies on is checked first: the names above, the bucket, the Secret.
fn restore_from_s3_example(key: &str) -> String {
    let path = workspace().join("examples/restore-from-s3.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    // Lines without their comments (the example's layout is plain block YAML).
    let bare = |l: &str| l.split(" #").next().unwrap().trim_end().to_owned();
    for expected in [
        format!("  name: {COPY_RESTORE}"),
        format!("  clusterName: {COPY}"),
        format!("      bucket: {BUCKET}"),
        format!("        name: {S3_SECRET}"),
        format!("    size: {COPY_SIZE}"),
        format!("    version: {VERSION}"),
    ] {
        assert!(
            text.lines().any(|l| bare(l) == expected),
            "{} no longer has the line {expected:?}; the restore scenario relies on it",
            path.display()
        );
    }
    let mut replaced = [0, 0];
    let yaml: Vec<String> = text
        .lines()
        .map(|line| {
            if line.starts_with("      key: ") {
                replaced[0] += 1;
                format!("      key: {key}")
            } else if line.starts_with("      endpoint: ") {
                replaced[1] += 1;
                format!("      endpoint: {S3_ENDPOINT}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    assert_eq!(
        replaced,
        [1, 1],
        "{}: one source.s3 key and one endpoint line to replace",
        path.display()
    );
    yaml.join("\n") + "\n"
}

/// What a wait on an EtcdRestore saw, in order, without repeats.
#[derive(Debug, Default)]
struct Seen {
    restore_phases: Vec<RestorePhase>,
    cluster_phases: Vec<ClusterPhase>,
    /// Values of the restoring annotation on the EtcdCluster.
    annotations: BTreeSet<String>,
    /// Seconds from the apply to the restore's final phase.
    seconds: u64,
}

/// Waits until the EtcdRestore is Succeeded or Failed, watching the EtcdCluster on the way.
async fn wait_restore(
    env: &Env,
    name: &str,
    cluster: &str,
    timeout: Duration,
) -> (EtcdRestore, Seen) {
    let restores: Api<EtcdRestore> = Api::namespaced(env.client.clone(), NS);
    let start = tokio::time::Instant::now();
    let mut seen = Seen::default();
    loop {
        if let Ok(Some(c)) = env.clusters().get_opt(cluster).await {
            if let Some(phase) = c.status.as_ref().and_then(|s| s.phase)
                && seen.cluster_phases.last() != Some(&phase)
            {
                seen.cluster_phases.push(phase);
            }
            if let Some(value) = c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(RESTORING_ANNOTATION))
            {
                seen.annotations.insert(value.clone());
            }
        }
        if let Ok(r) = restores.get(name).await {
            let phase = r.status.as_ref().and_then(|s| s.phase);
            if let Some(phase) = phase
                && seen.restore_phases.last() != Some(&phase)
            {
                seen.restore_phases.push(phase);
            }
            if phase.is_some_and(RestorePhase::is_finished) {
                seen.seconds = start.elapsed().as_secs();
                return (r, seen);
            }
        }
        if start.elapsed() > timeout {
            fail(
                env,
                &format!("EtcdRestore {name} did not finish within {timeout:?}; seen: {seen:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Applies a restore the operator must refuse with `reason` (any reason when `None`), and
/// checks that `cluster` is untouched afterwards.
async fn refused(
    env: &Env,
    name: &str,
    yaml: &str,
    reason: Option<&str>,
    cluster: Option<(&str, &Footprint)>,
) {
    env.apply(yaml)
        .unwrap_or_else(|e| panic!("applying {name}: {e}"));
    let (restore, seen) = wait_restore(env, name, cluster.map_or("nowhere", |c| c.0), STEP).await;
    let status = restore.status.unwrap_or_default();
    let expected = reason.unwrap_or("<any reason>");
    let reason = status.reason.clone().unwrap_or_default();
    if status.phase != Some(RestorePhase::Failed)
        || reason.is_empty()
        || expected != "<any reason>" && reason != expected
    {
        fail(
            env,
            &format!("{name}: expected Failed/{expected}, got {status:?}; seen: {seen:?}"),
        );
    }
    let failed = status.conditions.iter().find(|c| c.type_ == "Failed");
    assert!(
        failed.is_some_and(|c| c.status == "True" && c.reason == reason),
        "{name}: no Failed condition with reason {reason}: {status:?}"
    );
    assert!(
        status.message.as_deref().is_some_and(|m| !m.is_empty()),
        "{name}: no message: {status:?}"
    );
    assert!(
        status.restored_revision.is_none(),
        "{name}: a refused restore reports a restored revision: {status:?}"
    );
    eprintln!(
        "{name}: Failed/{reason} in {} s: {}",
        seen.seconds,
        status.message.unwrap_or_default()
    );
    if let Some((cluster, before)) = cluster {
        assert_untouched(env, cluster, before, Some(name)).await;
    }
}

/// A member object as seen at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Object {
    uid: Option<String>,
    terminating: bool,
    /// The retained-by-restore label's value.
    retained: Option<String>,
}

/// The Pods and PVCs of a cluster: those carrying its label, or named like its members.
#[derive(Clone, Debug, Default)]
struct Footprint {
    pods: BTreeMap<String, Object>,
    pvcs: BTreeMap<String, Object>,
}

async fn footprint(env: &Env, cluster: &str) -> Footprint {
    let ours = |meta: &kube::api::ObjectMeta| {
        let labelled = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(CLUSTER_LABEL))
            .is_some_and(|c| c == cluster);
        let named = meta.name.as_deref().is_some_and(|n| {
            n.strip_prefix(cluster)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|o| !o.is_empty() && o.bytes().all(|b| b.is_ascii_digit()))
        });
        labelled || named
    };
    let object = |meta: &kube::api::ObjectMeta| Object {
        uid: meta.uid.clone(),
        terminating: meta.deletion_timestamp.is_some(),
        retained: meta
            .labels
            .as_ref()
            .and_then(|l| l.get(RETAINED_LABEL).cloned()),
    };
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let mut out = Footprint::default();
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        if ours(&pod.metadata) {
            out.pods
                .insert(pod.metadata.name.clone().unwrap(), object(&pod.metadata));
        }
    }
    for pvc in pvcs.list(&ListParams::default()).await.unwrap().items {
        if ours(&pvc.metadata) {
            out.pvcs
                .insert(pvc.metadata.name.clone().unwrap(), object(&pvc.metadata));
        }
    }
    out
}

/// The contract of a refused restore: the cluster's Pods and PVCs still exist (the same
/// objects, not being deleted), no restoring annotation remains on the EtcdCluster, and no PVC
/// got the retained-by-restore label (none of the cluster's, none anywhere naming `refused`).
/// Anything new (a seed left behind) is reported on stderr.
async fn assert_untouched(env: &Env, cluster: &str, before: &Footprint, refused: Option<&str>) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let now = footprint(env, cluster).await;
        let kept = |was: &BTreeMap<String, Object>, is: &BTreeMap<String, Object>| {
            was.iter().all(|(name, object)| {
                is.get(name)
                    .is_some_and(|o| o.uid == object.uid && !o.terminating)
            })
        };
        if !kept(&before.pods, &now.pods) || !kept(&before.pvcs, &now.pvcs) {
            fail(
                env,
                &format!("{cluster} was touched: before {before:?}\nnow {now:?}"),
            );
        }
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
        let labelled: Vec<String> = pvcs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| {
                let name = p.metadata.name.clone().unwrap();
                let label = p.metadata.labels.as_ref()?.get(RETAINED_LABEL)?.clone();
                let newly = now.pvcs.contains_key(&name)
                    && before.pvcs.get(&name).is_none_or(|o| o.retained.is_none());
                (newly || refused == Some(label.as_str())).then(|| format!("{name}={label}"))
            })
            .collect();
        if !labelled.is_empty() {
            fail(
                env,
                &format!("PVCs labelled {RETAINED_LABEL} after a refusal: {labelled:?}"),
            );
        }
        let annotated = env
            .clusters()
            .get(cluster)
            .await
            .map(|c| has_restoring_annotation(&c))
            .unwrap_or(false);
        let extra: Vec<&String> = now
            .pods
            .keys()
            .chain(now.pvcs.keys())
            .filter(|n| !before.pods.contains_key(*n) && !before.pvcs.contains_key(*n))
            .collect();
        if !annotated && extra.is_empty() {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            if annotated {
                fail(
                    env,
                    &format!(
                        "{cluster} still carries {RESTORING_ANNOTATION} {SETTLE:?} after the refusal"
                    ),
                );
            }
            eprintln!("NOTE: {cluster}: objects left behind by the refused restore: {extra:?}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Available with `size` healthy voters on `version`, all ready (what `Env::wait_available`
/// waits for), checked once.
fn available_at(c: &EtcdCluster, size: usize, version: &str) -> bool {
    let Some(s) = &c.status else { return false };
    s.conditions
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "True")
        && s.members.iter().filter(|m| !m.learner).count() == size
        && s.members.iter().filter(|m| m.healthy).count() == size
        && s.ready_members as usize == size
        && s.current_version.as_deref() == Some(version)
}

fn has_restoring_annotation(c: &EtcdCluster) -> bool {
    c.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(RESTORING_ANNOTATION))
}

fn conditions_line(c: &EtcdCluster) -> String {
    c.status
        .as_ref()
        .map(|s| {
            s.conditions
                .iter()
                .map(|c| format!("{}={} ({})", c.type_, c.status, c.reason))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Every key under `prefix`, read linearizably through the cluster's client Service, and the
/// revision of the read. Retries while the Service's endpoints settle.
async fn read_keys(env: &Env, cluster: &str, prefix: &str) -> (BTreeMap<String, String>, i64) {
    let url = env.client_url(cluster).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match read_once(&url, prefix).await {
            Ok(read) => return read,
            Err(e) if tokio::time::Instant::now() > deadline => fail(
                env,
                &format!("reading {prefix} from {cluster} through {url}: {e}"),
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn read_once(
    url: &str,
    prefix: &str,
) -> Result<(BTreeMap<String, String>, i64), etcd_client::Error> {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5));
    let mut client = etcd_client::Client::connect([url], Some(options)).await?;
    let response = client
        .get(prefix, Some(etcd_client::GetOptions::new().with_prefix()))
        .await?;
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
    Ok((keys, response.header().unwrap().revision()))
}
