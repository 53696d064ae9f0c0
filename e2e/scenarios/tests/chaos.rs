//! Crash and restart at the operators' failpoints (crates/failpoint): the operator's Deployment
//! gets `ETCD_OPERATOR_FAILPOINT=<name>:<before|after>`, an action makes it reach that side
//! effect, the process exits there (code 86, and again at each restart of the container while
//! the point is still reached), then the variable is removed and the operator restarted without
//! it. Every case runs with its own concurrent clients on the cluster (common's `Workload`):
//! their history must be linearizable with no acknowledged write lost.
//!
//! - The cluster operator (a spec change: scale up or down, the reclaim policy flipped): the
//!   cluster converges to Available at the size asked, the etcd member list is exactly the
//!   member Pods (no extra or missing member, none left a learner), every member that existed
//!   before the crash kept its etcd ID (a member never restarted on an empty data directory
//!   under its old ID), and no PVC vanished (reclaimPolicy Retain). `spec.backup` set or
//!   removed: its CronJob, ServiceAccount, Role and RoleBinding exist as specified (owned by
//!   the cluster, one spec hash, the CronJob running as the ServiceAccount the RoleBinding
//!   binds), or are gone; the case added or removed exactly those four in the namespace (never
//!   an EtcdBackup, Service, Secret, ...).
//! - Day-2 maintenance (NOSPACE: the cluster's quota set to 16 MiB with compactOnNoSpace, one key
//!   overwritten until etcd refuses writes): crashed at the compaction, a member's
//!   defragmentation, its serving gate (closed before, opened after) or the disarm, the
//!   restarted operator clears the alarm: writes accepted, every member Pod's gate open and
//!   Ready in the client Service's EndpointSlices, plus the checks above.
//! - The switch of a running plaintext cluster to TLS (`spec.tls` set on a new cluster of three,
//!   one per case): crashed at a `MemberUpdate` of a peer URL, or at the revert's mark (the
//!   armed operator cut from the first member on `https://` so that it reverts it), the
//!   restarted operator completes the switch: every member Ready on TLS-only peers (clients on
//!   both schemes), every peer URL `https://`, plus the checks above. Crashed at the revert's
//!   mark with the cut made in the member's namespace instead (its client ports closed to
//!   every Pod but its peers: it outlives the operator's restart), the restarted operator
//!   completes the revert (the member back on `http://`), and once its Pod is deleted the
//!   switch too.
//! - The cluster operator's writes beyond membership (chaos_cases/cluster_writes.rs): the
//!   NetworkPolicy applied and deleted (`spec.networkPolicy.enabled` set and unset), a member
//!   Pod without its configuration hash adopted, the TLS Secrets created (a switch to TLS, as
//!   above, each member's certificate then checked: signed by the cluster's CA, its names
//!   covered) and a near-expiry member certificate renewed, a cert-manager cluster's
//!   Certificates created, the PVC annotations of the v2 snapshot before 3.5 -> 3.6, and member
//!   PVCs grown with `spec.storage.size`: each converges to what the spec asks (the module says
//!   how it is checked), plus the checks above.
//! - The backup operator (an on-demand EtcdBackup of the cluster): the backup ends Succeeded with
//!   its object in S3, read back and matching `status.artifact` (size, SHA-256), or Failed with
//!   no object carrying its UID; either way no multipart upload is left pending under the
//!   prefix and every object there before the case is unchanged (never overwritten).
//! - The restore operator (an EtcdRestore into a new one-member cluster from a backup taken
//!   before the cases): the restore ends Succeeded, the new cluster is Available, serves the
//!   restored revision and holds the marker key written before that backup; the new member's
//!   PVC exists and the source cluster's PVCs are all still there.
//! - A restore over an existing cluster ([`LOST`]: two members, one lost with its volume, so
//!   quorum lost), the restore operator crashed at the hold, at an old member PVC's retained
//!   label or at an old member Pod's deletion: the restore ends Succeeded, the cluster
//!   Available at full size serving the restored revision, every old member PVC kept (the same
//!   object, labelled retained, owned by nobody), no old member Pod left, no PVC deleted. The
//!   same cluster restored from a tampered copy of the backup (the original's SHA-256), crashed
//!   while the failed seed is removed (its Pod, its PVC): the restore ends Failed
//!   (`ChecksumMismatch`) with the seed gone and the cluster as it was.
//! - The backup's aborts: a backup streamed from a slowed follower past its 10 s
//!   `timeoutSeconds` (crashed at the abort), the same backup with the operator SIGKILLed
//!   mid-upload (crashed when the restarted operator aborts the upload left pending), and a
//!   backup whose UploadPart S3 holds past the deadline and the executor's grace (crashed at
//!   the dropped upload's abort): Failed (`Timeout` or `Interrupted`), no object, nothing
//!   pending, and the next backup succeeds.
//! - The CronJob's Job (`create-backup`, a cluster whose `spec.backup` keeps two with
//!   `deleteObjects`), its template run as a Job with the failpoint in its environment, crashed
//!   at the EtcdBackup's creation or at retention's S3 or EtcdBackup deletion, then run again
//!   unarmed (the Job does not retry; the next schedule does): the crashed run created at most
//!   one EtcdBackup and the next one exactly one, all Succeeded, and exactly the newest two are
//!   left, each with its object, every older one gone with its object.
//! - Process faults, no failpoint: a voter's etcd SIGKILLed while a new learner catches up
//!   (converges at the new size, every member keeping its ID), and a member's etcd SIGSTOPped
//!   past the operator's dead-member grace period (shortened to [`DEAD_AFTER_SECONDS`]) then
//!   resumed: the operator may replace it (its Pod was NotReady and its peers did not hear
//!   it), and must converge with every other member keeping its ID and no PVC lost.
//! - Network faults: the cluster operator's netns cut (nftables, via nsenter) from one
//!   member's Pod IP past the grace period: the member must stay (the kubelet reports it
//!   Ready and its peers hear it), with no member changed once the cut heals. One member's
//!   netns cut from its peers (not from the operator) for 12 s, far past etcd's 1 s election
//!   timeout (it reports no leader) and short of the grace period: neither removed nor
//!   replaced, quorum kept by the other two. The leader slowed by a tbf bandwidth limit on its
//!   Pod's interface during a scale-up, and a follower during a backup that must succeed (this
//!   kernel has no `sch_netem`, so no added delay: `tc qdisc add ... netem` answers "Specified
//!   qdisc kind is unknown"); the limit is scaled to the member's database so that sending it
//!   takes [`SLOW_TRANSFER`] whatever the cases before wrote.
//! - The cluster operator at two replicas, its leader SIGSTOPped during a scale-up: the
//!   standby takes the Lease and finishes it; the old leader, resumed, exits with no
//!   successful API write between its resume and its exit (the audit log, by the Pod name in
//!   its bound token). A member's etcd SIGKILLed during the 3.5 -> 3.6 upgrade roll (last:
//!   the cluster stays upgraded). The backup operator SIGKILLed while a member streams it the
//!   snapshot (an established connection from its Pod on the member's client port; members'
//!   egress limited so the stream lasts).
//! - S3 faults, no failpoint: weed SIGKILLed as a backup starts (the kubelet restarts it on
//!   its emptyDir): the backup fails cleanly or succeeds, nothing pending, the next backup
//!   succeeds; weed SIGSTOPped for [`S3_PAUSE`] as a restore starts: the restore succeeds once
//!   it answers. (S3 dying mid-upload and coming back, which needs a snapshot large enough to
//!   catch in flight, is operators/backup/tests/execute.rs.) An ambiguous
//!   CompleteMultipartUpload: the backup's endpoint is a proxy in the test that passes the
//!   completion to S3 and drops its answer; the backup must not end Failed with its object in
//!   place, nor Succeeded without one (checked by listing).
//!
//! One runner ([`operator_crashed_at_failpoints_converges_after_restart`]) drives the table:
//! for each case it prepares what the case needs, unarmed and not timed ([`prepare`], a
//! cluster of the case's own), starts the clients, runs the case and records its row. A
//! failpoint case is handed an [`Armed`], whose [`Armed::crash_and_restart`] is the sequence
//! they all share (armed, the case's change, the crash, the restart without the failpoint);
//! the case then waits for the converged state it names and checks it. The table is built
//! from lists of failpoints and their trigger, [`both_sides`] of each.
//!
//! `cargo nextest run` runs a representative subset ([`SUBSET`]); `make chaos` sets
//! `CHAOS_FULL=1` and runs every failpoint these actions reach, on both sides, printing one
//! table: scenario, outcome, time to converge, operations checked, acknowledged writes lost,
//! linearizable. `CHAOS_ONLY=<name>:<side>,...` runs just those cases of the full table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "chaos_cases/cluster_writes.rs"]
mod cluster_writes;
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::netns::{in_netns, nft, operator_pid, operator_pid_of_pod};
use common::*;
use etcd_api::{BackupPhase, EtcdBackup, EtcdRestore, RestorePhase};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::ListParams;
use sha2::{Digest, Sha256};

const VERSION: &str = "3.5.35";
/// Generous for a 2-core machine running several scenarios at once.
const STEP: Duration = Duration::from_secs(240);
/// The cluster every case runs its clients on.
const CLUSTER: &str = "chaos";
/// Where the cases' backups go.
const BACKUP_PREFIX: &str = "chaos/";
/// Written before the restore cases' source backup; every restored cluster must hold it.
const MARKER: (&str, &str) = ("chaos/marker", "written-before-the-source-backup");

/// What makes the operator reach a failpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// `spec.size` one up: learner added, PVC and Pod created, promoted; Services, budget and
    /// status written on the way.
    ScaleUp,
    /// `spec.size` one down: member removed, then its Pod deleted (and its PVC under Delete).
    ScaleDown,
    /// `spec.storage.reclaimPolicy` flipped: the PVCs' owner references follow.
    FlipReclaimPolicy,
    /// `spec.backup` set: the schedule's ServiceAccount, Role, RoleBinding and CronJob applied
    /// (in that order). Converged: the four exist as specified ([`schedule_converged`]).
    SetBackupSchedule,
    /// `spec.backup` removed: the RoleBinding, Role, ServiceAccount and CronJob deleted (in
    /// that order). Converged: the four are gone, and nothing else in the namespace (no
    /// EtcdBackup, no Service, Secret, ...) went with them.
    RemoveBackupSchedule,
    /// An on-demand EtcdBackup: Running written, the snapshot streamed as a multipart upload
    /// (create, parts, complete), the outcome written.
    Backup,
    /// An EtcdRestore into a new cluster (`clusterSpec`): the cluster created, the seed's PVC
    /// and Pod, the seed admitted, the hold released, the finalizer, the status.
    RestoreNew,
    /// NOSPACE on [`CLUSTER`] (prepared once: `etcdOptions.quotaBackendBytes` [`NO_SPACE_QUOTA`]
    /// and `maintenance.compactOnNoSpace`, a roll): one key overwritten with 512 KiB values
    /// until etcd refuses writes. The operator compacts, defragments each member with its Pod
    /// drained from the client Service (serving gate closed, then opened), the leader last,
    /// and disarms the alarm. Converged: no alarm, a write accepted, every member Pod's gate
    /// open and every Pod Ready in the client Service's EndpointSlices
    /// ([`no_space_cleared`]).
    NoSpace,
    /// `spec.tls` set on a new plaintext cluster of three ([`tls_cluster`], on
    /// [`UPGRADE_TO`]): each member rolls onto both listeners, its peer URL moves to
    /// `https://` (`MemberUpdate`), then each rolls onto TLS-only peers. Converged: every
    /// member Ready, listening for peers on `https://` only and for clients on both, and every
    /// peer URL in etcd's member list `https://` ([`switched_to_tls`]).
    TlsSwitch,
    /// [`Trigger::TlsSwitch`], and the armed operator's network namespace cut (nftables) from
    /// the first member whose peer URL moved to `https://`: to the operator it does not answer
    /// on TLS, so after [`REVERT_AFTER`] its Pod is marked reverted and its URL moved back.
    /// The restarted operator (a new Pod, not cut) sees the member answer and completes the
    /// switch (a Pod found marked with its URL back on `http://` is deleted by the test, as
    /// the operator's `Reverted` wait asks); converged as [`Trigger::TlsSwitch`].
    TlsRevert,
    // The cluster operator's writes beyond membership (chaos_cases/cluster_writes.rs; also
    // `cluster.secret_create`, reached by a switch to TLS).
    /// `spec.networkPolicy.enabled: true` on [`CLUSTER`]: the NetworkPolicy applied.
    SetNetworkPolicy,
    /// `spec.networkPolicy.enabled: false` on [`CLUSTER`]: the NetworkPolicy deleted.
    RemoveNetworkPolicy,
    /// A member Pod of [`CLUSTER`] without its configuration hash (as a release before hashes
    /// built it): adopted, the hash recorded by an annotation patch.
    AdoptPod,
    /// A TLS cluster of its own; one member's certificate replaced by a copy near its end: the
    /// Secret re-issued in place, the member rolled onto it.
    RenewCertificate,
    /// A new cluster whose certificates cert-manager issues (the stand-in fills the Secrets):
    /// its Certificates created.
    CertManagerCluster,
    /// A 3.5 cluster of its own upgraded to [`UPGRADE_TO`]: each member's PVC records the v2
    /// snapshot taken before it moves to 3.6.
    UpgradeWithV2Snapshot,
    /// A cluster of its own on a StorageClass that allows expansion, `spec.storage.size` 1Gi ->
    /// 2Gi: each member PVC's request raised, then the members rolled onto the new quota.
    GrowVolumes,
    /// [`Trigger::TlsRevert`], the cut made on the member's side instead (nftables in its network
    /// namespace: its client ports closed to every Pod but its peers), so that it outlives the
    /// operator's restart: the restarted operator, still finding the member silent on its new
    /// `https://` peer URL, completes the revert [`REVERT_AFTER`] later (its clock starts again),
    /// the URL back on `http://`. The test then deletes the reverted Pod, as the `Reverted` wait
    /// asks (its next Pod has a network namespace of its own, uncut), and the switch completes.
    /// Converged as [`Trigger::TlsSwitch`], and the member must have been seen marked and back
    /// on `http://`. (Cutting the member from its peers on its TLS peer port does not make it
    /// silent: etcd receives from a peer over the connection it dials to that peer's URL, and
    /// sends over pipelines it dials too; tried, it stayed healthy for 300 s.)
    TlsRevertCompletes,
    /// No failpoint: `spec.tls` set on a new plaintext cluster of three ([`tls_cluster`]), and
    /// once the first peer URL moved to `https://`, another member's PVC and Pod deleted (its
    /// data gone: removed at once as dead). The switch must not wait on the quorum gate with two
    /// voters for ever (it did, found by [`Trigger::TlsRevertCompletes`] in a full run): the
    /// member is replaced (a new name) on its stage's peer URL, then the switch completes.
    /// Converged as [`Trigger::TlsSwitch`], the lost member gone from etcd.
    MemberLostMidSwitch,
    /// No failpoint: one member's etcd SIGSTOPped (a grey failure: its Pod turns NotReady, its
    /// peers stop hearing it) for longer than the operator's dead-member grace period, then
    /// SIGCONT. The operator may replace it (it was dead by every account) but must converge.
    StopMember,
    /// No failpoint: `spec.size` one up, and a voter's etcd SIGKILLed while the new learner
    /// catches up (the kubelet restarts it on its data).
    KillDuringCatchUp,
    /// No failpoint: the cluster operator's network namespace cut from one member's Pod IP
    /// (an nftables drop rule entered with nsenter) for longer than the dead-member grace
    /// period. The kubelet still reports the member Ready and the leader still hears it, so
    /// the operator must not remove it (design.md: unreachable from the operator is not dead).
    OperatorCutFromMember,
    /// No failpoint: one member's network namespace cut from its peers' Pod IPs (nftables, via
    /// nsenter; the operator and the Service proxy still reach it) for [`PARTITION`], far past
    /// etcd's 1 s election timeout and short of the dead-member grace period, then healed. It
    /// may come back, so the operator must neither remove nor replace it; quorum holds with the
    /// other two.
    PartitionMember,
    /// No failpoint: the leader slowed (a tbf bandwidth limit on its Pod's interface, scaled to
    /// its database: [`slow_rate`]; this kernel has no netem for added delay) while `spec.size`
    /// goes one up; the new learner catches up and is promoted, the slow member stays, and the
    /// limit is lifted.
    SlowMemberScaleUp,
    /// No failpoint: one follower slowed the same way while an on-demand backup streams its
    /// snapshot from that member (`spec.endpoints` naming it alone: given the whole cluster the
    /// operator picks any member with the highest revision, and in the first full run it picked
    /// a fast one): the backup must end Succeeded with its verified object.
    SlowMemberBackup,
    /// No failpoint: the cluster operator at two replicas; the leader's process SIGSTOPped, then
    /// `spec.size` one up. The standby must take the Lease once it expires and grow the
    /// cluster; the old leader, resumed as soon as the standby holds the Lease, must stop (it
    /// lost the Lease) without a single successful write to the API server (the audit log, by
    /// the Pod name bound in its token) between its resume and its exit. Back to one replica.
    StopLeaderOperator,
    /// No failpoint: an on-demand backup whose S3 endpoint is a proxy in the test that passes
    /// everything to S3 but loses the answer to the CompleteMultipartUpload (S3 applied it).
    /// The backup must end Succeeded with its object (read back, matching `status.artifact`),
    /// or Failed with none: never Failed with its object in place. Checked by listing.
    AmbiguousComplete,
    /// No failpoint: [`Trigger::AmbiguousComplete`], and the proxy then drops every connection
    /// for [`S3_SILENCE`], longer than the operator's read-back of the key (20 s) and its abort
    /// (20 s): whether the object exists is unknown to the operator meanwhile. The backup must
    /// not end Failed while its object may exist: it ends Succeeded with it once S3 answers.
    AmbiguousCompleteThenSilent,
    /// No failpoint: the backup operator's process SIGKILLed while its snapshot stream from a
    /// member is open (members' egress limited to [`STREAM_RATE`] so that it lasts); the
    /// kubelet restarts it, and it must end the backup cleanly.
    KillBackupOperator,
    /// No failpoint, and last in the table (an upgrade cannot be undone): `spec.version` to
    /// [`UPGRADE_TO`], and a member's etcd still on the old version SIGKILLed once the roll has
    /// begun (the kubelet restarts it on its data). The roll completes, every member keeping its
    /// ID.
    KillDuringUpgrade,
    /// No failpoint: S3 (weed) SIGKILLed as an on-demand backup starts (the kubelet restarts it
    /// on the same emptyDir): the backup fails cleanly or retries, nothing is left pending,
    /// and the next backup succeeds.
    S3DownBackup,
    /// No failpoint: S3 (weed) SIGSTOPped while a restore into a new cluster starts, resumed
    /// [`S3_PAUSE`] later: the restore succeeds once S3 answers again, or fails with nothing
    /// deleted.
    S3DownRestore,
    // Issue 18's last failpoints (restore over a cluster, a failed seed, the backup's aborts,
    // the CronJob's Job): their cases are grouped at the end of this file.
    /// An EtcdRestore (of the source backup) over [`LOST`], an existing cluster of two that lost
    /// quorum (one member's Pod and PVC deleted, [`lose_quorum`]): held, the seed built, the old
    /// members' PVCs labelled retained and their Pods deleted, handed over. Converged: the
    /// restore Succeeded, [`LOST`] Available at full size serving the restored revision, every
    /// old member PVC kept and labelled, no old member Pod left, no PVC deleted
    /// ([`restore_over_lost_case`]).
    RestoreOverLost,
    /// An EtcdRestore over [`LOST`] (quorum lost) from a tampered copy of the source backup's
    /// object, with the original's SHA-256: the seed's init container finds the mismatch, the
    /// restore fails, and the seed it built is removed (Pod, then PVC) before the hold is
    /// released. Converged: Failed with `ChecksumMismatch`, the seed's Pod and PVC gone, [`LOST`]
    /// as it was (the same Pods and PVCs, no hold, no PVC labelled) ([`failed_seed_case`]).
    RestoreSeedFails,
    /// An on-demand backup streamed from one follower slowed to [`ABORT_STREAM`] for its whole
    /// database, with `timeoutSeconds` [`ABORT_TIMEOUT_SECONDS`]: the deadline fails the stream
    /// mid-upload and the upload is aborted. Converged: Failed (`Timeout`, or `Interrupted` when
    /// the crash came before the outcome), no object of its UID, no pending upload, and the
    /// next backup Succeeded ([`backup_abort_case`]).
    BackupTimesOut,
    /// The same slowed backup, and the backup operator SIGKILLed once its multipart upload
    /// exists: the restarted operator finds the backup Running and aborts the upload the
    /// killed run left pending. Converged as [`Trigger::BackupTimesOut`] (`Interrupted`).
    BackupInterrupted,
    /// An on-demand backup through a proxy that holds each UploadPart for [`PART_HELD`] before
    /// passing it on (S3 slow to answer a part), with `timeoutSeconds`
    /// [`ABORT_TIMEOUT_SECONDS`]: the run is given up while the part is held (deadline, then
    /// the executor's 30 s grace) and dropped; the dropped upload's abort is spawned (the
    /// failpoint), and the executor aborts the run's upload itself before the outcome.
    /// Converged as [`Trigger::BackupTimesOut`].
    BackupPartStuck,
    /// The CronJob's Job: [`SCHEDULED`]'s `spec.backup` CronJob (retain [`SCHEDULED_RETAIN`],
    /// deleteObjects) run as a Job with the failpoint in its container's environment (the Job
    /// does not retry: `backoffLimit: 0`), then run again unarmed, as the next schedule does.
    /// Converged: the armed run created at most one EtcdBackup, the next exactly one, every
    /// backup finished Succeeded, and the scheduled backups left are exactly the newest
    /// [`SCHEDULED_RETAIN`] with their objects, every older one deleted with its object
    /// ([`scheduled_run_case`]).
    ScheduledRun,
}

