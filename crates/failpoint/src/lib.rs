//! Failpoints: end the process right before or right after a named side effect, to test that
//! the operators converge after a crash at any step. No I/O but stderr and the process exit.
//!
//! Every side effect the three operators perform (an etcd membership call, a Kubernetes object
//! created, patched or deleted, a status write, an S3 call of a backup, a restore step) is
//! wrapped in [`around`] with a name from [`ALL`]:
//!
//! ```no_run
//! # async fn example() {
//! # async fn create_pod() {}
//! failpoint::around("cluster.pod_create", create_pod()).await;
//! # }
//! ```
//!
//! Setting `ETCD_OPERATOR_FAILPOINT=<name>:<before|after>` in the operator's environment makes
//! the process log the point's name on stderr and exit with [`EXIT_CODE`] when it reaches that
//! point: before the call is sent, or after its answer came back (whatever the answer). Nothing
//! else changes: without the variable, [`around`] is the call plus one read of a
//! once-initialised static. The variable is read once, at the first side effect (or at
//! [`announce`], which the operators' `main`s call at start so that a misspelt name is reported
//! at once).
//!
//! Why an environment variable and not a cargo feature: the e2e harness runs the normal debug
//! builds (`cargo build --workspace --bins`) in the chart's Deployments, so the same binaries
//! must be able to crash on demand; an env var set on a Deployment does that without a second
//! build of the workspace. Why a crate of its own: the S3 calls (crates/etcd-snapshot) and the
//! etcd membership calls (crates/etcd-admin) sit below operator-runtime, which they must not
//! depend on (it pulls in the Kubernetes client); this crate depends on nothing.
//!
//! The test `tests/every_side_effect.rs` scans the operators' sources: every side-effect call
//! must sit inside one `failpoint::around(...)` and every name there must be in [`ALL`].

use std::future::Future;
use std::io::Write;
use std::sync::OnceLock;

pub mod fence;

/// The environment variable naming the armed point: `<name>:<before|after>`.
pub const ENV: &str = "ETCD_OPERATOR_FAILPOINT";

/// The exit code of a process ended by a failpoint (distinct from a panic's 101 and from the
/// operators' own failure exits, so a test can tell the crash it asked for from a real one).
pub const EXIT_CODE: i32 = 86;

/// Every failpoint, one per side-effect call site, named `<operator>.<step>`.
pub const ALL: &[&str] = &[
    // The cluster operator: etcd membership (crates/etcd-admin), the member objects, the
    // cluster's Services and budget, TLS Secrets, and its status.
    "cluster.member_add",
    "cluster.member_promote",
    "cluster.member_remove",
    "cluster.member_update",
    "cluster.pvc_create",
    "cluster.pod_create",
    "cluster.pod_delete",
    "cluster.pvc_delete",
    "cluster.pvc_owner_patch",
    "cluster.peer_service_apply",
    "cluster.client_service_apply",
    "cluster.pdb_apply",
    "cluster.secret_create",
    "cluster.secret_replace",
    "cluster.certificate_create",
    "cluster.network_policy_apply",
    "cluster.network_policy_delete",
    "cluster.status",
    "cluster.pvc_annotate",
    "cluster.pod_annotate",
    "cluster.pod_mark_tls_reverted",
    "cluster.pvc_resize",
    "cluster.pod_serving",
    "cluster.new_pod_serving",
    "cluster.member_defragment",
    "cluster.compact",
    "cluster.nospace_disarm",
    // spec.backup's CronJob and the ServiceAccount, Role and RoleBinding of its Jobs.
    "cluster.backup_service_account_apply",
    "cluster.backup_role_apply",
    "cluster.backup_role_binding_apply",
    "cluster.backup_cron_job_apply",
    "cluster.backup_role_binding_delete",
    "cluster.backup_role_delete",
    "cluster.backup_service_account_delete",
    "cluster.backup_cron_job_delete",
    // The backup operator: its status, the S3 multipart upload (crates/etcd-snapshot), and the
    // CronJob's `create-backup` (an EtcdBackup created, then retention).
    "backup.status",
    "backup.status_outcome",
    "backup.s3_create_multipart",
    "backup.s3_upload_part",
    "backup.s3_complete",
    "backup.s3_abort",
    "backup.s3_abort_on_drop",
    "backup.s3_abort_interrupted",
    "backup.backup_create",
    "backup.retention_s3_delete",
    "backup.retention_backup_delete",
    // The restore operator: its steps and its status.
    "restore.cluster_create",
    "restore.hold",
    "restore.release",
    "restore.pvc_retain",
    "restore.old_pod_delete",
    "restore.seed_pvc_create",
    "restore.seed_pod_create",
    "restore.seed_admit",
    "restore.seed_pod_delete",
    "restore.seed_pvc_delete",
    "restore.finalizer_patch",
    "restore.status",
];