impl Trigger {
    /// A fault of a process (etcd, S3) rather than an operator crash at a failpoint.
    fn is_process_fault(self) -> bool {
        matches!(
            self,
            Trigger::StopMember
                | Trigger::MemberLostMidSwitch
                | Trigger::KillDuringCatchUp
                | Trigger::OperatorCutFromMember
                | Trigger::PartitionMember
                | Trigger::SlowMemberScaleUp
                | Trigger::SlowMemberBackup
                | Trigger::KillDuringUpgrade
                | Trigger::StopLeaderOperator
                | Trigger::AmbiguousComplete
                | Trigger::AmbiguousCompleteThenSilent
                | Trigger::KillBackupOperator
                | Trigger::S3DownBackup
                | Trigger::S3DownRestore
        )
    }
}

/// How long a [`Trigger::PartitionMember`] case keeps the member cut from its peers: twelve
/// election timeouts, and well inside the dead-member grace period ([`DEAD_AFTER_SECONDS`]) with
/// room for the operator's next observation after the heal.
const PARTITION: Duration = Duration::from_secs(12);

/// The least bandwidth a slowed member is limited to (tbf on its `eth0`): [`slow_rate`].
const SLOW_RATE_FLOOR_BITS: u64 = 256_000;

/// How long a slowed member takes to send its whole database at the limit. A fixed 256 kbit
/// passed alone (a small database) but not after forty cases had grown it to megabytes: the
/// learner's snapshot then took minutes, and the leader's other streams to it timed out
/// behind it (etcd's 5 s write deadline) again and again.
const SLOW_TRANSFER: Duration = Duration::from_secs(15);

/// A tbf rate (bit/s) at which `db_size` bytes take [`SLOW_TRANSFER`], at least
/// [`SLOW_RATE_FLOOR_BITS`], on top of twice the member's measured traffic before the limit
/// (`background_bits`: replication of the clients' writes, heartbeats, answers). Slow enough to
/// be the bottleneck of the case, scaled to the data; without the background share a leader
/// serving three writing clients after seventy cases (a 3.2 MB database) starved its new
/// learner for 240 s, its streams timing out behind the replication traffic.
fn slow_rate(db_size: i64, background_bits: u64) -> u64 {
    let bits = u64::try_from(db_size).unwrap_or(0) * 8;
    (bits / SLOW_TRANSFER.as_secs()).max(SLOW_RATE_FLOOR_BITS) + 2 * background_bits
}

/// How long a member's own traffic is measured before it is limited.
const BACKGROUND_SAMPLE: Duration = Duration::from_secs(2);

/// The bits per second the member `pid` sends on its `eth0` over [`BACKGROUND_SAMPLE`] (its
/// network namespace's `/proc/<pid>/net/dev`, transmitted bytes).
async fn background_bits(pid: u32) -> u64 {
    let sent = || {
        let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
        dev.lines()
            .find_map(|line| line.trim_start().strip_prefix("eth0:"))
            .and_then(|fields| fields.split_whitespace().nth(8)?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no eth0 transmit counter in /proc/{pid}/net/dev: {dev}"))
    };
    let first = sent();
    tokio::time::sleep(BACKGROUND_SAMPLE).await;
    (sent().saturating_sub(first) * 8) / BACKGROUND_SAMPLE.as_secs()
}

/// The database size etcd reports for the member at `ip` (its Status, on its client port).
async fn member_db_size(ip: &str) -> i64 {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5));
    let url = format!("http://{ip}:2379");
    let mut client = etcd_client::Client::connect([url.as_str()], Some(options))
        .await
        .unwrap();
    client.status().await.unwrap().db_size()
}

/// Limits the egress of the member whose etcd is `pid` to `rate` bit/s (tbf on `eth0`).
fn limit_egress(pid: u32, rate: u64) {
    let rate = format!("{rate}bit");
    in_netns(
        pid,
        "tc",
        &[
            "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", &rate, "burst", "16kb",
            "latency", "400ms",
        ],
    );
}