/// Which side of the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Before the call is sent: the side effect did not happen.
    Before,
    /// After the answer came back: the side effect happened (if it succeeded).
    After,
}

impl When {
    fn as_str(self) -> &'static str {
        match self {
            When::Before => "before",
            When::After => "after",
        }
    }
}

/// The armed point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Armed {
    /// One of [`ALL`].
    pub name: String,
    /// Which side.
    pub when: When,
}

/// Parses `<name>:<before|after>`; the name must be one of [`ALL`].
pub fn parse(value: &str) -> Result<Armed, String> {
    let (name, when) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("{ENV}={value:?}: expected <name>:<before|after>"))?;
    let when = match when {
        "before" => When::Before,
        "after" => When::After,
        other => {
            return Err(format!(
                "{ENV}={value:?}: {other:?} is neither before nor after"
            ));
        }
    };
    if !ALL.contains(&name) {
        return Err(format!(
            "{ENV}={value:?}: no failpoint {name:?} (known: {})",
            ALL.join(", ")
        ));
    }
    Ok(Armed {
        name: name.to_owned(),
        when,
    })
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let value = std::env::var(ENV).ok().filter(|v| !v.is_empty())?;
            match parse(&value) {
                Ok(armed) => {
                    eprintln!(
                        "failpoint armed: {}:{} (exits with code {EXIT_CODE} there)",
                        armed.name,
                        armed.when.as_str()
                    );
                    Some(armed)
                }
                Err(error) => {
                    // Inert rather than fatal: a test waiting for the crash times out naming
                    // the failpoint, and this line says why.
                    eprintln!("failpoint not armed: {error}");
                    None
                }
            }
        })
        .as_ref()
}

/// Reads the environment now and says on stderr what is armed (call it once at start).
pub fn announce() {
    let _ = armed();
}

/// Ends the process if `name` is armed for `when`.
pub fn hit(name: &'static str, when: When) {
    if let Some(armed) = armed()
        && armed.name == name
        && armed.when == when
    {
        let line = format!(
            "failpoint {name}:{} reached: exiting with code {EXIT_CODE}",
            when.as_str()
        );
        // Both streams: the operators log JSON lines on stdout, and stderr is unbuffered.
        println!("{line}");
        let _ = std::io::stdout().flush();
        eprintln!("{line}");
        std::process::exit(EXIT_CODE);
    }
}

/// Runs `side_effect` between the failpoints `name:before` and `name:after`, after the
/// stale-leader [`fence`] (which exits the process instead once its Lease may be gone).
pub async fn around<F: Future>(name: &'static str, side_effect: F) -> F::Output {
    debug_assert!(ALL.contains(&name), "unregistered failpoint {name}");
    // Every side effect passes here: a process whose Lease may have gone does not send it.
    fence::check(name);
    hit(name, When::Before);
    let output = side_effect.await;
    hit(name, When::After);
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_name_and_side() {
        assert_eq!(
            parse("cluster.member_add:after"),
            Ok(Armed {
                name: "cluster.member_add".into(),
                when: When::After
            })
        );
        assert_eq!(
            parse("backup.s3_complete:before").unwrap().when,
            When::Before
        );
    }

    #[test]
    fn refuses_unknown_names_and_sides() {
        assert!(
            parse("cluster.member_ad:after")
                .unwrap_err()
                .contains("no failpoint")
        );
        assert!(
            parse("cluster.member_add:during")
                .unwrap_err()
                .contains("neither")
        );
        assert!(
            parse("cluster.member_add")
                .unwrap_err()
                .contains("expected")
        );
    }

    /// Run by [`an_armed_point_ends_the_process_with_its_code`] in a child process with the
    /// variable set; a no-op in a normal run.
    #[test]
    fn child_reaches_points() {
        if std::env::var(ENV).is_err() {
            return;
        }
        hit("cluster.pod_create", When::Before);
        hit("cluster.member_add", When::After);
        println!("the other points passed");
        hit("cluster.pod_create", When::After);
        println!("still running after the armed point");
    }

    #[test]
    fn an_armed_point_ends_the_process_with_its_code() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["tests::child_reaches_points", "--exact", "--nocapture"])
            .env(ENV, "cluster.pod_create:after")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(EXIT_CODE), "{stdout}");
        assert!(stdout.contains("the other points passed"), "{stdout}");
        assert!(
            stdout.contains("failpoint cluster.pod_create:after reached"),
            "{stdout}"
        );
        assert!(!stdout.contains("still running"), "{stdout}");
    }

    #[test]
    fn names_are_unique_and_systematic() {
        let mut names = ALL.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "a failpoint name is listed twice");
        for name in ALL {
            let (operator, step) = name.split_once('.').unwrap();
            assert!(
                ["cluster", "backup", "restore"].contains(&operator),
                "{name}"
            );
            assert!(
                !step.is_empty()
                    && step
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
        }
    }
}