/// Lifts [`limit_egress`]; returns the qdisc's counters (bytes sent, drops, overlimits) first.
fn lift_egress_limit(pid: u32) -> String {
    let shaped = in_netns(pid, "tc", &["-s", "qdisc", "show", "dev", "eth0"]);
    in_netns(pid, "tc", &["qdisc", "del", "dev", "eth0", "root"]);
    shaped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Bytes a qdisc reports having sent (`Sent N bytes` in `tc -s qdisc show`).
fn sent_bytes(counters: &str) -> u64 {
    counters
        .split_once("Sent ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The version a [`Trigger::KillDuringUpgrade`] case rolls the cluster to.
const UPGRADE_TO: &str = "3.6.16";

/// How long the proxy drops every connection after losing the completion's answer in a
/// [`Trigger::AmbiguousCompleteThenSilent`] case: past the operator's read-back and abort
/// patience (20 s each), so that it must come back to the backup later.
const S3_SILENCE: Duration = Duration::from_secs(45);

/// How long S3 stays stopped in a [`Trigger::S3DownRestore`] case.
const S3_PAUSE: Duration = Duration::from_secs(20);

/// The dead-member grace period the chart is upgraded to before a [`Trigger::StopMember`] case
/// (the chart's default is 300 s, its schema's minimum 30).
const DEAD_AFTER_SECONDS: u64 = 30;

/// The backend quota of [`CLUSTER`] from the first [`Trigger::NoSpace`] case on (bytes): small
/// enough to fill in seconds, large enough for the other cases' data (a few MiB).
const NO_SPACE_QUOTA: u64 = 16 << 20;

/// How long the operator lets a member whose peer URL moved to `https://` stay silent before
/// moving it back (etcd-member's `plan::tls_switch::REVERT_AFTER`).
const REVERT_AFTER: Duration = Duration::from_secs(60);

/// The port a member serves TLS clients on during a switch to TLS (etcd-member's
/// `naming::SWITCH_CLIENT_TLS_PORT`).
const SWITCH_CLIENT_TLS_PORT: u16 = 2378;

#[derive(Clone)]
struct Case {
    failpoint: &'static str,
    when: &'static str,
    trigger: Trigger,
}

impl Case {
    /// `<failpoint>:<side>`, or the process fault's name (`:member_cut` added for a
    /// [`Trigger::TlsRevertCompletes`] case, whose failpoint [`Trigger::TlsRevert`] reaches too).
    fn scenario(&self) -> String {
        if self.trigger.is_process_fault() {
            self.failpoint.to_owned()
        } else if self.trigger == Trigger::TlsRevertCompletes {
            format!("{}:{}:member_cut", self.failpoint, self.when)
        } else {
            format!("{}:{}", self.failpoint, self.when)
        }
    }

    /// The Deployment's component label of the operator this failpoint is in.
    fn operator(&self) -> String {
        let operator = self.failpoint.split('.').next().unwrap();
        format!("app.kubernetes.io/component={operator}-operator")
    }
}

const fn case(failpoint: &'static str, when: &'static str, trigger: Trigger) -> Case {
    Case {
        failpoint,
        when,
        trigger,
    }
}

/// A case on each side (`before`, `after`) of every failpoint of `points`, in their order.
fn both_sides(points: &[(&'static str, Trigger)]) -> Vec<Case> {
    points
        .iter()
        .flat_map(|&(failpoint, trigger)| {
            ["before", "after"].map(|when| case(failpoint, when, trigger))
        })
        .collect()
}

/// `spec.backup.schedule` in the backup-schedule cases: never due during a run (the cases
/// check the objects, not the runs, which the backup scenario covers).
const BACKUP_SCHEDULE: &str = "0 0 1 1 *";

/// The `make test` subset: one crash in each half of a membership change, a status write, a
/// crash mid-upload (a pending multipart upload to clean up), and one while the restore's seed
/// is being built.
const SUBSET: &[Case] = &[
    case("cluster.member_add", "after", Trigger::ScaleUp),
    case("cluster.pod_create", "before", Trigger::ScaleUp),
    case("cluster.member_promote", "before", Trigger::ScaleUp),
    case("cluster.status", "after", Trigger::ScaleUp),
    case("cluster.member_remove", "after", Trigger::ScaleDown),
    case("backup.s3_upload_part", "after", Trigger::Backup),
    // Once flaky (the restored cluster Available but its Service without endpoint: the node
    // agent's status write erased the seed's opened readiness gate; e2e/node/src/status_report.rs).
    case("restore.seed_pod_create", "after", Trigger::RestoreNew),
    case(
        "process.kill_voter_during_catch_up",
        "",
        Trigger::KillDuringCatchUp,
    ),
];

/// The failpoints the full table does not reach, each with the reason. Checked against
/// `failpoint::ALL` by `every_failpoint_has_a_case_or_a_stated_reason`: a new side effect gets
/// a case in [`full`] or a line here.
const NOT_IN_TABLE: &[(&str, &str)] = &[];

/// Every failpoint the triggers reach, on both sides ([`NOT_IN_TABLE`] lists the others).
fn full() -> Vec<Case> {
    use Trigger::*;
    let mut cases = both_sides(&[
        ("cluster.member_add", ScaleUp),
        ("cluster.pvc_create", ScaleUp),
        ("cluster.pod_create", ScaleUp),
        ("cluster.new_pod_serving", ScaleUp),
        ("cluster.member_promote", ScaleUp),
        ("cluster.peer_service_apply", ScaleUp),
        ("cluster.client_service_apply", ScaleUp),
        ("cluster.pdb_apply", ScaleUp),
        ("cluster.status", ScaleUp),
        ("cluster.member_remove", ScaleDown),
        ("cluster.pod_delete", ScaleDown),
        ("cluster.pvc_owner_patch", FlipReclaimPolicy),
        ("cluster.pvc_delete", ScaleDown),
        // spec.backup's objects: each apply reached by setting it, each delete by removing it
        // (a delete last, so that the cases after these run without spec.backup).
        ("cluster.backup_service_account_apply", SetBackupSchedule),
        ("cluster.backup_role_apply", SetBackupSchedule),
        ("cluster.backup_role_binding_apply", SetBackupSchedule),
        ("cluster.backup_cron_job_apply", SetBackupSchedule),
        ("cluster.backup_role_binding_delete", RemoveBackupSchedule),
        ("cluster.backup_role_delete", RemoveBackupSchedule),
        (
            "cluster.backup_service_account_delete",
            RemoveBackupSchedule,
        ),
        ("cluster.backup_cron_job_delete", RemoveBackupSchedule),
        ("backup.status", Backup),
        ("backup.s3_create_multipart", Backup),
        ("backup.s3_upload_part", Backup),
        ("backup.s3_complete", Backup),
        ("backup.status_outcome", Backup),
        ("restore.status", RestoreNew),
        ("restore.cluster_create", RestoreNew),
        ("restore.seed_pvc_create", RestoreNew),
        ("restore.seed_pod_create", RestoreNew),
        ("restore.seed_admit", RestoreNew),
        ("restore.release", RestoreNew),
        ("restore.finalizer_patch", RestoreNew),
        // The switch of a running plaintext cluster to TLS, each case on a new cluster of its
        // own (the switch is one way), which [`CLUSTER`]'s later cases never see.
        ("cluster.member_update", TlsSwitch),
        ("cluster.pod_mark_tls_reverted", TlsRevert),
    ]);
    cases.extend(cluster_writes::cases());
    cases.push(case(
        "process.kill_voter_during_catch_up",
        "",
        KillDuringCatchUp,
    ));
    cases.push(case("process.sigstop_past_grace", "", StopMember));
    cases.push(case(
        "process.member_lost_mid_tls_switch",
        "",
        MemberLostMidSwitch,
    ));
    cases.push(case(
        "net.operator_cut_from_member",
        "",
        OperatorCutFromMember,
    ));
    cases.push(case("s3.killed_as_backup_starts", "", S3DownBackup));
    cases.push(case("s3.stopped_during_restore", "", S3DownRestore));
    cases.push(case(
        "net.member_partitioned_from_peers",
        "",
        PartitionMember,
    ));
    cases.push(case(
        "net.slow_member_during_scale_up",
        "",
        SlowMemberScaleUp,
    ));
    cases.push(case("net.slow_member_during_backup", "", SlowMemberBackup));
    // NOSPACE: after the slow-member cases (its compaction and defragmentations shrink the
    // database they scale their limit to), and the quota it sets stays for the cases after.
    cases.extend(both_sides(&[
        ("cluster.compact", NoSpace),
        ("cluster.member_defragment", NoSpace),
        ("cluster.pod_serving", NoSpace),
        ("cluster.nospace_disarm", NoSpace),
    ]));
    cases.push(case(
        "process.sigstop_leader_operator",
        "",
        StopLeaderOperator,
    ));
    cases.push(case("s3.complete_answer_lost", "", AmbiguousComplete));
    cases.push(case(
        "s3.silent_after_complete_answer_lost",
        "",
        AmbiguousCompleteThenSilent,
    ));
    cases.push(case(
        "process.kill_backup_operator_mid_stream",
        "",
        KillBackupOperator,
    ));
    cases.extend(last_failpoint_cases());
    // Last: the cluster stays on the new version.
    cases.push(case(
        "process.kill_member_during_upgrade",
        "",
        KillDuringUpgrade,
    ));
    cases
}

/// One row of the table.
struct Row {
    scenario: String,
    outcome: Result<(), String>,
    converged: Duration,
    report: WorkloadReport,
}

#[tokio::test(flavor = "multi_thread")]
async fn operator_crashed_at_failpoints_converges_after_restart() {
    let full_run = std::env::var("CHAOS_FULL").is_ok_and(|v| v == "1");
    let mut cases = if full_run { full() } else { SUBSET.to_vec() };
    // `CHAOS_ONLY=backup.s3_complete:after,...`: those cases of the full table (to rerun one).
    if let Ok(only) = std::env::var("CHAOS_ONLY") {
        let wanted: BTreeSet<&str> = only.split(',').map(str::trim).collect();
        cases = full()
            .into_iter()
            .filter(|c| wanted.contains(c.scenario().as_str()))
            .collect();
        assert_eq!(cases.len(), wanted.len(), "CHAOS_ONLY={only}: unknown case");
    }
    let needs_s3 = cases.iter().any(|c| {
        matches!(
            c.trigger,
            Trigger::Backup
                | Trigger::RestoreNew
                | Trigger::S3DownBackup
                | Trigger::S3DownRestore
                | Trigger::AmbiguousComplete
                | Trigger::AmbiguousCompleteThenSilent
                | Trigger::KillBackupOperator
                | Trigger::SlowMemberBackup
                | Trigger::RestoreOverLost
                | Trigger::RestoreSeedFails
                | Trigger::BackupTimesOut
                | Trigger::BackupInterrupted
                | Trigger::BackupPartStuck
                | Trigger::ScheduledRun
        )
    });
    let env = Env::start().await;
    if needs_s3 {
        start_s3(&env);
    }
    let mut cluster = Cluster {
        name: CLUSTER,
        size: 3,
        delete_pvcs: false,
        version: VERSION,
        backup_schedule: false,
        no_space_quota: false,
        network_policy: None,
    };
    env.apply(&cluster.yaml()).unwrap();
    let s3 = if needs_s3 {
        Some(s3_from_host(&env).await)
    } else {
        None
    };
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    let url = env.client_url(cluster.name).await;
    // The restore cases' source: a backup with the marker in it (unarmed, not timed).
    let source = if cases.iter().any(|c| {
        matches!(
            c.trigger,
            Trigger::RestoreNew
                | Trigger::S3DownRestore
                | Trigger::RestoreOverLost
                | Trigger::RestoreSeedFails
        )
    }) {
        write_keys(&env, CLUSTER, [(MARKER.0.to_owned(), MARKER.1.to_owned())]).await;
        env.apply(&on_demand_backup(
            "chaos-source",
            CLUSTER,
            BACKUP_PREFIX,
            S3_SECRET,
        ))
        .unwrap();
        let backup = wait_backup_finished(&env, "chaos-source").await;
        let status = backup.status.unwrap_or_default();
        match (status.phase, &status.artifact) {
            (Some(BackupPhase::Succeeded), Some(a)) => Some(a.revision),
            _ => fail(
                &env,
                &format!("the source backup did not succeed: {status:?}"),
            ),
        }
    } else {
        None
    };

    // The grey failure must outlast the grace period: shortened for it (a rollout, not timed).
    if cases.iter().any(|c| {
        matches!(
            c.trigger,
            Trigger::StopMember | Trigger::OperatorCutFromMember | Trigger::PartitionMember
        )
    }) {
        env.helm_upgrade(&[
            "--set",
            &format!("clusterOperator.deadMemberAfterSeconds={DEAD_AFTER_SECONDS}"),
        ]);
    }

    let mut rows = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let scenario = case.scenario();
        let operator = case.operator();
        let deployment = if case.trigger.is_process_fault() {
            String::new()
        } else {
            env.kubectl(&[
                "get",
                "deployment",
                "-n",
                OPERATOR_NAMESPACE,
                "-l",
                &operator,
                "-o",
                "name",
            ])
            .trim()
            .to_owned()
        };
        prepare(&env, &mut cluster, case).await;
        // A TLS switch case runs on a new plaintext cluster of its own, its clients with it.
        let switched = if matches!(
            case.trigger,
            Trigger::TlsSwitch
                | Trigger::TlsRevert
                | Trigger::TlsRevertCompletes
                | Trigger::MemberLostMidSwitch
        ) {
            Some(tls_cluster(&env, index).await)
        } else {
            None
        };
        // So does a case of chaos_cases/cluster_writes.rs that needs a cluster of its own.
        let own = cluster_writes::own_cluster(&env, case, index).await;
        let (clients_url, clients_tls) =
            match (&switched, own.as_ref().and_then(|o| o.clients.as_ref())) {
                (Some(target), _) => (env.client_url(target.name).await, None),
                (None, Some(clients)) => (clients.url.clone(), clients.tls.clone()),
                (None, None) => (url.clone(), None),
            };
        let clients =
            Workload::start_prefixed(clients_url, clients_tls, &format!("history/{index}/k"));
        // What every failpoint case arms, crashes and restarts (Armed::crash_and_restart).
        let armed = Armed {
            env: &env,
            deployment: &deployment,
            operator: &operator,
            case,
            index,
        };
        let (outcome, converged) = match case.trigger {
            Trigger::ScaleUp
            | Trigger::ScaleDown
            | Trigger::FlipReclaimPolicy
            | Trigger::SetBackupSchedule
            | Trigger::RemoveBackupSchedule => cluster_case(&armed, &mut cluster).await,
            Trigger::NoSpace => no_space_case(&armed, &cluster).await,
            Trigger::SetNetworkPolicy
            | Trigger::RemoveNetworkPolicy
            | Trigger::AdoptPod
            | Trigger::RenewCertificate
            | Trigger::CertManagerCluster
            | Trigger::UpgradeWithV2Snapshot
            | Trigger::GrowVolumes => cluster_writes::run(&armed, &mut cluster, own.as_ref()).await,
            Trigger::TlsSwitch | Trigger::TlsRevert | Trigger::TlsRevertCompletes => {
                tls_switch_case(&armed, switched.as_ref().unwrap()).await
            }
            Trigger::Backup => backup_case(&armed, s3.as_ref().unwrap()).await,
            Trigger::RestoreNew => restore_case(&armed, source.unwrap()).await,
            Trigger::StopMember | Trigger::KillDuringCatchUp => {
                process_case(&env, &mut cluster, case).await
            }
            Trigger::MemberLostMidSwitch => {
                member_lost_mid_switch_case(&env, switched.as_ref().unwrap(), case).await
            }
            Trigger::OperatorCutFromMember => operator_cut_case(&env, &cluster, case).await,
            Trigger::PartitionMember => partition_case(&env, &cluster, case).await,
            Trigger::SlowMemberScaleUp => slow_member_case(&env, &mut cluster, case).await,
            Trigger::SlowMemberBackup => {
                let s3 = s3.as_ref().unwrap();
                slow_member_backup_case(&env, s3, &cluster, index).await
            }
            Trigger::KillDuringUpgrade => upgrade_kill_case(&env, &mut cluster, case).await,
            Trigger::StopLeaderOperator => leader_stop_case(&env, &mut cluster, case).await,
            Trigger::AmbiguousComplete => {
                let s3 = s3.as_ref().unwrap();
                ambiguous_complete_case(&env, s3, index, Duration::ZERO).await
            }
            Trigger::AmbiguousCompleteThenSilent => {
                let s3 = s3.as_ref().unwrap();
                ambiguous_complete_case(&env, s3, index, S3_SILENCE).await
            }
            Trigger::KillBackupOperator => {
                let s3 = s3.as_ref().unwrap();
                kill_backup_operator_case(&env, s3, &cluster, index).await
            }
            Trigger::S3DownBackup => {
                let s3 = s3.as_ref().unwrap();
                s3_down_backup_case(&env, s3, index).await
            }
            Trigger::S3DownRestore => {
                let revision = source.unwrap();
                s3_down_restore_case(&env, index, revision).await
            }
            Trigger::RestoreOverLost
            | Trigger::RestoreSeedFails
            | Trigger::BackupTimesOut
            | Trigger::BackupInterrupted
            | Trigger::BackupPartStuck
            | Trigger::ScheduledRun => {
                last_failpoint_case(&armed, s3.as_ref().unwrap(), &cluster, source).await
            }
        };
        let report = clients.finish().await;
        if let Some(target) = &switched {
            // Frees the machine for the next case (its PVCs stay: Retain).
            env.kubectl(&[
                "delete",
                "etcdcluster",
                target.name,
                "-n",
                NS,
                "--wait=false",
            ]);
        }
        if let Some(own) = own {
            cluster_writes::clean_up(&env, own);
        }
        eprintln!("chaos: {scenario}: {outcome:?} in {converged:.1?}; {report}");
        rows.push(Row {
            scenario,
            outcome,
            converged,
            report,
        });
    }

    println!(
        "\n{:<48} {:<8} {:>12} {:>8} {:>6} {:>12}",
        "scenario", "outcome", "converged in", "ops", "lost", "linearizable"
    );
    let mut failures = Vec::new();
    for row in &rows {
        let outcome = if row.outcome.is_ok() { "ok" } else { "FAILED" };
        println!(
            "{:<48} {outcome:<8} {:>10.1} s {:>8} {:>6} {:>12}",
            row.scenario,
            row.converged.as_secs_f64(),
            row.report.checked.operations,
            row.report.lost.len(),
            if row.report.linearizable() {
                "yes"
            } else {
                "NO"
            },
        );
        if let Err(e) = &row.outcome {
            failures.push(format!("{}: {e}", row.scenario));
        }
        if !row.report.lost.is_empty() || !row.report.linearizable() {
            failures.push(format!("{}: {}", row.scenario, row.report));
            // The evidence: the violation (or the first lost writes) and the whole history.
            if let e2e_harness::linearizability::Verdict::NotLinearizable(v) =
                &row.report.checked.verdict
            {
                failures.push(v.to_string());
            }
            for lost in row.report.lost.iter().take(5) {
                failures.push(lost.to_string());
            }
            match row.report.history.save() {
                Ok(path) => failures.push(format!("history saved in {}", path.display())),
                Err(e) => failures.push(format!("history not saved: {e}")),
            }
        }
    }
    if !failures.is_empty() {
        fail(&env, &failures.join("\n"));
    }
}

/// Unarmed and not timed: gives the cluster room to move the way the case needs.
async fn prepare(env: &Env, cluster: &mut Cluster, case: &Case) {
    let mut changed = false;
    let grows = matches!(
        case.trigger,
        Trigger::ScaleUp
            | Trigger::KillDuringCatchUp
            | Trigger::SlowMemberScaleUp
            | Trigger::StopLeaderOperator
    );
    if grows && cluster.size >= 5 {
        cluster.size = 3;
        changed = true;
    }
    if (case.trigger == Trigger::ScaleDown && cluster.size <= 2)
        || (matches!(
            case.trigger,
            Trigger::StopMember
                | Trigger::OperatorCutFromMember
                | Trigger::PartitionMember
                | Trigger::KillDuringUpgrade
        ) && cluster.size != 3)
    {
        cluster.size = 3;
        changed = true;
    }
    // A PVC is deleted only under reclaimPolicy Delete.
    if case.failpoint == "cluster.pvc_delete" && !cluster.delete_pvcs {
        cluster.delete_pvcs = true;
        changed = true;
    }
    changed |= cluster_writes::prepare(cluster, case);
    // NOSPACE needs a small quota (a roll, once: it stays for the cases after).
    let quota_roll = case.trigger == Trigger::NoSpace && !cluster.no_space_quota;
    if quota_roll {
        cluster.no_space_quota = true;
        changed = true;
    }
    // spec.backup is set to be removed, and removed to be set again.
    let schedule_before = match case.trigger {
        Trigger::SetBackupSchedule => Some(false),
        Trigger::RemoveBackupSchedule => Some(true),
        _ => None,
    };
    if let Some(wanted) = schedule_before
        && cluster.backup_schedule != wanted
    {
        cluster.backup_schedule = wanted;
        changed = true;
    }
    if changed {
        env.apply(&cluster.yaml()).unwrap();
        env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
            .await;
        if quota_roll {
            wait_rolled_onto_quota(env, cluster).await;
        }
        // Not fatal to the table: the case then fails on the same objects.
        if schedule_before.is_some()
            && let Err(e) = wait_schedule(env, cluster.backup_schedule).await
        {
            eprintln!("chaos: preparing {}: {e}", case.failpoint);
        }
    }
}

/// A spec change of the cluster with the cluster operator armed. Timed from the crash: the
/// restart without the failpoint (a rollout, then the Lease the crashed process still held)
/// counts.
async fn cluster_case(armed: &Armed<'_>, cluster: &mut Cluster) -> CaseResult {
    let (env, case) = (armed.env, armed.case);
    let before = Snapshot::take(env, cluster).await;
    let objects_before = namespace_objects(env);
    let restarted = armed
        .crash_and_restart(STEP, async || {
            match case.trigger {
                Trigger::ScaleUp => cluster.size += 1,
                Trigger::ScaleDown => cluster.size -= 1,
                Trigger::FlipReclaimPolicy => cluster.delete_pvcs = !cluster.delete_pvcs,
                Trigger::SetBackupSchedule => cluster.backup_schedule = true,
                Trigger::RemoveBackupSchedule => cluster.backup_schedule = false,
                _ => unreachable!("not a crash of the cluster operator"),
            }
            env.apply(&cluster.yaml()).unwrap();
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    let schedule = match case.trigger {
        Trigger::SetBackupSchedule | Trigger::RemoveBackupSchedule => {
            wait_schedule(env, cluster.backup_schedule).await
        }
        _ => Ok(()),
    };
    let after = Snapshot::take(env, cluster).await;
    let outcome = schedule
        .and_then(|()| check(&before, &after, cluster, case))
        .and_then(|()| check_schedule_objects(&objects_before, &namespace_objects(env), case));
    (outcome, restarted.elapsed())
}

/// The name of the CronJob, ServiceAccount, Role and RoleBinding of [`CLUSTER`]'s `spec.backup`.
fn schedule_name() -> String {
    format!("{CLUSTER}-backups")
}

/// Waits until `spec.backup`'s four objects converged ([`schedule_converged`]) to `wanted`.
async fn wait_schedule(env: &Env, wanted: bool) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    loop {
        match schedule_converged(env, wanted).await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("spec.backup's objects after {STEP:?}: {e}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

/// `spec.backup` set (`wanted`): its CronJob, ServiceAccount, Role and RoleBinding exist, none
/// being deleted, each controlled by the EtcdCluster and carrying the same spec hash; the
/// CronJob runs [`BACKUP_SCHEDULE`] as the ServiceAccount, which the RoleBinding binds to the
/// Role. Unset: none of the four exists.
async fn schedule_converged(env: &Env, wanted: bool) -> Result<(), String> {
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::ResourceExt;
    let name = schedule_name();
    let client = &env.client;
    let error = |e: kube::Error| e.to_string();
    let cron = Api::<CronJob>::namespaced(client.clone(), NS)
        .get_opt(&name)
        .await
        .map_err(error)?;
    let account = Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .get_opt(&name)
        .await
        .map_err(error)?;
    let role = Api::<Role>::namespaced(client.clone(), NS)
        .get_opt(&name)
        .await
        .map_err(error)?;
    let binding = Api::<RoleBinding>::namespaced(client.clone(), NS)
        .get_opt(&name)
        .await
        .map_err(error)?;
    let metas = [
        ("CronJob", cron.as_ref().map(|o| o.metadata.clone())),
        (
            "ServiceAccount",
            account.as_ref().map(|o| o.metadata.clone()),
        ),
        ("Role", role.as_ref().map(|o| o.metadata.clone())),
        ("RoleBinding", binding.as_ref().map(|o| o.metadata.clone())),
    ];
    if !wanted {
        let left: Vec<&str> = metas
            .iter()
            .filter(|(_, meta)| meta.is_some())
            .map(|(kind, _)| *kind)
            .collect();
        return if left.is_empty() {
            Ok(())
        } else {
            Err(format!("spec.backup removed, still there: {left:?}"))
        };
    }
    let uid = cluster_uid(env, CLUSTER).await;
    let mut hashes = BTreeSet::new();
    for (kind, meta) in &metas {
        let meta = meta
            .as_ref()
            .ok_or_else(|| format!("no {kind} {NS}/{name}"))?;
        if meta.deletion_timestamp.is_some() {
            return Err(format!("{kind} {name} is being deleted"));
        }
        let controlled = meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "EtcdCluster" && o.uid == uid && o.controller == Some(true));
        if !controlled {
            return Err(format!(
                "{kind} {name} is not controlled by the EtcdCluster: {:?}",
                meta.owner_references
            ));
        }
        hashes.insert(
            meta.annotations
                .as_ref()
                .and_then(|a| a.get("etcd.operator.rs/backup-spec-hash"))
                .cloned()
                .unwrap_or_default(),
        );
    }
    if hashes.len() != 1 || hashes.contains("") {
        return Err(format!("the four objects' spec hashes differ: {hashes:?}"));
    }
    let cron = cron.unwrap();
    let spec = cron.spec.as_ref().ok_or("CronJob without spec")?;
    if spec.schedule != BACKUP_SCHEDULE {
        return Err(format!("CronJob schedule {:?}", spec.schedule));
    }
    let runs_as = spec
        .job_template
        .spec
        .as_ref()
        .and_then(|j| j.template.spec.as_ref())
        .and_then(|p| p.service_account_name.clone());
    if runs_as.as_deref() != Some(name.as_str()) {
        return Err(format!("CronJob runs as {runs_as:?}, not {name}"));
    }
    let binding = binding.unwrap();
    let binds_account = binding
        .subjects
        .iter()
        .flatten()
        .any(|s| s.kind == "ServiceAccount" && s.name == name);
    if binding.role_ref.kind != "Role" || binding.role_ref.name != name || !binds_account {
        return Err(format!(
            "RoleBinding {} binds {:?} to {:?}",
            binding.name_any(),
            binding.subjects,
            binding.role_ref
        ));
    }
    if role.unwrap().rules.unwrap_or_default().is_empty() {
        return Err(format!("Role {name} grants nothing"));
    }
    Ok(())
}

/// The kinds whose objects in the clusters' namespace a backup-schedule case compares: the
/// schedule's four, and what removing it must never take along.
const NAMESPACE_KINDS: &str = "cronjobs,serviceaccounts,roles,rolebindings,etcdbackups,etcdclusters,services,poddisruptionbudgets,secrets,configmaps,persistentvolumeclaims";

/// `kind/name` of every object of [`NAMESPACE_KINDS`] in the clusters' namespace.
fn namespace_objects(env: &Env) -> BTreeSet<String> {
    env.kubectl(&["get", NAMESPACE_KINDS, "-n", NS, "-o", "name"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A backup-schedule case added (set) or removed (unset) exactly the schedule's four objects
/// among [`NAMESPACE_KINDS`]: never an EtcdBackup or anything else. Other cases: no check.
fn check_schedule_objects(
    before: &BTreeSet<String>,
    after: &BTreeSet<String>,
    case: &Case,
) -> Result<(), String> {
    let name = schedule_name();
    let four: BTreeSet<String> = [
        "cronjob.batch",
        "serviceaccount",
        "role.rbac.authorization.k8s.io",
        "rolebinding.rbac.authorization.k8s.io",
    ]
    .iter()
    .map(|kind| format!("{kind}/{name}"))
    .collect();
    let (changed, what) = match case.trigger {
        Trigger::SetBackupSchedule => (after.difference(before), "added"),
        Trigger::RemoveBackupSchedule => (before.difference(after), "removed"),
        _ => return Ok(()),
    };
    let changed: BTreeSet<String> = changed.cloned().collect();
    let unexpected: Vec<&String> = changed.difference(&four).collect();
    if !unexpected.is_empty() {
        return Err(format!(
            "{} {what} more than spec.backup's four: {unexpected:?}",
            case.failpoint
        ));
    }
    if changed != four {
        return Err(format!(
            "{} {what} {changed:?}, not spec.backup's four {four:?}",
            case.failpoint
        ));
    }
    Ok(())
}

/// A member's etcd stopped or killed (found by its `--name` and the cluster's UID in the
/// initial-cluster token on its command line: the node agent runs containers as host
/// processes and keeps their PIDs in memory only). Timed from the fault's end to Available.
async fn process_case(
    env: &Env,
    cluster: &mut Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let uid = env
        .clusters()
        .get(cluster.name)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let before = Snapshot::take(env, cluster).await;
    // The newest member: never the seed, which the bootstrap made the first leader.
    let victim = before.pods.iter().next_back().unwrap().clone();
    let mut may_be_replaced = None;
    let ended = match case.trigger {
        Trigger::StopMember => {
            let pid = signal_member(&victim, &uid, "STOP");
            let stopped = Instant::now();
            // Held past the grace period, and until the operator has acted on it or a minute
            // more has passed.
            let hold = Duration::from_secs(DEAD_AFTER_SECONDS + 60);
            while stopped.elapsed() < hold {
                let members = member_names(env, cluster.name).await;
                if stopped.elapsed() > Duration::from_secs(DEAD_AFTER_SECONDS)
                    && !members.contains(&victim)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            eprintln!(
                "chaos: {victim} (pid {pid}) stopped for {:.1?}; resuming it",
                stopped.elapsed()
            );
            signal_pid(pid, "CONT");
            may_be_replaced = Some(victim.clone());
            Instant::now()
        }
        Trigger::KillDuringCatchUp => {
            cluster.size += 1;
            env.apply(&cluster.yaml()).unwrap();
            let deadline = Instant::now() + STEP;
            loop {
                if learners(env, cluster.name).await > 0 {
                    break;
                }
                if Instant::now() > deadline {
                    return (
                        Err(format!("no learner seen within {STEP:?}")),
                        Duration::ZERO,
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            kill_member_process(&victim, &uid);
            Instant::now()
        }
        _ => unreachable!("not a process fault"),
    };
    let after = Snapshot::once_available(env, cluster).await;
    let mut expected = before;
    if let Some(victim) = &may_be_replaced
        && after.members.get(victim) != expected.members.get(victim)
    {
        eprintln!("chaos: {victim} was replaced (its etcd ID changed)");
        expected.members.remove(victim);
    }
    (check(&expected, &after, cluster, case), ended.elapsed())
}

/// The cluster operator cut from one member past the grace period; no member may change.
/// Timed from the cut's end to Available.
async fn operator_cut_case(
    env: &Env,
    cluster: &Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let before = Snapshot::take(env, cluster).await;
    let victim = before.pods.iter().next_back().unwrap().clone();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ip = pods
        .get(&victim)
        .await
        .unwrap()
        .status
        .and_then(|s| s.pod_ip)
        .unwrap();
    let operator = operator_pid(env, "etcd-cluster-operator");
    cut_off(operator, &ip);
    let cut = Instant::now();
    let hold = Duration::from_secs(DEAD_AFTER_SECONDS + 30);
    let mut removed = None;
    // The cut must be real: the operator's status reports the member unhealthy at some point.
    let mut seen_unhealthy = false;
    while cut.elapsed() < hold {
        let members = member_names(env, cluster.name).await;
        if !members.is_empty() && !members.contains(&victim) {
            removed = Some(cut.elapsed());
            break;
        }
        let status = env
            .clusters()
            .get(cluster.name)
            .await
            .ok()
            .and_then(|c| c.status);
        seen_unhealthy |=
            status.is_some_and(|s| s.members.iter().any(|m| m.name == victim && !m.healthy));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The operator may have restarted meanwhile (a new netns without the rule): ignore a
    // failure to delete the table then.
    let _ = std::process::Command::new("nsenter")
        .args([
            "-t",
            &operator.to_string(),
            "-n",
            "nft",
            "delete table inet chaos",
        ])
        .status();
    eprintln!(
        "chaos: cluster operator (pid {operator}) cut from {victim} ({ip}) for {:.1?}; \
         reported unhealthy meanwhile: {seen_unhealthy}",
        cut.elapsed()
    );
    let healed = Instant::now();
    if !seen_unhealthy && removed.is_none() {
        return (
            Err(format!(
                "the cut had no visible effect: the operator never reported {victim} unhealthy"
            )),
            healed.elapsed(),
        );
    }
    if let Some(after) = removed {
        return (
            Err(format!(
                "the operator removed {victim} {after:.1?} after losing sight of it, while the \
                 kubelet and its peers still saw it"
            )),
            healed.elapsed(),
        );
    }
    let after = Snapshot::once_available(env, cluster).await;
    (check(&before, &after, cluster, case), healed.elapsed())
}

/// One member cut from its peers (not from the operator) for [`PARTITION`], then healed; no
/// member may change. Timed from the heal to Available.
async fn partition_case(
    env: &Env,
    cluster: &Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let uid = cluster_uid(env, cluster.name).await;
    let before = Snapshot::take(env, cluster).await;
    let victim = before.pods.iter().next_back().unwrap().clone();
    let ips = pod_ips(env, cluster.name).await;
    let victim_ip = ips[&victim].clone();
    let peers: Vec<&str> = ips
        .iter()
        .filter(|(name, _)| **name != victim)
        .map(|(_, ip)| ip.as_str())
        .collect();
    let pid = member_pid(&victim, &uid).unwrap();
    let set = peers.join(", ");
    cut_off(pid, &format!("{{ {set} }}"));
    let cut = Instant::now();
    let mut removed = None;
    // The cut must be real: the victim itself loses its leader (etcd's Status, asked on its own
    // client port from the host, which the cut leaves open).
    let mut leaderless = false;
    while cut.elapsed() < PARTITION {
        let members = member_names(env, cluster.name).await;
        if !members.is_empty() && !members.contains(&victim) {
            removed = Some(cut.elapsed());
            break;
        }
        leaderless |= member_leader(&victim_ip).await == Some(0);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    nft(pid, "delete table inet chaos");
    eprintln!(
        "chaos: {victim} ({victim_ip}, etcd pid {pid}) cut from its peers {set} for {:.1?}; \
         it lost its leader meanwhile: {leaderless}",
        cut.elapsed()
    );
    let healed = Instant::now();
    if let Some(after) = removed {
        return (
            Err(format!(
                "the operator removed {victim} {after:.1?} into a partition from its peers, \
                 short of the dead-member grace period"
            )),
            healed.elapsed(),
        );
    }
    if !leaderless {
        return (
            Err(format!(
                "the cut had no visible effect: {victim} never reported losing its leader"
            )),
            healed.elapsed(),
        );
    }
    let after = Snapshot::once_available(env, cluster).await;
    (check(&before, &after, cluster, case), healed.elapsed())
}

/// The leader slowed by a bandwidth limit ([`slow_rate`] of its database) while the cluster
/// grows by one; the limit is lifted once the cluster is Available at the new size. Timed from
/// the spec change to Available.
async fn slow_member_case(
    env: &Env,
    cluster: &mut Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let before = Snapshot::take(env, cluster).await;
    // The leader: it sends the new learner its snapshot and log, so the limit is on that path.
    let status = env
        .clusters()
        .get(cluster.name)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    let victim = status
        .members
        .iter()
        .find(|m| m.leader)
        .map(|m| m.name.clone())
        .unwrap_or_else(|| before.pods.iter().next_back().unwrap().clone());
    let (pid, db_size) = etcd_of(env, cluster, &victim).await;
    let background = background_bits(pid).await;
    let rate = slow_rate(db_size, background);
    eprintln!(
        "chaos: limiting {victim} (etcd pid {pid}, database {db_size} bytes, sending \
         {background} bit/s) to {rate} bit/s"
    );
    limit_egress(pid, rate);
    let slowed = Instant::now();
    cluster.size += 1;
    env.apply(&cluster.yaml()).unwrap();
    // Timed out here rather than by wait_available's panic: the limit is lifted and the row
    // fails with its figures instead of ending the table.
    let grown = tokio::time::timeout(
        STEP,
        env.wait_available(cluster.name, cluster.size, cluster.version, STEP * 2),
    )
    .await;
    let converged = slowed.elapsed();
    let shaped = lift_egress_limit(pid);
    eprintln!("chaos: {victim} was limited for {converged:.1?}: {shaped}");
    if grown.is_err() {
        return (
            Err(format!(
                "{} not Available with {} members within {STEP:?} while {victim} (database \
                 {db_size} bytes, {background} bit/s before) was limited to {rate} bit/s: \
                 {shaped}\n{}",
                cluster.name,
                cluster.size,
                env.diagnostics()
            )),
            converged,
        );
    }
    let after = Snapshot::take(env, cluster).await;
    (check(&before, &after, cluster, case), converged)
}

/// A voting follower of `cluster` from its status: its name and client URL.
async fn voting_follower(env: &Env, cluster: &Cluster) -> (String, String) {
    let status = env
        .clusters()
        .get(cluster.name)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    status
        .members
        .iter()
        .find(|m| !m.leader && !m.learner)
        .map(|m| (m.name.clone(), m.client_url.clone().unwrap()))
        .unwrap()
}

/// The etcd process of `member` (its pid on the node) and its database size.
async fn etcd_of(env: &Env, cluster: &Cluster, member: &str) -> (u32, i64) {
    let uid = cluster_uid(env, cluster.name).await;
    let ips = pod_ips(env, cluster.name).await;
    let db_size = member_db_size(&ips[member]).await;
    (member_pid(member, &uid).unwrap(), db_size)
}

/// An on-demand backup `name` of [`CLUSTER`] from the member at `client_url` alone
/// (`spec.endpoints`; the key's cluster part kept by the cluster label).
fn backup_from_member(name: &str, client_url: &str) -> String {
    on_demand_backup(name, CLUSTER, BACKUP_PREFIX, S3_SECRET)
        .replace(
            &format!("metadata: {{name: {name}}}"),
            &format!("metadata: {{name: {name}, labels: {{etcd.operator.rs/cluster: {CLUSTER}}}}}"),
        )
        .replace(
            &format!("clusterName: {CLUSTER}"),
            &format!("endpoints: [\"{client_url}\"]"),
        )
}

/// One follower slowed by a bandwidth limit ([`slow_rate`] of its database) while an on-demand
/// backup streams from it (`spec.endpoints`: that member's client URL, the key's cluster part
/// kept by the cluster label): it must end Succeeded with its verified object, and the member's
/// qdisc must have sent at least the snapshot. Timed from the backup's creation to its final
/// phase.
async fn slow_member_backup_case(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    cluster: &Cluster,
    index: usize,
) -> (Result<(), String>, Duration) {
    let name = format!("chaos-backup-{index}");
    let before = objects(s3, BACKUP_PREFIX).await;
    // A follower: the backup operator prefers one (the leader is busiest) on equal revisions.
    let (victim, client_url) = voting_follower(env, cluster).await;
    let (pid, db_size) = etcd_of(env, cluster, &victim).await;
    let rate = slow_rate(db_size, background_bits(pid).await);
    limit_egress(pid, rate);
    let started = Instant::now();
    env.apply(&backup_from_member(&name, &client_url)).unwrap();
    let backup = wait_backup_finished(env, &name).await;
    let converged = started.elapsed();
    let shaped = lift_egress_limit(pid);
    let status = backup.status.clone().unwrap_or_default();
    let size = status.artifact.as_ref().map_or(0, |a| a.size_bytes);
    // The slow member sent at least the snapshot's bytes if the backup streamed from it.
    let from_slow = sent_bytes(&shaped) >= u64::try_from(size).unwrap_or(u64::MAX);
    eprintln!(
        "chaos: {victim} (etcd pid {pid}, database {db_size} bytes) limited to {rate} bit/s \
         during {name} ({converged:.1?}; streamed from the slow member: {from_slow}): {:?} \
         {:?}; {shaped}",
        status.phase, status.message
    );
    let outcome = match check_backup(s3, &backup, &before).await {
        Ok(BackupPhase::Succeeded) if !from_slow => Err(format!(
            "{name} did not stream from the slow member {victim}: {shaped}"
        )),
        Ok(BackupPhase::Succeeded) => Ok(()),
        Ok(phase) => Err(format!(
            "{name} ended {phase:?} with one member slowed: {:?} {:?}",
            status.reason, status.message
        )),
        Err(e) => Err(e),
    };
    (outcome, converged)
}

/// `spec.version` to [`UPGRADE_TO`], and a member still on the old version SIGKILLed once the
/// roll has replaced a first Pod. Timed from the kill to Available on the new version.
async fn upgrade_kill_case(
    env: &Env,
    cluster: &mut Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let uid = cluster_uid(env, cluster.name).await;
    let before = Snapshot::take(env, cluster).await;
    let old_tag = format!(":v{}", cluster.version);
    cluster.version = UPGRADE_TO;
    env.apply(&cluster.yaml()).unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={}", cluster.name);
    let deadline = Instant::now() + STEP;
    let (victim, pid) = loop {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items;
        let image = |p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default()
        };
        let rolled = list.iter().any(|p| !image(p).ends_with(&old_tag));
        let old = list
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && image(p).ends_with(&old_tag))
            .filter_map(|p| p.metadata.name.clone())
            .find_map(|name| member_pid(&name, &uid).map(|pid| (name, pid)));
        match old {
            Some(found) if rolled => break found,
            _ if Instant::now() > deadline => {
                return (
                    Err(format!(
                        "no member left on the old version to kill after the roll began, \
                         within {STEP:?}"
                    )),
                    Duration::ZERO,
                );
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    signal_pid(pid, "KILL");
    eprintln!("chaos: {victim} (etcd pid {pid}, still on {old_tag}) killed during the roll");
    let killed = Instant::now();
    let after = Snapshot::once_available(env, cluster).await;
    (check(&before, &after, cluster, case), killed.elapsed())
}

/// The cluster operator's leader SIGSTOPped with a standby waiting and the cluster grown by one
/// meanwhile; the old leader resumed once the standby holds the Lease. Timed from the stop to
/// Available at the new size.
async fn leader_stop_case(
    env: &Env,
    cluster: &mut Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::jiff::Timestamp;
    // Two replicas (a rollout, not timed); `--wait` returns once both are Ready (a standby is).
    env.helm_upgrade(&["--set", "clusterOperator.replicas=2"]);
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let label = "app.kubernetes.io/component=cluster-operator";
    let holder = || async {
        leases
            .get(CLUSTER_OPERATOR_LEASE)
            .await
            .ok()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .unwrap_or_default()
    };
    let deadline = Instant::now() + STEP;
    let (leader, standby) = loop {
        let names: Vec<String> = pods
            .list(&ListParams::default().labels(label))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        let leader = holder().await;
        if names.len() == 2 && names.contains(&leader) {
            let standby = names.into_iter().find(|n| *n != leader).unwrap();
            break (leader, standby);
        }
        assert!(
            Instant::now() < deadline,
            "no leader among two cluster operator replicas: {names:?}, Lease held by {leader:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let pid = operator_pid_of_pod(env, "etcd-cluster-operator", &leader);
    let before = Snapshot::take(env, cluster).await;
    signal_pid(pid, "STOP");
    let stopped = Instant::now();
    cluster.size += 1;
    env.apply(&cluster.yaml()).unwrap();
    // Resumed as soon as the standby holds the Lease (15 s after the last renewal), so both run
    // at once, and well before the liveness probe (3 x 10 s) would have the kubelet kill it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let new_holder = loop {
        let now = holder().await;
        if now != leader || Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let resumed_at = Timestamp::now();
    signal_pid(pid, "CONT");
    eprintln!(
        "chaos: cluster operator leader {leader} (pid {pid}) stopped for {:.1?}, until the \
         Lease went to {new_holder:?}; resumed",
        stopped.elapsed()
    );
    // Resumed, it must find its leadership lost and exit (the kubelet restarts it as a standby).
    let deadline = Instant::now() + Duration::from_secs(60);
    while process_alive(pid) {
        if Instant::now() > deadline {
            signal_pid(pid, "KILL");
            return (
                Err(format!(
                    "the resumed old leader {leader} (pid {pid}) still ran 60 s after the \
                     Lease went to {new_holder:?}"
                )),
                stopped.elapsed(),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let exited_at = Timestamp::now();
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    let converged = stopped.elapsed();
    let mut problems = Vec::new();
    if new_holder != standby {
        problems.push(format!(
            "the Lease is held by {new_holder:?}, not the standby {standby}, while {leader} was \
             stopped"
        ));
    }
    let writes = audit_writes(env, &leader, resumed_at, exited_at);
    eprintln!(
        "chaos: {leader} exited {:.1?} after its resume; its successful writes meanwhile: {writes:?}",
        exited_at.duration_since(resumed_at)
    );
    if !writes.is_empty() {
        problems.push(format!(
            "the resumed old leader {leader} wrote after losing the Lease: {writes:?}"
        ));
    }
    let after = Snapshot::take(env, cluster).await;
    if let Err(e) = check(&before, &after, cluster, case) {
        problems.push(e);
    }
    env.helm_upgrade(&["--set", "clusterOperator.replicas=1"]);
    if problems.is_empty() {
        (Ok(()), converged)
    } else {
        (Err(problems.join("; ")), converged)
    }
}

/// The cluster operator's Lease (the chart's `--lease-name` for the release `etcd-operator`).
const CLUSTER_OPERATOR_LEASE: &str = "etcd-operator-cluster";

/// Running or stopped, not exited (a zombie counts as exited).
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

/// Successful writes (create, update, patch, delete) the API server's audit log records from
/// the Pod `pod` (the Pod name its bound ServiceAccount token carries) received in
/// `[from, to]`: `verb resource/name code`.
fn audit_writes(
    env: &Env,
    pod: &str,
    from: k8s_openapi::jiff::Timestamp,
    to: k8s_openapi::jiff::Timestamp,
) -> Vec<String> {
    let log = std::fs::read_to_string(env.lk.state_dir().join("logs/audit.log")).unwrap();
    let mut writes = Vec::new();
    for line in log.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if event["stage"] != "ResponseComplete" {
            continue;
        }
        let verb = event["verb"].as_str().unwrap_or_default();
        if !matches!(
            verb,
            "create" | "update" | "patch" | "delete" | "deletecollection"
        ) {
            continue;
        }
        let by_pod = event["user"]["extra"]["authentication.kubernetes.io/pod-name"]
            .as_array()
            .is_some_and(|names| names.iter().any(|n| n == pod));
        let code = event["responseStatus"]["code"].as_i64().unwrap_or_default();
        let received = event["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
        if by_pod && (200..300).contains(&code) && received.is_some_and(|t| from <= t && t <= to) {
            writes.push(format!(
                "{verb} {}/{} {code}",
                event["objectRef"]["resource"].as_str().unwrap_or_default(),
                event["objectRef"]["name"].as_str().unwrap_or_default()
            ));
        }
    }
    writes
}

/// Where the cases' S3 proxies listen and what they pass to: the node's address as Pods see it
/// (the S3 Pod's hostIP), and the S3 Pod itself (`podIP:port`).
async fn s3_pod_addresses(env: &Env) -> (String, String) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let pod = pods.get("s3").await.unwrap();
    let status = pod.status.clone().unwrap();
    let port = pod.spec.as_ref().unwrap().containers[0]
        .ports
        .as_ref()
        .unwrap()[0]
        .container_port;
    let upstream = format!("{}:{port}", status.pod_ip.unwrap());
    (status.host_ip.unwrap(), upstream)
}

/// An on-demand backup through [`answer_losing_proxy`] (silent for `silence` after losing the
/// answer); timed from its creation to its final phase.
async fn ambiguous_complete_case(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    index: usize,
    silence: Duration,
) -> (Result<(), String>, Duration) {
    use std::sync::atomic::Ordering;
    let name = format!("chaos-backup-{index}");
    let before = objects(s3, BACKUP_PREFIX).await;
    let (host_ip, upstream) = s3_pod_addresses(env).await;
    let (endpoint, lost) = answer_losing_proxy(&host_ip, upstream, silence).await;
    let yaml =
        on_demand_backup(&name, CLUSTER, BACKUP_PREFIX, S3_SECRET).replace(S3_ENDPOINT, &endpoint);
    let started = Instant::now();
    env.apply(&yaml).unwrap();
    let backup = wait_backup_finished(env, &name).await;
    let converged = started.elapsed();
    let status = backup.status.clone().unwrap_or_default();
    let answer_lost = lost.load(Ordering::SeqCst);
    eprintln!(
        "chaos: {name} through {endpoint} (completion answer lost: {answer_lost}) ended {:?} \
         {:?}: {:?}",
        status.phase, status.reason, status.message
    );
    if !answer_lost {
        return (
            Err(format!(
                "no CompleteMultipartUpload went through the proxy: {:?}",
                backup.status
            )),
            converged,
        );
    }
    let checked = check_backup(s3, &backup, &before).await;
    // Silent past the read-back: applied, the object is there, so only Succeeded is right.
    if !silence.is_zero() && matches!(checked, Ok(BackupPhase::Failed)) {
        return (
            Err(format!(
                "{name} ended Failed although S3 had applied its completion: {:?}",
                status.message
            )),
            converged,
        );
    }
    (checked.map(|_| ()), converged)
}

/// A TCP proxy on `ip` (a free port) to `upstream` that loses the answer to the first
/// CompleteMultipartUpload (a `POST` with `uploadId=` in its request line): the request reaches
/// S3, which applies it, and the connection is closed before any byte of the answer goes back.
/// For `silence` after that, every new connection is closed at once (S3 unreachable). Returns
/// its endpoint URL and whether an answer was lost yet.
async fn answer_losing_proxy(
    ip: &str,
    upstream: String,
    silence: Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let lost = Arc::new(AtomicBool::new(false));
    let lost_once = lost.clone();
    let lost_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let silent = lost_at
                .lock()
                .unwrap()
                .is_some_and(|at: Instant| at.elapsed() < silence);
            if silent {
                drop(client);
                continue;
            }
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let lost = lost_once.clone();
            let lost_at = lost_at.clone();
            tokio::spawn(async move {
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let armed = Arc::new(AtomicBool::new(false));
                let armed_up = armed.clone();
                let up = tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = client_read.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let complete = String::from_utf8_lossy(&buf[..n])
                            .lines()
                            .any(|l| l.starts_with("POST /") && l.contains("uploadId="));
                        if complete && !lost.swap(true, Ordering::SeqCst) {
                            armed_up.store(true, Ordering::SeqCst);
                            *lost_at.lock().unwrap() = Some(Instant::now());
                        }
                        if server_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = server_read.read(&mut buf).await {
                    // Armed: S3 answered the completion, so it was applied; the answer is lost.
                    if n == 0 || armed.load(Ordering::SeqCst) {
                        break;
                    }
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                up.abort();
            });
        }
    });
    (endpoint, lost)
}

/// The backup operator SIGKILLed while its snapshot stream from a member is open: every member's
/// egress is limited to [`STREAM_RATE`] so the stream lasts seconds, and the kill waits until the
/// operator holds an established connection to an etcd client port. The
/// restarted operator must end the backup Succeeded with its verified object (adopted) or
/// Failed with none, leaving no multipart upload pending. Timed from the kill to the final phase.
async fn kill_backup_operator_case(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    cluster: &Cluster,
    index: usize,
) -> (Result<(), String>, Duration) {
    let name = format!("chaos-backup-{index}");
    let before = objects(s3, BACKUP_PREFIX).await;
    let uid = cluster_uid(env, cluster.name).await;
    let members: Vec<u32> = pod_ips(env, cluster.name)
        .await
        .keys()
        .filter_map(|m| member_pid(m, &uid))
        .collect();
    // At least a mebibyte to stream (four seconds at the limit), whatever the cases before wrote.
    write_keys(
        env,
        CLUSTER,
        (0..4).map(|i| (format!("filler/{i}"), "x".repeat(256 * 1024))),
    )
    .await;
    for pid in &members {
        in_netns(
            *pid,
            "tc",
            &[
                "qdisc",
                "add",
                "dev",
                "eth0",
                "root",
                "tbf",
                "rate",
                STREAM_RATE,
                "burst",
                "16kb",
                "latency",
                "400ms",
            ],
        );
    }
    let operator_pod: Api<Pod> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let operator_ip = operator_pod
        .list(&ListParams::default().labels("app.kubernetes.io/component=backup-operator"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| p.status?.pod_ip)
        .unwrap();
    let operator = operator_pid(env, "etcd-backup-operator");
    env.apply(&on_demand_backup(&name, CLUSTER, BACKUP_PREFIX, S3_SECRET))
        .unwrap();
    // The stream is open: the operator holds an established connection to an etcd client port
    // (through the client Service or to a member's Pod IP; it holds none between backups).
    let deadline = Instant::now() + STEP;
    let streaming = loop {
        let open = in_netns(
            operator,
            "ss",
            &["-Htn", "state", "established", "( dport = :2379 )"],
        );
        if !open.trim().is_empty() {
            eprintln!(
                "chaos: the backup operator's etcd connections: {}",
                open.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    signal_pid(operator, "KILL");
    let killed = Instant::now();
    let phase = Api::<EtcdBackup>::namespaced(env.client.clone(), NS)
        .get(&name)
        .await
        .ok()
        .and_then(|b| b.status)
        .and_then(|s| s.phase);
    eprintln!(
        "chaos: backup operator (pid {operator}, {operator_ip}) killed with its snapshot stream \
         open: {streaming}; {name} was {phase:?}"
    );
    let backup = wait_backup_finished(env, &name).await;
    let converged = killed.elapsed();
    for pid in &members {
        in_netns(*pid, "tc", &["qdisc", "del", "dev", "eth0", "root"]);
    }
    if !streaming {
        return (
            Err(format!(
                "no snapshot stream from a member seen within {STEP:?}"
            )),
            converged,
        );
    }
    let outcome = check_backup(s3, &backup, &before).await.map(|phase| {
        let status = backup.status.clone().unwrap_or_default();
        eprintln!(
            "chaos: {name} ended {phase:?} {:?}: {:?}",
            status.reason, status.message
        );
    });
    (outcome, converged)
}

/// The egress limit on every member while a [`Trigger::KillBackupOperator`] case streams.
const STREAM_RATE: &str = "2mbit";

async fn cluster_uid(env: &Env, name: &str) -> String {
    env.clusters()
        .get(name)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

/// Member Pod name -> Pod IP.
async fn pod_ips(env: &Env, cluster: &str) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={cluster}");
    pods.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.metadata.name?, p.status?.pod_ip?)))
        .collect()
}

/// The leader ID one member reports (0: it has none), asked on its own client port; `None`
/// when it does not answer.
async fn member_leader(ip: &str) -> Option<u64> {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(1))
        .with_timeout(Duration::from_secs(2));
    let url = format!("http://{ip}:2379");
    let mut client = etcd_client::Client::connect([url.as_str()], Some(options))
        .await
        .ok()?;
    client.status().await.ok().map(|s| s.leader())
}

/// Drops every packet between the network namespace of `pid` and `addresses` (an address, or
/// an nftables set `{ a, b }`), both ways, in the table `inet chaos`.
fn cut_off(pid: u32, addresses: &str) {
    nft(
        pid,
        &format!(
            "add table inet chaos; add chain inet chaos out {{ type filter hook output priority 0 ; }}; \
             add rule inet chaos out ip daddr {addresses} drop; \
             add chain inet chaos in {{ type filter hook input priority 0 ; }}; \
             add rule inet chaos in ip saddr {addresses} drop"
        ),
    );
}

/// S3 killed as a backup starts; timed from the kill to the next backup's success.
async fn s3_down_backup_case(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    index: usize,
) -> (Result<(), String>, Duration) {
    let name = format!("chaos-backup-{index}");
    let before = objects(s3, BACKUP_PREFIX).await;
    let restarts = s3_restarts(env).await;
    let pid = signal_s3(env, "KILL").await;
    let killed = Instant::now();
    env.apply(&on_demand_backup(&name, CLUSTER, BACKUP_PREFIX, S3_SECRET))
        .unwrap();
    let backup = wait_backup_finished(env, &name).await;
    let status = backup.status.clone().unwrap_or_default();
    eprintln!(
        "chaos: weed (pid {pid}) killed; {name} ended {:?} {:?}: {:?}",
        status.phase, status.reason, status.message
    );
    // The kubelet restarted weed: wait until it serves again before checking what is stored.
    let deadline = Instant::now() + STEP;
    while s3_restarts(env).await == restarts || s3.list_buckets().send().await.is_err() {
        if Instant::now() > deadline {
            return (Err("S3 did not come back".to_owned()), killed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if let Err(e) = check_backup(s3, &backup, &before).await {
        return (Err(e), killed.elapsed());
    }
    if status.phase == Some(BackupPhase::Failed)
        && status.reason.as_deref() != Some("S3Unavailable")
    {
        return (
            Err(format!(
                "{name} failed with reason {:?}, not S3Unavailable: {:?}",
                status.reason, status.message
            )),
            killed.elapsed(),
        );
    }
    let next = format!("{name}-next");
    let before = objects(s3, BACKUP_PREFIX).await;
    env.apply(&on_demand_backup(&next, CLUSTER, BACKUP_PREFIX, S3_SECRET))
        .unwrap();
    let backup = wait_backup_finished(env, &next).await;
    let outcome = match check_backup(s3, &backup, &before).await {
        Ok(BackupPhase::Succeeded) => Ok(()),
        Ok(phase) => Err(format!(
            "{next} after S3 came back ended {phase:?}: {:?}",
            backup.status
        )),
        Err(e) => Err(e),
    };
    (outcome, killed.elapsed())
}

/// S3 stopped while a restore into a new cluster starts; timed from the resume to Available.
async fn s3_down_restore_case(
    env: &Env,
    index: usize,
    source_revision: i64,
) -> (Result<(), String>, Duration) {
    let name = format!("chaos-restore-{index}");
    let target = format!("chaos-restored-{index}");
    let pvcs_before = pvc_names(env).await;
    let pid = signal_s3(env, "STOP").await;
    env.apply(&restore_yaml(&name, &target)).unwrap();
    tokio::time::sleep(S3_PAUSE).await;
    let phase = Api::<EtcdRestore>::namespaced(env.client.clone(), NS)
        .get(&name)
        .await
        .ok()
        .and_then(|r| r.status);
    eprintln!("chaos: weed (pid {pid}) resumed after {S3_PAUSE:?}; {name} then: {phase:?}");
    signal_pid(pid, "CONT");
    let resumed = Instant::now();
    let outcome = check_restore(env, &name, &target, source_revision, &pvcs_before).await;
    let converged = resumed.elapsed();
    env.kubectl(&["delete", "etcdcluster", &target, "-n", NS, "--wait=false"]);
    (outcome, converged)
}

/// Restarts of the S3 Pod's container so far.
async fn s3_restarts(env: &Env) -> i32 {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    pods.get("s3")
        .await
        .ok()
        .and_then(|p| p.status)
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.first().map(|c| c.restart_count))
        .unwrap_or_default()
}

/// Sends `signal` to this instance's weed (its `-ip=` is the S3 Pod's IP and its `-s3.port=`
/// the Pod's container port); returns its PID.
async fn signal_s3(env: &Env, signal: &str) -> u32 {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let pod = pods.get("s3").await.unwrap();
    let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
    let port = pod.spec.as_ref().unwrap().containers[0]
        .ports
        .as_ref()
        .unwrap()[0]
        .container_port;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().is_some_and(|a| a.ends_with("weed"))
            && args.iter().any(|a| a == &format!("-ip={ip}"))
            && args.iter().any(|a| a == &format!("-s3.port={port}"))
        {
            signal_pid(pid, signal);
            return pid;
        }
    }
    panic!("no weed process with -ip={ip} -s3.port={port}");
}

/// An EtcdRestore of the source backup into a new one-member cluster `target`.
fn restore_yaml(name: &str, target: &str) -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdRestore\nmetadata: {{name: {name}}}\n\
         spec:\n  clusterName: {target}\n  source: {{backupRef: {{name: chaos-source}}}}\n  \
         clusterSpec: {{size: 1, version: \"{VERSION}\"}}\n"
    )
}

/// Sends `signal` to the etcd of `member` of the cluster with UID `uid`; returns its PID.
fn signal_member(member: &str, uid: &str, signal: &str) -> u32 {
    let Some(pid) = member_pid(member, uid) else {
        panic!("no etcd process for member {member} ({uid})");
    };
    signal_pid(pid, signal);
    pid
}

/// The PID of the etcd of `member` of the cluster with UID `uid`, found by its `--name` and the
/// UID in its initial-cluster token (the node agent runs containers as host processes).
fn member_pid(member: &str, uid: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_etcd = args.first().is_some_and(|a| a.ends_with("etcd"));
        let named = args.iter().any(|a| a == &format!("--name={member}"));
        if is_etcd && named && args.iter().any(|a| a.contains(uid)) {
            return Some(pid);
        }
    }
    None
}

fn signal_pid(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// The members etcd lists now, by name (empty when no member answers).
async fn member_names(env: &Env, cluster: &str) -> BTreeSet<String> {
    member_list(env, cluster)
        .await
        .map(|l| l.members().iter().map(|m| m.name().to_owned()).collect())
        .unwrap_or_default()
}

async fn learners(env: &Env, cluster: &str) -> usize {
    member_list(env, cluster)
        .await
        .map(|l| l.members().iter().filter(|m| m.is_learner()).count())
        .unwrap_or(0)
}

async fn member_list(env: &Env, cluster: &str) -> Option<etcd_client::MemberListResponse> {
    let url = env.client_url(cluster).await;
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(3));
    let mut client = etcd_client::Client::connect([url.as_str()], Some(options))
        .await
        .ok()?;
    client.member_list().await.ok()
}

/// An on-demand EtcdBackup with the backup operator armed; timed from the crash to the backup's
/// final phase.
async fn backup_case(armed: &Armed<'_>, s3: &aws_sdk_s3::Client) -> CaseResult {
    let env = armed.env;
    let scenario = armed.scenario();
    let name = format!("chaos-backup-{}", armed.index);
    let before = objects(s3, BACKUP_PREFIX).await;
    let restarted = armed
        .crash_and_restart(STEP, async || {
            env.apply(&on_demand_backup(&name, CLUSTER, BACKUP_PREFIX, S3_SECRET))
                .unwrap();
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let backup = wait_backup_finished(env, &name).await;
    let converged = restarted.elapsed();
    (
        check_backup(s3, &backup, &before).await.map(|phase| {
            eprintln!("chaos: {scenario}: {name} ended {phase:?}");
        }),
        converged,
    )
}

/// Key → (size, ETag) of the objects under `prefix`.
async fn objects(s3: &aws_sdk_s3::Client, prefix: &str) -> BTreeMap<String, (i64, String)> {
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
        .map(|o| {
            (
                o.key().unwrap_or_default().to_owned(),
                (
                    o.size().unwrap_or_default(),
                    o.e_tag().unwrap_or_default().to_owned(),
                ),
            )
        })
        .collect()
}

/// A finished backup after a crash: Succeeded with its verified object, or Failed with no
/// object of its UID; no pending upload; nothing that was there before changed.
async fn check_backup(
    s3: &aws_sdk_s3::Client,
    backup: &EtcdBackup,
    before: &BTreeMap<String, (i64, String)>,
) -> Result<BackupPhase, String> {
    let name = backup.metadata.name.clone().unwrap_or_default();
    let uid = backup.metadata.uid.clone().unwrap_or_default();
    let status = backup.status.clone().unwrap_or_default();
    let after = objects(s3, BACKUP_PREFIX).await;
    for (key, object) in before {
        match after.get(key) {
            Some(now) if now == object => {}
            now => return Err(format!("{key} changed: {object:?} before, {now:?} after")),
        }
    }
    let pending = pending_uploads(s3, BACKUP_PREFIX).await;
    if !pending.is_empty() {
        return Err(format!(
            "{name} ({:?}, {:?}) left multipart uploads pending: {pending:?}",
            status.phase, status.reason
        ));
    }
    let own: Vec<&String> = after
        .keys()
        .filter(|k| !before.contains_key(*k) && k.contains(&uid))
        .collect();
    match (status.phase, &status.artifact) {
        (Some(BackupPhase::Succeeded), Some(artifact)) => {
            let key = object_key(artifact, BACKUP_PREFIX, CLUSTER);
            if own != [&key] {
                return Err(format!(
                    "{name} Succeeded with {key}, but the new objects of its UID are {own:?}"
                ));
            }
            let bytes = get_object(s3, &key).await;
            if bytes.len() as i64 != artifact.size_bytes
                || hex(&Sha256::digest(&bytes)) != artifact.sha256
            {
                return Err(format!(
                    "{key}: {} bytes read back do not match status.artifact {artifact:?}",
                    bytes.len()
                ));
            }
            Ok(BackupPhase::Succeeded)
        }
        (Some(BackupPhase::Failed), None) if own.is_empty() => Ok(BackupPhase::Failed),
        _ => Err(format!(
            "{name} ended {status:?} with new objects of its UID {own:?}"
        )),
    }
}

/// An EtcdRestore into a new one-member cluster with the restore operator armed; timed from the
/// crash to the new cluster Available. The new cluster is deleted afterwards.
async fn restore_case(armed: &Armed<'_>, source_revision: i64) -> CaseResult {
    let env = armed.env;
    let name = format!("chaos-restore-{}", armed.index);
    let target = format!("chaos-restored-{}", armed.index);
    let pvcs_before = pvc_names(env).await;
    let restarted = armed
        .crash_and_restart(STEP, async || {
            env.apply(&restore_yaml(&name, &target)).unwrap();
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let outcome = check_restore(env, &name, &target, source_revision, &pvcs_before).await;
    let converged = restarted.elapsed();
    // Free the machine for the next case (the restored cluster's PVC stays: Retain).
    env.kubectl(&["delete", "etcdcluster", &target, "-n", NS, "--wait=false"]);
    (outcome, converged)
}

/// NOSPACE on [`CLUSTER`] with the cluster operator armed: filled until etcd refuses writes,
/// then the crash. Timed from the crash to the alarm cleared ([`no_space_cleared`]) and the
/// cluster Available.
async fn no_space_case(armed: &Armed<'_>, cluster: &Cluster) -> CaseResult {
    let (env, case) = (armed.env, armed.case);
    let before = Snapshot::take(env, cluster).await;
    let url = env.client_url(cluster.name).await;
    let restarted = armed
        .crash_and_restart(STEP, async || {
            let filled = Instant::now();
            fill_until_no_space(&url).await?;
            eprintln!(
                "chaos: {} filled to NOSPACE in {:.1?}",
                cluster.name,
                filled.elapsed()
            );
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let deadline = Instant::now() + STEP;
    let cleared = loop {
        match no_space_cleared(env, cluster, &url).await {
            Ok(db_size) => break Ok(db_size),
            Err(e) if Instant::now() > deadline => {
                break Err(format!(
                    "NOSPACE not cleared {STEP:?} after the restart: {e}"
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    };
    let db_size = match cleared {
        Ok(db_size) => db_size,
        Err(e) => return (Err(e), restarted.elapsed()),
    };
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    let converged = restarted.elapsed();
    eprintln!("chaos: NOSPACE cleared; the database is {db_size} bytes");
    let after = Snapshot::take(env, cluster).await;
    (check(&before, &after, cluster, case), converged)
}

/// Overwrites one key with 512 KiB values through `url` until etcd refuses with NOSPACE.
async fn fill_until_no_space(url: &str) -> Result<(), String> {
    let value = vec![b'x'; 512 * 1024];
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut client: Option<etcd_client::Client> = None;
    let mut last = String::new();
    while Instant::now() < deadline {
        if client.is_none() {
            client = etcd_client::Client::connect([url], None).await.ok();
        }
        if let Some(c) = client.as_mut() {
            match c.put("chaos/fill", value.clone(), None).await {
                Ok(_) => continue,
                Err(e) if e.to_string().contains("database space exceeded") => return Ok(()),
                Err(e) => {
                    last = e.to_string();
                    client = None;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "no NOSPACE after 120 s of writes (last error: {last:?})"
    ))
}

/// The serving readiness gate of member Pods (etcd-member's `build::SERVING_CONDITION`).
const SERVING: &str = "etcd.operator.rs/serving";

/// NOSPACE recovered, as far as clients go: no alarm raised, a write accepted, every member Pod
/// (the cluster's size of them) with its serving gate open and Ready, and each in the client
/// Service's EndpointSlices as a ready endpoint (a gate left closed by a crash mid-way would
/// keep its member out). Returns the database size the member answering reports.
async fn no_space_cleared(env: &Env, cluster: &Cluster, url: &str) -> Result<i64, String> {
    use etcd_client::{AlarmAction, AlarmType};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let error = |e: etcd_client::Error| e.to_string();
    let mut client = etcd_client::Client::connect([url], None)
        .await
        .map_err(error)?;
    let alarms = client
        .alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .map_err(error)?;
    if !alarms.alarms().is_empty() {
        return Err(format!("{} alarms still raised", alarms.alarms().len()));
    }
    client
        .put("chaos/after-nospace", "ok", None)
        .await
        .map_err(error)?;
    let db_size = client.status().await.map_err(error)?.db_size();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={}", cluster.name);
    let pods: Vec<Pod> = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if pods.len() != cluster.size {
        return Err(format!("{} member Pods, not {}", pods.len(), cluster.size));
    }
    let slices: Api<EndpointSlice> = Api::namespaced(env.client.clone(), NS);
    let slices = slices
        .list(&ListParams::default().labels(&format!(
            "kubernetes.io/service-name={}-client",
            cluster.name
        )))
        .await
        .map_err(|e| e.to_string())?
        .items;
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let gate = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == SERVING))
            .map(|c| c.status.clone());
        if gate.as_deref() != Some("True") || !pod_is_ready(pod) {
            return Err(format!(
                "{name}: serving gate {gate:?}, Ready {}",
                pod_is_ready(pod)
            ));
        }
        let routed = slices.iter().flat_map(|s| &s.endpoints).any(|e| {
            e.target_ref
                .as_ref()
                .is_some_and(|t| t.name.as_deref() == Some(name.as_str()))
                && e.conditions.as_ref().and_then(|c| c.ready) == Some(true)
        });
        if !routed {
            return Err(format!(
                "{name} is not a ready endpoint of the client Service"
            ));
        }
    }
    Ok(db_size)
}

/// Waits until every member Pod of `cluster` runs with the quota [`NO_SPACE_QUOTA`] and is
/// Ready (the roll that sets it; preparation, not timed).
async fn wait_rolled_onto_quota(env: &Env, cluster: &Cluster) {
    let flag = format!("--quota-backend-bytes={NO_SPACE_QUOTA}");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={}", cluster.name);
    let deadline = Instant::now() + 2 * STEP;
    loop {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items;
        let rolled = list
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_is_ready(p))
            .filter(|p| {
                p.spec
                    .as_ref()
                    .is_some_and(|s| s.containers[0].args.iter().flatten().any(|a| *a == flag))
            })
            .count();
        if rolled == cluster.size && list.len() == cluster.size {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {rolled} of {} members rolled onto {flag} after {:?}\n{}",
            cluster.name,
            cluster.size,
            2 * STEP,
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
}

/// A new plaintext cluster of three on [`UPGRADE_TO`] (the TLS switch scenario's version) for a
/// TLS switch case, Available (preparation, not timed). The name is leaked: a few per run.
async fn tls_cluster(env: &Env, index: usize) -> Cluster {
    let cluster = Cluster {
        name: Box::leak(format!("chaos-tls-{index}").into_boxed_str()),
        size: 3,
        delete_pvcs: false,
        version: UPGRADE_TO,
        backup_schedule: false,
        no_space_quota: false,
        network_policy: None,
    };
    env.apply(&cluster.yaml()).unwrap();
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    cluster
}

/// The armed operator's revert set up: waits until a member's peer URL moved to `https://`,
/// then cuts that member, from the operator ([`Trigger::TlsRevert`]) or from every client Pod
/// but its peers ([`Trigger::TlsRevertCompletes`]).
async fn cut_first_switched_member(env: &Env, target: &Cluster, case: &Case) -> Result<(), String> {
    let (victim, _) = first_switched_member(env, target).await?;
    if case.trigger == Trigger::TlsRevertCompletes {
        let uid = cluster_uid(env, target.name).await;
        let Some(pid) = member_pid(&victim, &uid) else {
            return Err(format!("no etcd process of {victim} to cut"));
        };
        // Its client ports closed to every Pod but its peers: the operator (this process and
        // the next, whatever its Pod IP) finds it silent; the node (the kubelet's probes,
        // the Service proxy) and its peers still reach it.
        let ips = pod_ips(env, target.name).await;
        let mut allowed: Vec<String> = ips
            .iter()
            .filter(|(name, _)| **name != victim)
            .map(|(_, ip)| ip.clone())
            .collect();
        let route = in_netns(pid, "ip", &["route", "show", "default"]);
        let gateway = route
            .split_whitespace()
            .skip_while(|word| *word != "via")
            .nth(1)
            .unwrap_or_else(|| panic!("no default route in {victim}'s namespace: {route}"));
        allowed.push(gateway.to_owned());
        let allowed = allowed.join(", ");
        nft(
            pid,
            &format!(
                "add table inet chaos; add chain inet chaos in {{ type filter hook input priority 0 ; }}; \
                 add rule inet chaos in tcp dport {{ 2379, {SWITCH_CLIENT_TLS_PORT} }} ip saddr != {{ {allowed} }} drop"
            ),
        );
        eprintln!(
            "chaos: {victim} (etcd pid {pid}), whose peer URL moved to https://, closed to \
             clients but {allowed}"
        );
    } else {
        let ip = pod_ips(env, target.name).await[&victim].clone();
        let pid = operator_pid(env, "etcd-cluster-operator");
        cut_off(pid, &ip);
        eprintln!(
            "chaos: the cluster operator (pid {pid}) cut from {victim} ({ip}), whose peer URL \
             moved to https://"
        );
    }
    Ok(())
}

/// The first member of `target` whose peer URL moved to `https://` (waited for, 2 [`STEP`]s
/// at most), and every member's peer URLs at that point.
async fn first_switched_member(
    env: &Env,
    target: &Cluster,
) -> Result<(String, BTreeMap<String, Vec<String>>), String> {
    let deadline = Instant::now() + 2 * STEP;
    loop {
        if let Some(list) = member_list(env, target.name).await {
            let urls: BTreeMap<String, Vec<String>> = list
                .members()
                .iter()
                .map(|m| (m.name().to_owned(), m.peer_urls().to_vec()))
                .collect();
            let moved = urls
                .iter()
                .find(|(_, urls)| urls.iter().any(|u| u.starts_with("https://")));
            if let Some((name, _)) = moved {
                return Ok((name.clone(), urls));
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no peer URL moved to https:// within {:?}",
                2 * STEP
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// [`Trigger::MemberLostMidSwitch`]: timed from the deletion to every member switched
/// ([`switched_to_tls`]) and Available.
async fn member_lost_mid_switch_case(
    env: &Env,
    target: &Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let before = Snapshot::take(env, target).await;
    set_tls(env, target);
    let (moved, urls) = match first_switched_member(env, target).await {
        Ok(found) => found,
        Err(not_reached) => return (Err(not_reached), Duration::ZERO),
    };
    // A member still on http://: after it is gone a voter on http:// remains, so the
    // replacement must join on http://…:2380 (its Pod listens on both) and be moved later.
    let Some(victim) = urls
        .iter()
        .find(|(name, urls)| **name != moved && urls.iter().all(|u| u.starts_with("http://")))
        .map(|(name, _)| name.clone())
    else {
        return (
            Err(format!(
                "no member left on http:// after {moved} moved: {urls:?}"
            )),
            Duration::ZERO,
        );
    };
    // The PVC first (kept by its protection finalizer until the Pod is gone), then the Pod.
    for kind in ["pvc", "pod"] {
        env.kubectl(&["delete", kind, &victim, "-n", NS, "--wait=false"]);
    }
    let lost = Instant::now();
    eprintln!("chaos: {victim}'s PVC and Pod deleted after {moved}'s peer URL moved to https://");
    let gone = wait_switched_to_tls(env, target, 2 * STEP, async || {
        member_names(env, target.name)
            .await
            .contains(&victim)
            .then(|| format!("{victim} is still a member"))
    })
    .await;
    if let Err(pending) = gone {
        return (
            Err(format!("after {victim} was lost: {pending}")),
            lost.elapsed(),
        );
    }
    env.wait_available(target.name, target.size, target.version, STEP)
        .await;
    let converged = lost.elapsed();
    let after = Snapshot::take(env, target).await;
    // The victim's member and PVC went by the test's hand.
    let mut expected = before;
    expected.members.remove(&victim);
    expected.pvcs.remove(&victim);
    let outcome = cluster_writes::member_certificates_valid(env, target.name)
        .await
        .and_then(|()| check(&expected, &after, target, case));
    (outcome, converged)
}

/// `spec.tls` set on `target` with the cluster operator armed (for [`Trigger::TlsRevert`], the
/// armed operator cut from the first member on an `https://` peer URL until it crashes). Timed
/// from the crash to every member switched ([`switched_to_tls`]) and Available.
async fn tls_switch_case(armed: &Armed<'_>, target: &Cluster) -> CaseResult {
    let (env, case) = (armed.env, armed.case);
    let before = Snapshot::take(env, target).await;
    let reverts = matches!(
        case.trigger,
        Trigger::TlsRevert | Trigger::TlsRevertCompletes
    );
    // Two rolls per member and a MemberUpdate each: longer than one STEP on a busy machine.
    // The revert comes REVERT_AFTER after the operator first finds it silent.
    let patience = if reverts {
        STEP + REVERT_AFTER
    } else {
        2 * STEP
    };
    // The new operator Pod has a network namespace of its own: the cut goes with the old one.
    let restarted = armed
        .crash_and_restart(patience, async || {
            set_tls(env, target);
            if reverts {
                cut_first_switched_member(env, target, case).await?;
            }
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    // The restarted operator waits REVERT_AFTER again before it completes a revert.
    let mut retried = BTreeSet::new();
    let switched = wait_switched_to_tls(env, target, 2 * STEP + REVERT_AFTER, async || {
        // A member moved back to http:// waits until its Pod is re-created (the operator's
        // Reverted wait: "delete its Pod to try again"), which an administrator would do.
        for (pod, uid) in reverted_on_http(env, target).await {
            if retried.insert(uid) {
                eprintln!("chaos: {pod} was reverted to an http:// peer URL; deleting its Pod");
                pods.delete(&pod, &Default::default()).await.unwrap();
            }
        }
        None
    })
    .await;
    if let Err(pending) = switched {
        return (
            Err(format!("after the restart: {pending}")),
            restarted.elapsed(),
        );
    }
    env.wait_available(target.name, target.size, target.version, STEP)
        .await;
    let converged = restarted.elapsed();
    eprintln!(
        "chaos: {} switched to TLS; Pods deleted after a revert: {}",
        target.name,
        retried.len()
    );
    let after = Snapshot::take(env, target).await;
    if case.trigger == Trigger::TlsRevertCompletes && retried.is_empty() {
        return (
            Err(
                "the revert did not complete: no member was seen marked and back on http://".into(),
            ),
            converged,
        );
    }
    let outcome = cluster_writes::member_certificates_valid(env, target.name)
        .await
        .and_then(|()| check(&before, &after, target, case));
    (outcome, converged)
}

/// `spec.tls` set on `target`, peer and client, operator-managed: the switch to TLS starts.
fn set_tls(env: &Env, target: &Cluster) {
    env.kubectl(&[
        "patch",
        "etcdcluster",
        target.name,
        "-n",
        NS,
        "--type=merge",
        "-p",
        r#"{"spec":{"tls":{"peer":{},"client":{}}}}"#,
    ]);
}

/// Polls every 0.5 s until `target` is switched to TLS ([`switched_to_tls`]) and `also` (which
/// may act, e.g. delete reverted Pods) reports nothing pending; once `within` has passed, what is
/// still pending and the cluster's status.
async fn wait_switched_to_tls(
    env: &Env,
    target: &Cluster,
    within: Duration,
    mut also: impl AsyncFnMut() -> Option<String>,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        let extra = also().await;
        let pending = match (switched_to_tls(env, target).await, extra) {
            (Ok(()), None) => return Ok(()),
            (Ok(()), Some(extra)) => extra,
            (Err(pending), _) => pending,
        };
        if Instant::now() > deadline {
            let status = env
                .clusters()
                .get(target.name)
                .await
                .ok()
                .and_then(|c| c.status);
            return Err(format!(
                "{} not switched to TLS within {within:?}: {pending}; status {status:?}",
                target.name
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The switch is through: every member Pod Ready, listening for peers on `https://` only and
/// for clients on both schemes (plaintext clients are kept), and every peer URL in etcd's
/// member list `https://`. Else what is pending.
async fn switched_to_tls(env: &Env, target: &Cluster) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={}", target.name);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| e.to_string())?
        .items;
    let mut pending = Vec::new();
    let mut switched = 0;
    for pod in &list {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let (peer, client) = listen_schemes(pod);
        if pod.metadata.deletion_timestamp.is_some() || !pod_is_ready(pod) {
            pending.push(format!("{name}: not Ready"));
        } else if peer != ["https"] || client != ["http", "https"] {
            pending.push(format!("{name}: peers {peer:?}, clients {client:?}"));
        } else {
            switched += 1;
        }
    }
    if switched != target.size {
        pending.push(format!("{switched} of {} Pods switched", target.size));
    }
    let Some(members) = member_list(env, target.name).await else {
        return Err(format!("no member list; {pending:?}"));
    };
    for m in members.members() {
        if !m.peer_urls().iter().all(|u| u.starts_with("https://")) {
            pending.push(format!("{}: peer URLs {:?}", m.name(), m.peer_urls()));
        }
    }
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!("{pending:?}"))
    }
}

/// Member Pods (name, UID) marked reverted whose member's peer URL is `http://` again.
async fn reverted_on_http(env: &Env, target: &Cluster) -> Vec<(String, String)> {
    let Some(members) = member_list(env, target.name).await else {
        return Vec::new();
    };
    let on_http: BTreeSet<&str> = members
        .members()
        .iter()
        .filter(|m| m.peer_urls().iter().any(|u| u.starts_with("http://")))
        .map(|m| m.name())
        .collect();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={}", target.name);
    pods.list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("etcd.operator.rs/tls-switch-reverted"))
                .is_some_and(|v| v == "true")
        })
        .filter_map(|p| Some((p.metadata.name?, p.metadata.uid?)))
        .filter(|(name, _)| on_http.contains(name.as_str()))
        .collect()
}

async fn pvc_names(env: &Env) -> BTreeSet<String> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    pvcs.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect()
}

async fn check_restore(
    env: &Env,
    name: &str,
    target: &str,
    source_revision: i64,
    pvcs_before: &BTreeSet<String>,
) -> Result<(), String> {
    check_restore_at_size(env, name, target, 1, source_revision, pvcs_before).await
}

/// [`check_restore`] of a cluster of `size` members.
async fn check_restore_at_size(
    env: &Env,
    name: &str,
    target: &str,
    size: usize,
    source_revision: i64,
    pvcs_before: &BTreeSet<String>,
) -> Result<(), String> {
    let restores: Api<EtcdRestore> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + STEP;
    let status = loop {
        let status = restores.get(name).await.ok().and_then(|r| r.status);
        if let Some(status) = status
            && status.phase.is_some_and(RestorePhase::is_finished)
        {
            break status;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{name} did not finish within {STEP:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if status.phase != Some(RestorePhase::Succeeded) {
        return Err(format!("{name} did not succeed: {status:?}"));
    }
    if status.restored_revision != Some(source_revision) {
        return Err(format!(
            "{name} restored revision {:?}, the source backup is at {source_revision}",
            status.restored_revision
        ));
    }
    env.wait_available(target, size, VERSION, STEP).await;
    let url = env.client_url(target).await;
    // Retried: right after Available the Service may still route to a connection being closed
    // (seen once: "operation was canceled ... connection closed").
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let got = loop {
        let read = async {
            let mut client = etcd_client::Client::connect([url.as_str()], None).await?;
            client.get(MARKER.0, None).await
        };
        match read.await {
            Ok(got) => break got,
            Err(e) if tokio::time::Instant::now() > deadline => {
                return Err(format!(
                    "reading {} from {target} through {url}: {e}\n{}",
                    MARKER.0,
                    env.try_kubectl(&[
                        "get",
                        "pods,endpointslices",
                        "-n",
                        NS,
                        "-l",
                        &format!("etcd.operator.rs/cluster={target}"),
                        "-o",
                        "yaml",
                    ])
                    .unwrap_or_else(|e| e)
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    let value = got
        .kvs()
        .first()
        .map(|kv| kv.value_str().unwrap().to_owned());
    let revision = got.header().map_or(0, |h| h.revision());
    if value.as_deref() != Some(MARKER.1) || revision < source_revision {
        return Err(format!(
            "{target} serves {}={value:?} at revision {revision}, restored from revision {source_revision}",
            MARKER.0
        ));
    }
    let pvcs_after = pvc_names(env).await;
    if let Some(gone) = pvcs_before.difference(&pvcs_after).next() {
        return Err(format!("PVC {gone} was deleted during {name}"));
    }
    if !pvcs_after
        .iter()
        .any(|p| p.starts_with(&format!("{target}-")))
    {
        return Err(format!("{target} has no member PVC: {pvcs_after:?}"));
    }
    Ok(())
}

struct Cluster {
    name: &'static str,
    size: usize,
    delete_pvcs: bool,
    /// [`VERSION`], until a [`Trigger::KillDuringUpgrade`] case.
    version: &'static str,
    /// `spec.backup` set ([`BACKUP_SCHEDULE`]): between a backup-schedule case that sets it and
    /// one that removes it.
    backup_schedule: bool,
    /// `etcdOptions.quotaBackendBytes` [`NO_SPACE_QUOTA`] and `maintenance.compactOnNoSpace`:
    /// from the first [`Trigger::NoSpace`] case on.
    no_space_quota: bool,
    /// `spec.networkPolicy.enabled`, unset by default ([`Trigger::SetNetworkPolicy`] and
    /// [`Trigger::RemoveNetworkPolicy`]).
    network_policy: Option<bool>,
}

impl Cluster {
    fn yaml(&self) -> String {
        let policy = if self.delete_pvcs { "Delete" } else { "Retain" };
        let backup = if self.backup_schedule {
            format!(
                "  backup:\n    schedule: \"{BACKUP_SCHEDULE}\"\n    s3: {{bucket: {BUCKET}, prefix: chaos-scheduled/, endpoint: \"{S3_ENDPOINT}\", forcePathStyle: true, credentialsSecretRef: {{name: {S3_SECRET}}}}}\n"
            )
        } else {
            String::new()
        };
        let quota = if self.no_space_quota {
            format!(
                "  etcdOptions: {{quotaBackendBytes: {NO_SPACE_QUOTA}}}\n  maintenance: {{compactOnNoSpace: true}}\n"
            )
        } else {
            String::new()
        };
        let network_policy = self
            .network_policy
            .map(|enabled| format!("  networkPolicy: {{enabled: {enabled}}}\n"))
            .unwrap_or_default();
        format!(
            "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdCluster\nmetadata: {{name: {}}}\nspec:\n  size: {}\n  version: \"{}\"\n  storage: {{size: 1Gi, reclaimPolicy: {policy}}}\n{backup}{quota}{network_policy}",
            self.name, self.size, self.version
        )
    }
}

/// Arms (`Some`) or disarms the failpoint on the operator's Deployment and waits for the
/// rollout: the new Pod is Ready (a standby is Ready) and the old one gone, so from here only
/// the new process acts. `rollout status` alone does not wait for the old Pod's exit (a
/// terminating Pod no longer counts as a replica), and the old process keeps its Lease until it
/// exits: a backup created meanwhile went to it, which shut down during it ("Interrupted"), and
/// the armed process never saw it (the full run's `backup.s3_upload_part:after`).
fn set_failpoint(env: &Env, deployment: &str, operator: &str, value: Option<&str>) {
    let var = match value {
        Some(v) => format!("ETCD_OPERATOR_FAILPOINT={v}"),
        None => "ETCD_OPERATOR_FAILPOINT-".to_owned(),
    };
    env.kubectl(&["set", "env", "-n", OPERATOR_NAMESPACE, deployment, &var]);
    env.kubectl(&[
        "rollout",
        "status",
        "-n",
        OPERATOR_NAMESPACE,
        deployment,
        "--timeout=240s",
    ]);
    let deadline = Instant::now() + STEP;
    loop {
        let pods: serde_json::Value = serde_json::from_str(&env.kubectl(&[
            "get",
            "pods",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            operator,
            "-o",
            "json",
        ]))
        .unwrap();
        let items = pods["items"].as_array().cloned().unwrap_or_default();
        // Every Pod left runs the new setting, and none is terminating.
        let settled = items.iter().all(|pod| {
            let armed = pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
                .find(|e| e["name"] == "ETCD_OPERATOR_FAILPOINT")
                .and_then(|e| e["value"].as_str().map(str::to_owned));
            pod["metadata"]["deletionTimestamp"].is_null() && armed.as_deref() == value
        });
        if settled && !items.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{deployment}: an old operator Pod still present {STEP:?} after the rollout to {var}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until a container of the operator with the component label `operator` exited with the
/// failpoint's code, at most `timeout`.
async fn wait_crash_within(env: &Env, operator: &str, timeout: Duration) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = pods.list(&ListParams::default().labels(operator)).await;
        let live = list.iter().flat_map(|l| &l.items);
        let crashed = live
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .any(|pod| {
                let statuses = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref());
                statuses.into_iter().flatten().any(|c| {
                    let exited = |s: Option<&k8s_openapi::api::core::v1::ContainerState>| {
                        s.and_then(|s| s.terminated.as_ref())
                            .is_some_and(|t| t.exit_code == failpoint_exit_code())
                    };
                    exited(c.last_state.as_ref()) || exited(c.state.as_ref())
                })
            });
        if crashed {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the operator did not reach the failpoint within {timeout:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// crates/failpoint's EXIT_CODE (the scenarios do not link the operators' crates).
fn failpoint_exit_code() -> i32 {
    86
}

/// What a case's row holds: its outcome, and how long it took to converge.
type CaseResult = (Result<(), String>, Duration);

/// A failpoint case as the runner hands it to its trigger: the operator to arm and where the
/// case's objects are named. Built once per case by [`operator_crashed_at_failpoints_converges_after_restart`].
struct Armed<'a> {
    env: &'a Env,
    /// `deployment.apps/<name>` of the operator (unused by the Job's cases, which arm the Job).
    deployment: &'a str,
    /// Its component label selector.
    operator: &'a str,
    case: &'a Case,
    /// The case's index in the table: names its objects.
    index: usize,
}

impl Armed<'_> {
    /// `<failpoint>:<side>`, the value of `ETCD_OPERATOR_FAILPOINT`.
    fn scenario(&self) -> String {
        format!("{}:{}", self.case.failpoint, self.case.when)
    }

    /// Arms the operator's Deployment (`true`) or disarms it ([`set_failpoint`]).
    fn set(&self, armed: bool) {
        let scenario = self.scenario();
        set_failpoint(
            self.env,
            self.deployment,
            self.operator,
            armed.then_some(scenario.as_str()),
        );
    }

    /// The sequence every failpoint case runs: armed, the case's change (`act`), the crash (at
    /// most `patience`), the restart without the failpoint. Returns when the restart began,
    /// or the case's row when the failpoint was not reached: `act`'s error (disarmed at once,
    /// not timed), or no crash within `patience` (timed to the restart).
    async fn crash_and_restart(
        &self,
        patience: Duration,
        act: impl AsyncFnOnce() -> Result<(), String>,
    ) -> Result<Instant, CaseResult> {
        self.crash_and_restart_then(patience, act, || {}).await
    }

    /// [`Armed::crash_and_restart`], with `at_crash` run right after the crash, before the
    /// operator is restarted (a fault the armed run needed lifted first).
    async fn crash_and_restart_then(
        &self,
        patience: Duration,
        act: impl AsyncFnOnce() -> Result<(), String>,
        at_crash: impl FnOnce(),
    ) -> Result<Instant, CaseResult> {
        self.set(true);
        if let Err(e) = act().await {
            self.set(false);
            return Err((Err(e), Duration::ZERO));
        }
        let crashed = wait_crash_within(self.env, self.operator, patience).await;
        let restarted = Instant::now();
        at_crash();
        self.set(false);
        match crashed {
            Ok(()) => Ok(restarted),
            Err(e) => Err((Err(e), restarted.elapsed())),
        }
    }
}

/// What a case compares before and after.
struct Snapshot {
    /// etcd member name -> ID (hex), from etcd itself.
    members: BTreeMap<String, u64>,
    learners: usize,
    unstarted: usize,
    /// Member Pods (by the cluster label).
    pods: BTreeSet<String>,
    pvcs: BTreeSet<String>,
    /// `reclaimPolicy: Delete` in the spec when it was taken.
    delete_pvcs: bool,
}

impl Snapshot {
    /// [`Snapshot::take`] once `cluster` is Available at its size and version ([`STEP`] at most).
    async fn once_available(env: &Env, cluster: &Cluster) -> Snapshot {
        env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
            .await;
        Snapshot::take(env, cluster).await
    }

    async fn take(env: &Env, cluster: &Cluster) -> Snapshot {
        let url = env.client_url(cluster.name).await;
        Snapshot::take_at(env, cluster, &url, None).await
    }

    /// [`Snapshot::take`], etcd asked at `url` (with `tls` for a TLS client port).
    async fn take_at(
        env: &Env,
        cluster: &Cluster,
        url: &str,
        tls: Option<etcd_client::TlsOptions>,
    ) -> Snapshot {
        let name = cluster.name;
        let options = tls.map(|tls| etcd_client::ConnectOptions::new().with_tls(tls));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let list = loop {
            let attempt = async {
                let mut client = etcd_client::Client::connect([url], options.clone()).await?;
                client.member_list().await
            };
            match attempt.await {
                Ok(list) => break list,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    eprintln!("member list failed, retrying: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => panic!("member list: {e}\n{}", env.diagnostics()),
            }
        };
        let members = list
            .members()
            .iter()
            .filter(|m| !m.name().is_empty())
            .map(|m| (m.name().to_owned(), m.id()))
            .collect();
        let selector = format!("etcd.operator.rs/cluster={name}");
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
        let pods = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
        let pvcs = pvcs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        Snapshot {
            members,
            learners: list.members().iter().filter(|m| m.is_learner()).count(),
            unstarted: list
                .members()
                .iter()
                .filter(|m| m.name().is_empty())
                .count(),
            pods,
            pvcs,
            delete_pvcs: cluster.delete_pvcs,
        }
    }
}

fn check(
    before: &Snapshot,
    after: &Snapshot,
    cluster: &Cluster,
    case: &Case,
) -> Result<(), String> {
    let names: BTreeSet<String> = after.members.keys().cloned().collect();
    if after.learners != 0 || after.unstarted != 0 {
        return Err(format!(
            "{} learners and {} unstarted members left: {:?}",
            after.learners, after.unstarted, after.members
        ));
    }
    if names.len() != cluster.size || names != after.pods {
        return Err(format!(
            "etcd members {names:?} are not the {} member Pods {:?}",
            cluster.size, after.pods
        ));
    }
    for (name, id) in &after.members {
        if let Some(old) = before.members.get(name)
            && old != id
        {
            return Err(format!(
                "member {name} changed its etcd ID from {old:x} to {id:x}"
            ));
        }
        if !after.pvcs.contains(name) {
            return Err(format!("member {name} has no PVC"));
        }
    }
    // Under Retain no PVC goes; under Delete only a removed member's may. A case that flips the
    // policy may see either: the operator may still act on the policy it read before the flip
    // (the previous case's clean-up of removed members' PVCs, seen in the first full run).
    let gone: Vec<&String> = before.pvcs.difference(&after.pvcs).collect();
    let delete_policy = cluster.delete_pvcs || before.delete_pvcs;
    let may_go = |pvc: &String| delete_policy && !after.members.contains_key(pvc);
    if let Some(pvc) = gone.iter().find(|p| !may_go(p)) {
        return Err(format!(
            "PVC {pvc} was deleted ({} with reclaimPolicy {})",
            case.failpoint,
            if delete_policy { "Delete" } else { "Retain" }
        ));
    }
    Ok(())
}

/// The full table and [`NOT_IN_TABLE`] together name every failpoint of the operators, each
/// once: a side effect added without a chaos case is listed here with its reason, or this fails.
#[test]
fn every_failpoint_has_a_case_or_a_stated_reason() {
    use std::collections::BTreeSet;
    let in_table: BTreeSet<&str> = full()
        .iter()
        .map(|c| c.failpoint)
        .filter(|f| failpoint::ALL.contains(f))
        .collect();
    let not_in_table: BTreeSet<&str> = NOT_IN_TABLE.iter().map(|(f, _)| *f).collect();
    let neither: Vec<&str> = failpoint::ALL
        .iter()
        .copied()
        .filter(|f| !in_table.contains(f) && !not_in_table.contains(f))
        .collect();
    assert!(
        neither.is_empty(),
        "failpoints with no chaos case and no reason in NOT_IN_TABLE: {neither:?}"
    );
    let both: Vec<&&str> = in_table.intersection(&not_in_table).collect();
    assert!(
        both.is_empty(),
        "in the table and in NOT_IN_TABLE: {both:?}"
    );
    let unknown: Vec<&&str> = not_in_table
        .iter()
        .filter(|f| !failpoint::ALL.contains(f))
        .collect();
    assert!(
        unknown.is_empty(),
        "NOT_IN_TABLE names no failpoint: {unknown:?}"
    );
}

/// `CHAOS_ONLY` picks cases by [`Case::scenario`]: no two cases of the full table share one
/// (a failpoint reached by two triggers names its cases apart).
#[test]
fn every_case_has_a_name_of_its_own() {
    let mut seen = BTreeSet::new();
    let shared: Vec<String> = full()
        .iter()
        .map(Case::scenario)
        .filter(|name| !seen.insert(name.clone()))
        .collect();
    assert!(shared.is_empty(), "cases sharing a name: {shared:?}");
}

// === Issue 18's last failpoints ===
//
// A restore over an existing cluster (`restore.hold`, `restore.pvc_retain`,
// `restore.old_pod_delete`), the removal of a seed that failed (`restore.seed_pod_delete`,
// `restore.seed_pvc_delete`), the backup's aborts (`backup.s3_abort`,
// `backup.s3_abort_interrupted`) and the CronJob's Job (`backup.backup_create`,
// `backup.retention_s3_delete`, `backup.retention_backup_delete`). Kept together, apart from
// the cases above, so that other additions to this file merge without touching them.

/// The cases of this group, both sides of each failpoint. The failed-seed cases come first:
/// they leave [`LOST`] without quorum, as the restores over it need it.
fn last_failpoint_cases() -> Vec<Case> {
    use Trigger::*;
    both_sides(&[
        ("restore.seed_pod_delete", RestoreSeedFails),
        ("restore.seed_pvc_delete", RestoreSeedFails),
        ("restore.hold", RestoreOverLost),
        ("restore.pvc_retain", RestoreOverLost),
        ("restore.old_pod_delete", RestoreOverLost),
        ("backup.s3_abort", BackupTimesOut),
        ("backup.s3_abort_interrupted", BackupInterrupted),
        ("backup.s3_abort_on_drop", BackupPartStuck),
        ("backup.backup_create", ScheduledRun),
        ("backup.retention_s3_delete", ScheduledRun),
        ("backup.retention_backup_delete", ScheduledRun),
    ])
}

async fn last_failpoint_case(
    armed: &Armed<'_>,
    s3: &aws_sdk_s3::Client,
    cluster: &Cluster,
    source_revision: Option<i64>,
) -> CaseResult {
    let env = armed.env;
    let restores = matches!(
        armed.case.trigger,
        Trigger::RestoreOverLost | Trigger::RestoreSeedFails
    );
    if !restores && env.clusters().get_opt(LOST).await.unwrap().is_some() {
        // Frees the machine once the restore cases are done (its PVCs stay: Retain).
        env.kubectl(&["delete", "etcdcluster", LOST, "-n", NS, "--wait=false"]);
    }
    match armed.case.trigger {
        Trigger::RestoreOverLost => restore_over_lost_case(armed, source_revision.unwrap()).await,
        Trigger::RestoreSeedFails => failed_seed_case(armed, s3).await,
        Trigger::BackupTimesOut | Trigger::BackupInterrupted => {
            backup_abort_case(armed, s3, cluster).await
        }
        Trigger::BackupPartStuck => stuck_part_case(armed, s3).await,
        Trigger::ScheduledRun => scheduled_run_case(armed, s3).await,
        other => unreachable!("{other:?} is not in this group"),
    }
}

// --- A restore over an existing cluster, a failed seed ---

/// The existing cluster the restore cases rebuild: two members, so that one member lost with
/// its volume is quorum lost ([`lose_quorum`]), as in the restore scenario.
const LOST: &str = "chaos-lost";
const LOST_SIZE: usize = 2;
/// The hand-over contract (etcd-api's restore.rs): the old members' PVCs a restore keeps are
/// labelled with its name, and the EtcdCluster it holds is annotated.
const RETAINED_LABEL: &str = "etcd.operator.rs/retained-by-restore";
const RESTORING_ANNOTATION: &str = "etcd.operator.rs/restoring";
/// Where the failed-seed cases' tampered copy of the source backup's object goes (outside
/// [`BACKUP_PREFIX`], whose objects the backup cases compare).
const TAMPERED_KEY: &str = "chaos-tampered/source.db";

/// The member Pods and PVCs of a cluster (by its label), none being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Members {
    /// Pod name -> UID.
    pods: BTreeMap<String, String>,
    /// PVC name -> (UID, its retained-by-restore label).
    pvcs: BTreeMap<String, (String, Option<String>)>,
}

async fn members_of(env: &Env, cluster: &str) -> Members {
    let selector = format!("etcd.operator.rs/cluster={cluster}");
    let params = ListParams::default().labels(&selector);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let live = |meta: &kube::api::ObjectMeta| meta.deletion_timestamp.is_none();
    Members {
        pods: pods
            .list(&params)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| live(&p.metadata))
            .map(|p| (p.metadata.name.unwrap(), p.metadata.uid.unwrap()))
            .collect(),
        pvcs: pvcs
            .list(&params)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| live(&p.metadata))
            .map(|p| {
                let label = p
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(RETAINED_LABEL).cloned());
                (p.metadata.name.unwrap(), (p.metadata.uid.unwrap(), label))
            })
            .collect(),
    }
}

/// The ordinal of a member name (`<cluster>-<n>`).
fn ordinal(member: &str) -> u32 {
    member
        .rsplit('-')
        .next()
        .and_then(|o| o.parse().ok())
        .unwrap_or(0)
}

/// Unarmed and not timed: [`LOST`] exists and has lost quorum, reported by the cluster
/// operator. Created first if absent; if it serves (restored by the case before), its newest
/// member's Pod and PVC are deleted, which leaves one of two members: no quorum.
async fn lose_quorum(env: &Env) {
    if env.clusters().get_opt(LOST).await.unwrap().is_none() {
        let cluster = Cluster {
            name: LOST,
            size: LOST_SIZE,
            delete_pvcs: false,
            version: VERSION,
            backup_schedule: false,
            no_space_quota: false,
            network_policy: None,
        };
        env.apply(&cluster.yaml()).unwrap();
        env.wait_available(LOST, LOST_SIZE, VERSION, STEP).await;
    }
    if quorum_loss_reported(&env.clusters().get(LOST).await.unwrap()) {
        return;
    }
    env.wait_available(LOST, LOST_SIZE, VERSION, STEP).await;
    let members = members_of(env, LOST).await;
    let victim = members
        .pods
        .keys()
        .max_by_key(|name| ordinal(name))
        .unwrap()
        .clone();
    env.kubectl(&[
        "delete",
        "-n",
        NS,
        &format!("pvc/{victim}"),
        &format!("pod/{victim}"),
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    env.wait_status(LOST, "quorum loss reported", STEP, quorum_loss_reported)
        .await;
    wait_pvcs_gone(env, &[victim.as_str()]).await;
    eprintln!("chaos: {LOST} lost quorum ({victim}'s Pod and PVC deleted)");
}

/// An EtcdRestore of [`LOST`] (no `clusterSpec`: the cluster exists) from `source` (the
/// `spec.source` lines).
fn restore_over_lost_yaml(name: &str, source: &str) -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdRestore\nmetadata: {{name: {name}}}\n\
         spec:\n  clusterName: {LOST}\n  source:\n{source}"
    )
}

/// A restore of the source backup over [`LOST`] with the restore operator armed; timed from
/// the crash to the restore Succeeded, [`LOST`] Available at full size serving the restored
/// revision, and the old members retired ([`old_members_retired`]).
async fn restore_over_lost_case(armed: &Armed<'_>, source_revision: i64) -> CaseResult {
    let env = armed.env;
    lose_quorum(env).await;
    let name = format!("chaos-restore-{}", armed.index);
    let old = members_of(env, LOST).await;
    let pvcs_before = pvc_names(env).await;
    let restarted = armed
        .crash_and_restart(STEP, async || {
            env.apply(&restore_over_lost_yaml(
                &name,
                "    backupRef: {name: chaos-source}\n",
            ))
            .unwrap();
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let restored =
        check_restore_at_size(env, &name, LOST, LOST_SIZE, source_revision, &pvcs_before).await;
    let outcome = match restored {
        Ok(()) => old_members_retired(env, &name, &old).await,
        Err(e) => Err(e),
    };
    (outcome, restarted.elapsed())
}

/// After the restore `restore` over [`LOST`]: every old member PVC is still there (the same
/// object), labelled retained (by this restore, or by the earlier one that already had) and
/// owned by nobody (the garbage collector never takes it); no old member Pod is left.
async fn old_members_retired(env: &Env, restore: &str, old: &Members) -> Result<(), String> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    for (name, (uid, label)) in &old.pvcs {
        let Some(pvc) = pvcs.get_opt(name).await.map_err(|e| e.to_string())? else {
            return Err(format!("old member PVC {name} was deleted by {restore}"));
        };
        if pvc.metadata.uid.as_ref() != Some(uid) {
            return Err(format!(
                "old member PVC {name} was replaced during {restore}"
            ));
        }
        let now = pvc
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RETAINED_LABEL));
        let wanted = label.as_deref().unwrap_or(restore);
        if now.map(String::as_str) != Some(wanted) {
            return Err(format!(
                "old member PVC {name} is labelled {RETAINED_LABEL}={now:?} after {restore}, \
                 not {wanted}"
            ));
        }
        if pvc
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| !o.is_empty())
        {
            return Err(format!(
                "retained PVC {name} still has owners: {:?}",
                pvc.metadata.owner_references
            ));
        }
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    for (name, uid) in &old.pods {
        let pod = pods.get_opt(name).await.map_err(|e| e.to_string())?;
        if pod.is_some_and(|p| p.metadata.uid.as_ref() == Some(uid)) {
            return Err(format!(
                "old member Pod {name} is still there after {restore}"
            ));
        }
    }
    Ok(())
}

/// Puts a copy of the source backup's object with 16 bytes flipped in its middle at
/// [`TAMPERED_KEY`]; returns the original's SHA-256 (which the copy does not have).
async fn tampered_source(env: &Env, s3: &aws_sdk_s3::Client) -> String {
    let backup = Api::<EtcdBackup>::namespaced(env.client.clone(), NS)
        .get("chaos-source")
        .await
        .unwrap();
    let artifact = backup.status.and_then(|s| s.artifact).unwrap();
    let mut bytes = get_object(s3, &object_key(&artifact, BACKUP_PREFIX, CLUSTER)).await;
    let middle = bytes.len() / 2;
    for b in &mut bytes[middle..middle + 16] {
        *b ^= 0xff;
    }
    put_object(s3, TAMPERED_KEY, bytes).await;
    artifact.sha256
}

/// A restore over [`LOST`] from the tampered object with the original's SHA-256, the restore
/// operator armed at the seed's removal; timed from the crash to the restore Failed and
/// everything it built gone ([`seed_removed`]).
async fn failed_seed_case(armed: &Armed<'_>, s3: &aws_sdk_s3::Client) -> CaseResult {
    let env = armed.env;
    lose_quorum(env).await;
    let sha256 = tampered_source(env, s3).await;
    let name = format!("chaos-restore-{}", armed.index);
    let before = members_of(env, LOST).await;
    let pvcs_before = pvc_names(env).await;
    let restarted = armed
        .crash_and_restart(STEP, async || {
            env.apply(&restore_over_lost_yaml(
                &name,
                &format!(
                    "    s3: {{bucket: {BUCKET}, key: {TAMPERED_KEY}, endpoint: \"{S3_ENDPOINT}\", \
                     region: us-east-1, forcePathStyle: true, credentialsSecretRef: {{name: {S3_SECRET}}}}}\n    \
                     sha256: {sha256}\n"
                ),
            ))
            .unwrap();
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let outcome = seed_removed(env, &name, &before, &pvcs_before).await;
    (outcome, restarted.elapsed())
}

/// The restore `name` ended Failed with `ChecksumMismatch`, the seed it recorded has neither a
/// Pod nor a PVC, and [`LOST`] is as it was `before` (the same Pods and PVCs with the same
/// labels, no hold), no PVC labelled by `name`, no PVC in the namespace deleted.
async fn seed_removed(
    env: &Env,
    name: &str,
    before: &Members,
    pvcs_before: &BTreeSet<String>,
) -> Result<(), String> {
    let restores: Api<EtcdRestore> = Api::namespaced(env.client.clone(), NS);
    let deadline = Instant::now() + STEP;
    let status = loop {
        let status = restores.get(name).await.ok().and_then(|r| r.status);
        if let Some(status) = status
            && status.phase.is_some_and(RestorePhase::is_finished)
        {
            break status;
        }
        if Instant::now() > deadline {
            return Err(format!("{name} did not finish within {STEP:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if status.phase != Some(RestorePhase::Failed)
        || status.reason.as_deref() != Some("ChecksumMismatch")
    {
        return Err(format!(
            "{name} ended {:?} ({:?}), not Failed with ChecksumMismatch: {:?}",
            status.phase, status.reason, status.message
        ));
    }
    let seed = status
        .seed_member
        .clone()
        .ok_or_else(|| format!("{name} failed without recording a seed: {status:?}"))?;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    // Failed is written once the hold is released, after the seed's deletions were sent; the
    // PVC may still be finishing (its protection finalizer).
    loop {
        let pod = pods.get_opt(&seed).await.map_err(|e| e.to_string())?;
        let pvc = pvcs.get_opt(&seed).await.map_err(|e| e.to_string())?;
        if pod.is_none() && pvc.is_none() {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the failed seed {seed} of {name} is still there: Pod {}, PVC {}",
                pod.is_some(),
                pvc.is_some()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let now = members_of(env, LOST).await;
    if now != *before {
        return Err(format!(
            "{LOST} changed during the failed {name}: before {before:?}, now {now:?}"
        ));
    }
    let held = env
        .clusters()
        .get(LOST)
        .await
        .map_err(|e| e.to_string())?
        .metadata
        .annotations
        .is_some_and(|a| a.contains_key(RESTORING_ANNOTATION));
    if held {
        return Err(format!(
            "{LOST} still carries {RESTORING_ANNOTATION} after {name} failed"
        ));
    }
    let labelled: Vec<String> = pvcs
        .list(&ListParams::default().labels(&format!("{RETAINED_LABEL}={name}")))
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    if !labelled.is_empty() {
        return Err(format!(
            "PVCs labelled retained by the failed {name}: {labelled:?}"
        ));
    }
    if let Some(gone) = pvcs_before.difference(&pvc_names(env).await).next() {
        return Err(format!("PVC {gone} was deleted during {name}"));
    }
    eprintln!(
        "chaos: {name} failed ({:?}); seed {seed} removed",
        status.message
    );
    Ok(())
}

// --- The backup's aborts ---

/// How long the slowed follower of an abort case takes to send its whole database at the
/// limit (on top of twice its traffic before): four times the timeout below, so the deadline
/// falls mid-stream, and long enough to catch the upload in flight for a kill.
const ABORT_STREAM: Duration = Duration::from_secs(40);
/// `spec.timeoutSeconds` of a [`Trigger::BackupTimesOut`] backup: the schema's minimum.
const ABORT_TIMEOUT_SECONDS: u64 = 10;

/// An on-demand backup of [`CLUSTER`] streamed from one follower slowed for [`ABORT_STREAM`],
/// with the backup operator armed: it times out ([`Trigger::BackupTimesOut`]), or the operator
/// is SIGKILLed once the upload exists ([`Trigger::BackupInterrupted`]). Timed from the crash
/// at the failpoint to the backup's final phase and the next backup's success.
async fn backup_abort_case(
    armed: &Armed<'_>,
    s3: &aws_sdk_s3::Client,
    cluster: &Cluster,
) -> CaseResult {
    let env = armed.env;
    let name = format!("chaos-backup-{}", armed.index);
    // At least a mebibyte to stream, whatever the cases before wrote.
    write_keys(
        env,
        CLUSTER,
        (0..4).map(|i| (format!("filler/{i}"), "x".repeat(256 * 1024))),
    )
    .await;
    let before = objects(s3, BACKUP_PREFIX).await;
    let (victim, client_url) = voting_follower(env, cluster).await;
    let (pid, db_size) = etcd_of(env, cluster, &victim).await;
    let database_bits = u64::try_from(db_size).unwrap_or(0) * 8;
    let rate = database_bits / ABORT_STREAM.as_secs() + 2 * background_bits(pid).await;
    let timeout = match armed.case.trigger {
        Trigger::BackupTimesOut => ABORT_TIMEOUT_SECONDS,
        _ => 120,
    };
    // From the slowed follower alone (given the whole cluster the operator may pick another).
    let yaml = backup_from_member(&name, &client_url)
        .replace("timeoutSeconds: 120", &format!("timeoutSeconds: {timeout}"));
    let mut killed = None;
    let mut shaped = String::new();
    let restarted = armed
        .crash_and_restart_then(
            STEP,
            async || {
                limit_egress(pid, rate);
                env.apply(&yaml).unwrap();
                if armed.case.trigger == Trigger::BackupInterrupted {
                    killed = Some(kill_backup_operator_once_uploading(env, s3, &name).await);
                }
                Ok(())
            },
            || shaped = lift_egress_limit(pid),
        )
        .await;
    eprintln!(
        "chaos: {victim} (database {db_size} bytes) limited to {rate} bit/s for {name} \
         (timeoutSeconds {timeout}, operator killed: {killed:?}): {shaped}"
    );
    let restarted = match (restarted, killed) {
        (Ok(at), Some(Err(e))) => return (Err(e), at.elapsed()),
        (Err((_, elapsed)), Some(Err(e))) => return (Err(e), elapsed),
        (Err(not_reached), _) => return not_reached,
        (Ok(at), _) => at,
    };
    let reasons: &[&str] = match armed.case.trigger {
        // Failed by its deadline, or, crashed before the outcome was written, by the next start.
        Trigger::BackupTimesOut => &["Timeout", "Interrupted"],
        _ => &["Interrupted"],
    };
    let outcome = failed_then_next_succeeds(env, s3, &name, &before, reasons, "").await;
    (outcome, restarted.elapsed())
}

/// The backup `name` ends Failed with one of `reasons`, its object and uploads as
/// [`check_backup`] wants, and the next backup succeeds. `detail` is printed with its end.
async fn failed_then_next_succeeds(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    name: &str,
    before: &BTreeMap<String, (i64, String)>,
    reasons: &[&str],
    detail: &str,
) -> Result<(), String> {
    let backup = wait_backup_finished(env, name).await;
    let status = backup.status.clone().unwrap_or_default();
    match check_backup(s3, &backup, before).await {
        Ok(BackupPhase::Failed) if reasons.contains(&status.reason.as_deref().unwrap_or("")) => {
            eprintln!(
                "chaos: {name}{detail} ended Failed {:?}: {:?}",
                status.reason, status.message
            );
            next_backup_succeeds(env, s3, &format!("{name}-next")).await
        }
        Ok(phase) => Err(format!(
            "{name} ended {phase:?} ({:?}: {:?}), not Failed with one of {reasons:?}",
            status.reason, status.message
        )),
        Err(e) => Err(e),
    }
}

/// Waits until the backup `name` has a pending multipart upload (its key carries the backup's
/// UID), then SIGKILLs the backup operator's process. Returns the upload seen.
async fn kill_backup_operator_once_uploading(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    name: &str,
) -> Result<String, String> {
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let deadline = Instant::now() + STEP;
    loop {
        let uid = backups.get(name).await.ok().and_then(|b| b.metadata.uid);
        let pending = pending_uploads(s3, BACKUP_PREFIX).await;
        if let Some(upload) = uid.and_then(|uid| pending.into_iter().find(|u| u.contains(&uid))) {
            signal_pid(operator_pid(env, "etcd-backup-operator"), "KILL");
            return Ok(upload);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no multipart upload of {name} seen within {STEP:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An on-demand backup `name` of [`CLUSTER`] ends Succeeded with its verified object.
async fn next_backup_succeeds(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    name: &str,
) -> Result<(), String> {
    let before = objects(s3, BACKUP_PREFIX).await;
    env.apply(&on_demand_backup(name, CLUSTER, BACKUP_PREFIX, S3_SECRET))
        .unwrap();
    let backup = wait_backup_finished(env, name).await;
    match check_backup(s3, &backup, &before).await? {
        BackupPhase::Succeeded => Ok(()),
        phase => Err(format!(
            "the next backup {name} ended {phase:?}: {:?}",
            backup.status
        )),
    }
}

/// How long the proxy of a [`Trigger::BackupPartStuck`] case holds each UploadPart: past the
/// backup's deadline ([`ABORT_TIMEOUT_SECONDS`]) and the executor's grace after it (30 s), so
/// that the run is given up (dropped) while its part is held.
const PART_HELD: Duration = Duration::from_secs(ABORT_TIMEOUT_SECONDS + 30 + 15);

/// An on-demand backup of [`CLUSTER`] through [`part_delaying_proxy`], the backup operator
/// armed at the dropped upload's abort; timed from the crash to the backup's final phase and
/// the next backup's success.
async fn stuck_part_case(armed: &Armed<'_>, s3: &aws_sdk_s3::Client) -> CaseResult {
    let env = armed.env;
    let name = format!("chaos-backup-{}", armed.index);
    let before = objects(s3, BACKUP_PREFIX).await;
    let (host_ip, upstream) = s3_pod_addresses(env).await;
    let (endpoint, held) = part_delaying_proxy(&host_ip, upstream, PART_HELD).await;
    let yaml = on_demand_backup(&name, CLUSTER, BACKUP_PREFIX, S3_SECRET)
        .replace(S3_ENDPOINT, &endpoint)
        .replace(
            "timeoutSeconds: 120",
            &format!("timeoutSeconds: {ABORT_TIMEOUT_SECONDS}"),
        );
    let restarted = armed
        .crash_and_restart(STEP, async || {
            env.apply(&yaml).unwrap();
            Ok(())
        })
        .await;
    let held = held.load(std::sync::atomic::Ordering::SeqCst);
    let restarted = match restarted {
        Ok(at) if held == 0 => {
            let no_part = format!("no UploadPart of {name} went through the proxy");
            return (Err(no_part), at.elapsed());
        }
        Err((_, elapsed)) if held == 0 => {
            let no_part = format!("no UploadPart of {name} went through the proxy");
            return (Err(no_part), elapsed);
        }
        Err(not_reached) => return not_reached,
        Ok(at) => at,
    };
    // Failed by its deadline, or, crashed before the outcome was written, by the next start.
    let reasons = ["Timeout", "Interrupted"];
    let detail = format!(" ({held} parts held {PART_HELD:?})");
    let outcome = failed_then_next_succeeds(env, s3, &name, &before, &reasons, &detail).await;
    (outcome, restarted.elapsed())
}

/// A TCP proxy on `ip` (a free port) to `upstream` that holds each UploadPart (a `PUT` with
/// `partNumber=` in its request line) for `hold` before passing it on: an S3 slow to answer
/// a part. Everything else passes at once. Returns its endpoint URL and how many parts it held.
async fn part_delaying_proxy(
    ip: &str,
    upstream: String,
    hold: Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(AtomicUsize::new(0));
    let count = held.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let up = tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = client_read.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let part = String::from_utf8_lossy(&buf[..n])
                            .lines()
                            .any(|l| l.starts_with("PUT /") && l.contains("partNumber="));
                        if part {
                            count.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(hold).await;
                        }
                        if server_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                up.abort();
            });
        }
    });
    (endpoint, held)
}

// --- The CronJob's Job ---

/// The cluster whose `spec.backup` CronJob the Job's cases run: one member, its own prefix, a
/// schedule never due ([`BACKUP_SCHEDULE`]: the cases run its Job themselves).
const SCHEDULED: &str = "chaos-sched";
/// `spec.backup.retain` of [`SCHEDULED`].
const SCHEDULED_RETAIN: usize = 2;
/// `spec.backup.s3.prefix` of [`SCHEDULED`].
const SCHEDULED_PREFIX: &str = "chaos-sched/";

fn scheduled_cluster_yaml() -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdCluster\nmetadata: {{name: {SCHEDULED}}}\n\
         spec:\n  size: 1\n  version: \"{VERSION}\"\n  storage: {{size: 1Gi, reclaimPolicy: Retain}}\n  \
         backup:\n    schedule: \"{BACKUP_SCHEDULE}\"\n    retain: {SCHEDULED_RETAIN}\n    \
         deleteObjects: true\n    timeoutSeconds: 60\n    s3: {{bucket: {BUCKET}, prefix: \
         {SCHEDULED_PREFIX}, endpoint: \"{S3_ENDPOINT}\", forcePathStyle: true, \
         credentialsSecretRef: {{name: {S3_SECRET}}}}}\n"
    )
}

/// [`SCHEDULED`] Available and its CronJob's template, as JSON (unarmed, not timed).
async fn scheduled_job_template(env: &Env) -> Result<serde_json::Value, String> {
    env.apply(&scheduled_cluster_yaml())?;
    env.wait_available(SCHEDULED, 1, VERSION, STEP).await;
    let cron_job = format!("cronjob/{SCHEDULED}-backups");
    let deadline = Instant::now() + STEP;
    loop {
        if let Ok(json) = env.try_kubectl(&["get", &cron_job, "-n", NS, "-o", "json"]) {
            let cron: serde_json::Value = serde_json::from_str(&json).map_err(|e| e.to_string())?;
            return Ok(cron["spec"]["jobTemplate"]["spec"].clone());
        }
        if Instant::now() > deadline {
            return Err(format!("no {cron_job} within {STEP:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs the CronJob's job template once as the Job `job` (as `kubectl create job --from`
/// does), with `failpoint` in its container's environment; returns the container's exit code.
async fn run_scheduled_job(
    env: &Env,
    template: &serde_json::Value,
    job: &str,
    failpoint: Option<&str>,
) -> Result<i32, String> {
    let mut spec = template.clone();
    if let Some(failpoint) = failpoint {
        let container = &mut spec["template"]["spec"]["containers"][0];
        let mut vars = container["env"].as_array().cloned().unwrap_or_default();
        vars.push(serde_json::json!({"name": "ETCD_OPERATOR_FAILPOINT", "value": failpoint}));
        container["env"] = serde_json::Value::Array(vars);
    }
    let manifest = serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job, "namespace": NS},
        "spec": spec,
    });
    env.apply(&manifest.to_string())?;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let deadline = Instant::now() + STEP;
    loop {
        let listed = pods
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .map_err(|e| e.to_string())?;
        let exited = listed.items.iter().find_map(|pod| {
            let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
            statuses
                .iter()
                .find_map(|c| c.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code))
        });
        if let Some(code) = exited {
            return Ok(code);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the Job {job}'s container did not exit within {STEP:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// [`SCHEDULED`]'s scheduled EtcdBackups (not being deleted), once every one has finished.
async fn finished_scheduled_backups(env: &Env) -> Result<BTreeMap<String, EtcdBackup>, String> {
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={SCHEDULED},etcd.operator.rs/scheduled=true");
    let deadline = Instant::now() + STEP;
    loop {
        let listed: BTreeMap<String, EtcdBackup> = backups
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|b| b.metadata.deletion_timestamp.is_none())
            .map(|b| (b.metadata.name.clone().unwrap(), b))
            .collect();
        let running: Vec<&String> = listed
            .iter()
            .filter(|(_, b)| {
                !b.status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(BackupPhase::is_finished)
            })
            .map(|(name, _)| name)
            .collect();
        if running.is_empty() {
            return Ok(listed);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "scheduled backups not finished within {STEP:?}: {running:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The CronJob's Job of [`SCHEDULED`] run with the failpoint armed, then again unarmed (the
/// next schedule). Before it, unarmed runs until [`SCHEDULED_RETAIN`] backups succeeded, so
/// that the armed run's retention deletes one. Timed from the armed Job's crash to the second
/// run's outcome checked ([`Trigger::ScheduledRun`]).
async fn scheduled_run_case(armed: &Armed<'_>, s3: &aws_sdk_s3::Client) -> CaseResult {
    let env = armed.env;
    let template = match scheduled_job_template(env).await {
        Ok(template) => template,
        Err(e) => return (Err(e), Duration::ZERO),
    };
    let mut crashed = None;
    let outcome = scheduled_runs(env, s3, armed, &template, &mut crashed).await;
    (outcome, crashed.map_or(Duration::ZERO, |at| at.elapsed()))
}

async fn scheduled_runs(
    env: &Env,
    s3: &aws_sdk_s3::Client,
    armed: &Armed<'_>,
    template: &serde_json::Value,
    crashed: &mut Option<Instant>,
) -> Result<(), String> {
    let index = armed.index;
    // Every scheduled backup seen along the case, by name (retention deletes some).
    let mut seen = BTreeMap::new();
    for run in 0.. {
        let now = finished_scheduled_backups(env).await?;
        seen.extend(now.clone());
        if now.len() >= SCHEDULED_RETAIN {
            break;
        }
        let job = format!("{SCHEDULED}-{index}-prepare-{run}");
        match run_scheduled_job(env, template, &job, None).await? {
            0 => {}
            code => return Err(format!("the unarmed Job {job} exited {code}")),
        }
    }
    let before = finished_scheduled_backups(env).await?;
    let job = format!("{SCHEDULED}-{index}-armed");
    let code = run_scheduled_job(env, template, &job, Some(&armed.scenario())).await?;
    *crashed = Some(Instant::now());
    if code != failpoint_exit_code() {
        return Err(format!(
            "the armed Job {job} exited {code}, not at the failpoint ({})",
            failpoint_exit_code()
        ));
    }
    let after_crash = finished_scheduled_backups(env).await?;
    seen.extend(after_crash.clone());
    let created: Vec<&String> = after_crash
        .keys()
        .filter(|n| !before.contains_key(*n))
        .collect();
    let expected = usize::from(armed.scenario() != "backup.backup_create:before");
    if created.len() != expected {
        return Err(format!(
            "the crashed run created {created:?}, not {expected} EtcdBackup"
        ));
    }
    let job = format!("{SCHEDULED}-{index}-next");
    match run_scheduled_job(env, template, &job, None).await? {
        0 => {}
        code => return Err(format!("the next run's Job {job} exited {code}")),
    }
    let after = finished_scheduled_backups(env).await?;
    seen.extend(after.clone());
    let created: Vec<&String> = after
        .keys()
        .filter(|n| !after_crash.contains_key(*n))
        .collect();
    if created.len() != 1 {
        return Err(format!(
            "the next run created {created:?}, not one EtcdBackup"
        ));
    }
    // Every backup of the case succeeded; the newest SCHEDULED_RETAIN are left, with their
    // objects, and every older one went with its object.
    let mut order = Vec::new();
    let mut keys = BTreeMap::new();
    for (name, backup) in &seen {
        let status = backup.status.clone().unwrap_or_default();
        let (Some(BackupPhase::Succeeded), Some(artifact)) = (status.phase, &status.artifact)
        else {
            return Err(format!("scheduled backup {name} ended {status:?}"));
        };
        keys.insert(
            name.clone(),
            object_key(artifact, SCHEDULED_PREFIX, SCHEDULED),
        );
        let created = backup.metadata.creation_timestamp.clone().unwrap().0;
        order.push((created, name.clone()));
    }
    order.sort();
    let newest: BTreeSet<&String> = order
        .iter()
        .rev()
        .take(SCHEDULED_RETAIN)
        .map(|(_, name)| name)
        .collect();
    let left: BTreeSet<&String> = after.keys().collect();
    if left != newest {
        return Err(format!(
            "retention left {left:?}, not the newest {SCHEDULED_RETAIN} {newest:?} (oldest \
             first: {order:?})"
        ));
    }
    let stored = list_keys(s3, SCHEDULED_PREFIX).await;
    for (name, key) in &keys {
        match (left.contains(name), stored.contains(key)) {
            (true, false) => return Err(format!("{name} is kept but its object {key} is gone")),
            (false, true) => {
                return Err(format!("{name} was deleted but its object {key} is left"));
            }
            _ => {}
        }
    }
    let pending = pending_uploads(s3, SCHEDULED_PREFIX).await;
    if !pending.is_empty() {
        return Err(format!(
            "multipart uploads pending under {SCHEDULED_PREFIX}: {pending:?}"
        ));
    }
    eprintln!(
        "chaos: {}: scheduled backups left {left:?} of {} seen",
        armed.scenario(),
        seen.len()
    );
    Ok(())
}
