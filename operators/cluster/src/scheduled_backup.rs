//! Per-cluster scheduled backups (`spec.backup`): the CronJob that runs the operators' image's
//! `etcd-backup-operator create-backup` in the cluster's namespace, with its own ServiceAccount,
//! Role and RoleBinding. Pure: [`desired`] builds the four objects from the spec, [`plan`]
//! decides the one step from what exists; the executor (`execute.rs`) does it.
//!
//! ```text
//!   spec.backup  CronJob (ours)  hashes          step
//!   set          absent          -               Create  (ServiceAccount, Role, RoleBinding, CronJob)
//!   set          present         all current     InSync
//!   set          present         one differs or
//!                                one is missing  Update  (the same four applies)
//!   unset        present         -               Remove  (RoleBinding, Role, ServiceAccount, CronJob)
//!   unset        absent          -               Absent
//!   any          not ours        -               Foreign (nothing is touched; reported)
//! ```
//!
//! The CronJob is applied last and deleted last: while it exists its RBAC exists, and a crash
//! between two deletions leaves the CronJob, which the next pass sees and removes again.
//! Removing never touches an EtcdBackup or an S3 object: the CronJob's Jobs go with it, the
//! backups they created stay.

use std::collections::BTreeMap;

use etcd_api::{EtcdCluster, ScheduledBackupSpec};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements,
    SeccompProfile, SecurityContext, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use crate::build::{self, BuildError};

/// Annotation on the four objects: [`Objects::hash`] of what they were built from.
pub const ANNOTATION_SPEC_HASH: &str = "etcd.operator.rs/backup-spec-hash";
/// Label on the Jobs' Pods: the cluster they back up. Never the member label
/// (`etcd.operator.rs/cluster`): the Pods would count as members, and the Services would
/// select them.
pub const LABEL_BACKUP_OF: &str = "etcd.operator.rs/backup-of";
/// `app.kubernetes.io/component` of the objects, as the chart's CronJob.
pub const COMPONENT: &str = "scheduled-backup";
/// The backup operator's binary in the operators' image.
pub const BACKUP_BINARY: &str = "/usr/local/bin/etcd-backup-operator";
/// Longest CronJob name: the Jobs it creates append 11 characters and must stay DNS labels.
pub const MAX_CRONJOB_NAME: usize = 52;
/// `spec.timeoutSeconds` of a backup when `spec.backup.timeoutSeconds` is unset (the backup
/// operator's own default).
const DEFAULT_TIMEOUT_SECONDS: i64 = etcd_api::backup::DEFAULT_BACKUP_TIMEOUT_SECONDS;
/// `--wait` of create-backup: the backup's own timeout plus time to be picked up and recorded
/// (as the chart's CronJob).
const WAIT_MARGIN_SECONDS: i64 = 300;
/// The user the operators' image runs as.
const IMAGE_UID: i64 = 65532;

/// Name of the CronJob and of its ServiceAccount, Role and RoleBinding: `<cluster>-backups`,
/// or, for names too long for a CronJob, the cluster's name cut short plus a hash of it (two
/// long names with one prefix still differ).
pub fn name(cluster: &str) -> String {
    let plain = format!("{cluster}-backups");
    if plain.len() <= MAX_CRONJOB_NAME {
        return plain;
    }
    let digest = Sha256::digest(cluster.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    // 52 = 43 + '-' + 8 hex; cluster names are ASCII (a DNS label).
    let stem = cluster.get(..43).unwrap_or(cluster).trim_end_matches('-');
    format!("{stem}-{hash}")
}

/// The four objects of a cluster's backup schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Objects {
    /// The Jobs' identity.
    pub service_account: ServiceAccount,
    /// What create-backup needs, in the cluster's namespace only.
    pub role: Role,
    /// The Role bound to the ServiceAccount.
    pub role_binding: RoleBinding,
    /// The schedule.
    pub cron_job: CronJob,
    /// Hash of the four (before the annotation that records it): a change of the spec or of
    /// the image shows as a different hash on the objects.
    pub hash: String,
}

/// Why the schedule's objects cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DesiredError {
    /// The EtcdCluster lacks a name, namespace or UID.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// `spec.backup` is set but the operator was not told the image to run
    /// (`--backup-image`, which the chart sets).
    #[error(
        "spec.backup is set but the cluster operator has no --backup-image (BACKUP_IMAGE) to run create-backup with"
    )]
    NoImage,
    /// `spec.backup.schedule` has the shape of a cron schedule (the CRD's rule) but a value out
    /// of range: the CronJob would be refused.
    #[error("spec.backup.schedule {schedule:?} is not a cron schedule: {reason}")]
    BadSchedule {
        /// The schedule.
        schedule: String,
        /// What is wrong.
        reason: String,
    },
}

/// The objects `spec.backup` asks for, or `None` when it is unset. `image` is the operators'
/// image (`--backup-image`).
pub fn desired(
    cluster: &EtcdCluster,
    image: Option<&str>,
) -> Result<Option<Objects>, DesiredError> {
    let Some(spec) = &cluster.spec.backup else {
        return Ok(None);
    };
    if let Err(error) = etcd_api::cron::Schedule::parse(&spec.schedule) {
        return Err(DesiredError::BadSchedule {
            schedule: spec.schedule.clone(),
            reason: error.0,
        });
    }
    let image = image.ok_or(DesiredError::NoImage)?;
    let names = build::cluster_name(cluster)?;
    let name = name(&names.name);
    let meta = || -> Result<ObjectMeta, BuildError> {
        let mut meta = build::owned_meta(cluster, &name)?;
        if let Some(labels) = meta.labels.as_mut() {
            labels.insert("app.kubernetes.io/component".into(), COMPONENT.into());
        }
        Ok(meta)
    };
    let service_account = ServiceAccount {
        metadata: meta()?,
        ..ServiceAccount::default()
    };
    let role = Role {
        metadata: meta()?,
        rules: Some(rules(spec)),
    };
    let role_binding = RoleBinding {
        metadata: meta()?,
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.clone(),
            namespace: Some(names.namespace.clone()),
            ..Subject::default()
        }]),
    };
    let cron_job = CronJob {
        metadata: meta()?,
        spec: Some(CronJobSpec {
            schedule: spec.schedule.clone(),
            suspend: Some(spec.suspend),
            // A backup still running when the next is due is not doubled up.
            concurrency_policy: Some("Forbid".into()),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(JobSpec {
                    // A failed backup is not retried by the Job (each retry would be a new
                    // EtcdBackup); the next schedule is the retry, the failed Job shows it.
                    backoff_limit: Some(0),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(pod_labels(&names.name)),
                            ..ObjectMeta::default()
                        }),
                        spec: Some(pod_spec(spec, &names.name, &names.namespace, &name, image)),
                    },
                    ..JobSpec::default()
                }),
            },
            ..CronJobSpec::default()
        }),
        status: None,
    };
    let mut objects = Objects {
        service_account,
        role,
        role_binding,
        cron_job,
        hash: String::new(),
    };
    let shaping = serde_json::json!([
        objects.service_account,
        objects.role,
        objects.role_binding,
        objects.cron_job
    ]);
    let digest = Sha256::digest(shaping.to_string().as_bytes());
    objects.hash = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    for meta in [
        &mut objects.service_account.metadata,
        &mut objects.role.metadata,
        &mut objects.role_binding.metadata,
        &mut objects.cron_job.metadata,
    ] {
        meta.annotations = Some(BTreeMap::from([(
            ANNOTATION_SPEC_HASH.to_owned(),
            objects.hash.clone(),
        )]));
    }
    Ok(Some(objects))
}

/// What `create-backup` does in the namespace, verb by verb: creates an EtcdBackup and reads it
/// until it finished; with `retain`, lists the cluster's scheduled EtcdBackups and deletes the
/// older ones, never one an unfinished EtcdRestore reads (so it lists EtcdRestores); with
/// `deleteObjects` and a credentials Secret, reads that Secret (only it) to delete their objects.
fn rules(spec: &ScheduledBackupSpec) -> Vec<PolicyRule> {
    let rule = |group: &str, resource: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    };
    let retains = spec.retain > 0;
    let mut rules = vec![if retains {
        rule(
            etcd_api::GROUP,
            "etcdbackups",
            &["create", "get", "list", "delete"],
        )
    } else {
        rule(etcd_api::GROUP, "etcdbackups", &["create", "get"])
    }];
    if retains {
        rules.push(rule(etcd_api::GROUP, "etcdrestores", &["list"]));
    }
    if let (true, true, Some(secret)) = (
        retains,
        spec.delete_objects,
        &spec.s3.connection.credentials_secret_ref,
    ) {
        rules.push(PolicyRule {
            resource_names: Some(vec![secret.name.clone()]),
            ..rule("", "secrets", &["get"])
        });
    }
    rules
}

fn pod_labels(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_owned(),
            "etcd-backup".to_owned(),
        ),
        ("app.kubernetes.io/instance".to_owned(), cluster.to_owned()),
        (
            "app.kubernetes.io/component".to_owned(),
            COMPONENT.to_owned(),
        ),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            build::MANAGED_BY.to_owned(),
        ),
        (LABEL_BACKUP_OF.to_owned(), cluster.to_owned()),
    ])
}

/// The arguments of `create-backup`, as the chart's CronJob passes them.
pub fn create_backup_args(
    spec: &ScheduledBackupSpec,
    cluster: &str,
    namespace: &str,
) -> Vec<String> {
    let s3 = &spec.s3;
    let mut args = vec![
        format!("--cluster={cluster}"),
        format!("--namespace={namespace}"),
        format!("--bucket={}", s3.connection.bucket),
    ];
    if let Some(prefix) = s3.prefix.as_deref().filter(|p| !p.is_empty()) {
        args.push(format!("--prefix={prefix}"));
    }
    if let Some(endpoint) = &s3.connection.endpoint {
        args.push(format!("--endpoint={endpoint}"));
    }
    if let Some(region) = &s3.connection.region {
        args.push(format!("--region={region}"));
    }
    if s3.connection.force_path_style {
        args.push("--force-path-style".into());
    }
    if let Some(secret) = &s3.connection.credentials_secret_ref {
        args.push(format!("--credentials-secret={}", secret.name));
    }
    let timeout = spec.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    args.push(format!("--timeout-seconds={timeout}"));
    args.push("--wait".into());
    args.push(format!(
        "--wait-timeout-seconds={}",
        timeout + WAIT_MARGIN_SECONDS
    ));
    if spec.retain > 0 {
        args.push(format!("--retain={}", spec.retain));
        if spec.delete_objects {
            args.push("--delete-objects".into());
        }
    }
    args
}

/// The Job's Pod: create-backup as the image's non-root user, meeting the `restricted` Pod
/// Security level (the members' namespace may enforce it).
fn pod_spec(
    spec: &ScheduledBackupSpec,
    cluster: &str,
    namespace: &str,
    account: &str,
    image: &str,
) -> PodSpec {
    let quantity = |q: &str| Quantity(q.to_owned());
    PodSpec {
        service_account_name: Some(account.to_owned()),
        restart_policy: Some("Never".into()),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(IMAGE_UID),
            run_as_group: Some(IMAGE_UID),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![Container {
            name: "create-backup".into(),
            image: Some(image.to_owned()),
            command: Some(vec![BACKUP_BINARY.into(), "create-backup".into()]),
            args: Some(create_backup_args(spec, cluster, namespace)),
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                run_as_non_root: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".into()]),
                    add: None,
                }),
                ..SecurityContext::default()
            }),
            // It only creates an EtcdBackup and waits (the chart's CronJob's defaults).
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), quantity("10m")),
                    ("memory".to_owned(), quantity("32Mi")),
                ])),
                limits: Some(BTreeMap::from([("memory".to_owned(), quantity("64Mi"))])),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

/// One existing object of the schedule, as far as the plan cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Existing {
    /// This cluster controls it (owner reference with its UID).
    pub owned: bool,
    /// Its [`ANNOTATION_SPEC_HASH`].
    pub hash: Option<String>,
}

impl Existing {
    /// What the plan needs of an object read from the API.
    pub fn of(meta: &ObjectMeta, cluster_uid: Option<&str>) -> Self {
        Existing {
            owned: meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| Some(o.uid.as_str()) == cluster_uid),
            hash: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_SPEC_HASH).cloned()),
        }
    }
}

/// The schedule's objects as they are (`None`: absent). The companions are read only when the
/// CronJob is ours or wanted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The CronJob.
    pub cron_job: Option<Existing>,
    /// Its ServiceAccount.
    pub service_account: Option<Existing>,
    /// Its Role.
    pub role: Option<Existing>,
    /// Its RoleBinding.
    pub role_binding: Option<Existing>,
}

/// The one step for the schedule's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Apply the four (the CronJob last); there was no CronJob.
    Create,
    /// Apply the four: the spec or the image changed, or a companion is missing.
    Update,
    /// Nothing to do: all four are current.
    InSync,
    /// Delete the four (the CronJob last): `spec.backup` was removed.
    Remove,
    /// Nothing to do: no schedule, and nothing of ours.
    Absent,
    /// An object of the schedule's name exists that this cluster does not own: it is never
    /// touched, and the schedule is not made.
    Foreign {
        /// Its kind.
        kind: &'static str,
    },
}

/// The step from the desired hash (`None`: `spec.backup` unset) and what exists. Pure.
pub fn plan(desired_hash: Option<&str>, observed: &Observed) -> Step {
    let all = [
        ("CronJob", &observed.cron_job),
        ("ServiceAccount", &observed.service_account),
        ("Role", &observed.role),
        ("RoleBinding", &observed.role_binding),
    ];
    let Some(hash) = desired_hash else {
        // Only our CronJob says a schedule of ours is (still) there: it is deleted last.
        return match &observed.cron_job {
            Some(cron) if cron.owned => Step::Remove,
            _ => Step::Absent,
        };
    };
    if let Some((kind, _)) = all
        .iter()
        .find(|(_, object)| object.as_ref().is_some_and(|o| !o.owned))
    {
        return Step::Foreign { kind };
    }
    if observed.cron_job.is_none() {
        return Step::Create;
    }
    let current = all.iter().all(|(_, object)| {
        object
            .as_ref()
            .is_some_and(|o| o.hash.as_deref() == Some(hash))
    });
    if current { Step::InSync } else { Step::Update }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use etcd_api::{LocalObjectReference, S3Connection, S3Destination};

    const IMAGE: &str = "ghcr.io/example/etcd-operator:0.3.0";

    fn spec() -> ScheduledBackupSpec {
        ScheduledBackupSpec {
            schedule: "0 */6 * * *".into(),
            s3: S3Destination {
                connection: S3Connection {
                    bucket: "etcd-backups".into(),
                    endpoint: Some("http://s3.storage:8333".into()),
                    region: None,
                    force_path_style: true,
                    credentials_secret_ref: Some(LocalObjectReference {
                        name: "s3-creds".into(),
                    }),
                },
                prefix: Some("percluster/".into()),
            },
            retain: 2,
            delete_objects: true,
            timeout_seconds: Some(600),
            suspend: false,
        }
    }

    fn cluster(backup: Option<ScheduledBackupSpec>) -> EtcdCluster {
        let mut spec: etcd_api::EtcdClusterSpec =
            serde_json::from_value(serde_json::json!({"size": 3})).unwrap();
        spec.backup = backup;
        let mut cluster = EtcdCluster::new("main", spec);
        cluster.metadata.namespace = Some("db".into());
        cluster.metadata.uid = Some("uid-1".into());
        cluster
    }

    fn objects(backup: ScheduledBackupSpec) -> Objects {
        desired(&cluster(Some(backup)), Some(IMAGE))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn no_schedule_no_objects_and_no_image_needed() {
        assert_eq!(desired(&cluster(None), None), Ok(None));
        assert_eq!(
            desired(&cluster(Some(spec())), None),
            Err(DesiredError::NoImage)
        );
    }

    #[test]
    fn a_schedule_out_of_range_is_refused_naming_the_field() {
        let error = desired(
            &cluster(Some(ScheduledBackupSpec {
                schedule: "60 * * * *".into(),
                ..spec()
            })),
            Some(IMAGE),
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("spec.backup.schedule \"60 * * * *\""),
            "{error}"
        );
    }

    #[test]
    fn the_cron_job_runs_create_backup_as_the_chart_does() {
        let o = objects(spec());
        let cluster_name = "main".to_owned();
        let namespace = "db".to_owned();
        let name = format!("{cluster_name}-backups");
        let cron = o.cron_job.spec.clone().unwrap();
        assert_eq!(cron.schedule, "0 */6 * * *");
        assert_eq!(cron.suspend, Some(false));
        assert_eq!(cron.concurrency_policy.as_deref(), Some("Forbid"));
        let job = cron.job_template.spec.unwrap();
        assert_eq!(job.backoff_limit, Some(0));
        let pod = job.template.spec.unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some(name.as_str()));
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        let container = &pod.containers[0];
        assert_eq!(container.image.as_deref(), Some(IMAGE));
        assert_eq!(
            container.command.clone().unwrap(),
            vec![BACKUP_BINARY.to_owned(), "create-backup".to_owned()]
        );
        assert_eq!(
            container.args.clone().unwrap(),
            vec![
                format!("--cluster={cluster_name}"),
                format!("--namespace={namespace}"),
                "--bucket=etcd-backups".to_owned(),
                "--prefix=percluster/".to_owned(),
                "--endpoint=http://s3.storage:8333".to_owned(),
                "--force-path-style".to_owned(),
                "--credentials-secret=s3-creds".to_owned(),
                "--timeout-seconds=600".to_owned(),
                "--wait".to_owned(),
                "--wait-timeout-seconds=900".to_owned(),
                "--retain=2".to_owned(),
                "--delete-objects".to_owned(),
            ]
        );
        // The Jobs' Pods are not members: no member label, so neither the observer nor the
        // Services, the budget or the NetworkPolicy's member rule see them.
        let labels = job.template.metadata.unwrap().labels.unwrap();
        assert!(!labels.contains_key(build::LABEL_CLUSTER), "{labels:?}");
        assert_eq!(labels.get(LABEL_BACKUP_OF), Some(&cluster_name));
        // Every object is in the cluster's namespace, controlled by the cluster (deleted with
        // it) and carries the hash.
        for meta in [
            &o.service_account.metadata,
            &o.role.metadata,
            &o.role_binding.metadata,
            &o.cron_job.metadata,
        ] {
            assert_eq!(meta.name.as_deref(), Some(name.as_str()));
            assert_eq!(meta.namespace.as_deref(), Some(namespace.as_str()));
            let owner = &meta.owner_references.as_ref().unwrap()[0];
            assert_eq!(
                (owner.kind.as_str(), owner.controller),
                ("EtcdCluster", Some(true))
            );
            assert_eq!(
                meta.annotations.as_ref().unwrap().get(ANNOTATION_SPEC_HASH),
                Some(&o.hash)
            );
        }
        let subject = &o.role_binding.subjects.as_ref().unwrap()[0];
        assert_eq!(
            (
                subject.kind.as_str(),
                subject.name.as_str(),
                subject.namespace.as_deref()
            ),
            ("ServiceAccount", name.as_str(), Some(namespace.as_str()))
        );
        assert_eq!(o.role_binding.role_ref.name, name);
    }

    #[test]
    fn the_job_pod_meets_the_restricted_level() {
        let pod = objects(spec())
            .cron_job
            .spec
            .unwrap()
            .job_template
            .spec
            .unwrap()
            .template
            .spec
            .unwrap();
        let security = pod.security_context.unwrap();
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(
            security.seccomp_profile.unwrap().type_,
            "RuntimeDefault".to_owned()
        );
        let container = pod.containers[0].security_context.clone().unwrap();
        assert_eq!(container.allow_privilege_escalation, Some(false));
        assert_eq!(
            container.capabilities.unwrap().drop,
            Some(vec!["ALL".to_owned()])
        );
        assert_eq!(container.privileged, None);
    }

    /// `(group, resource, verb, resourceNames)` of a Role, flattened.
    fn grants(role: &Role) -> Vec<(String, String, String, Vec<String>)> {
        let mut out = vec![];
        for rule in role.rules.iter().flatten() {
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    for verb in &rule.verbs {
                        out.push((
                            group.clone(),
                            resource.clone(),
                            verb.clone(),
                            rule.resource_names.clone().unwrap_or_default(),
                        ));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn the_role_grants_only_what_create_backup_uses() {
        let g = |group: &str, resource: &str, verb: &str, names: &[&str]| {
            (
                group.to_owned(),
                resource.to_owned(),
                verb.to_owned(),
                names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
            )
        };
        let full = grants(&objects(spec()).role);
        assert_eq!(
            full,
            vec![
                g("etcd.operator.rs", "etcdbackups", "create", &[]),
                g("etcd.operator.rs", "etcdbackups", "get", &[]),
                g("etcd.operator.rs", "etcdbackups", "list", &[]),
                g("etcd.operator.rs", "etcdbackups", "delete", &[]),
                g("etcd.operator.rs", "etcdrestores", "list", &[]),
                g("", "secrets", "get", &["s3-creds"]),
            ]
        );
        // Objects kept: no Secret read.
        let keep_objects = grants(
            &objects(ScheduledBackupSpec {
                delete_objects: false,
                ..spec()
            })
            .role,
        );
        assert!(keep_objects.iter().all(|(_, r, _, _)| r != "secrets"));
        // No retention: create and wait only.
        let keep_all = grants(
            &objects(ScheduledBackupSpec {
                retain: 0,
                ..spec()
            })
            .role,
        );
        assert_eq!(
            keep_all,
            vec![
                g("etcd.operator.rs", "etcdbackups", "create", &[]),
                g("etcd.operator.rs", "etcdbackups", "get", &[]),
            ]
        );
        let without_retain = objects(ScheduledBackupSpec {
            retain: 0,
            ..spec()
        });
        let args = without_retain
            .cron_job
            .spec
            .unwrap()
            .job_template
            .spec
            .unwrap()
            .template
            .spec
            .unwrap()
            .containers[0]
            .args
            .clone()
            .unwrap();
        assert!(
            args.iter()
                .all(|a| !a.starts_with("--retain") && a != "--delete-objects"),
            "{args:?}"
        );
    }

    #[test]
    fn every_field_and_the_image_change_the_hash() {
        let base = objects(spec()).hash;
        let changed = [
            ScheduledBackupSpec {
                schedule: "* * * * *".into(),
                ..spec()
            },
            ScheduledBackupSpec {
                suspend: true,
                ..spec()
            },
            ScheduledBackupSpec {
                retain: 3,
                ..spec()
            },
            ScheduledBackupSpec {
                delete_objects: false,
                ..spec()
            },
            ScheduledBackupSpec {
                timeout_seconds: None,
                ..spec()
            },
        ];
        for backup in changed {
            assert_ne!(objects(backup.clone()).hash, base, "{backup:?}");
        }
        let other_image = desired(&cluster(Some(spec())), Some("other:1"))
            .unwrap()
            .unwrap();
        assert_ne!(other_image.hash, base);
        assert_eq!(objects(spec()).hash, base, "the hash is stable");
    }

    #[test]
    fn long_cluster_names_still_make_a_cron_job_name() {
        assert_eq!(name("main"), "main-backups");
        let long = "a".repeat(50);
        let cut = name(&long);
        assert!(cut.len() <= MAX_CRONJOB_NAME, "{cut}");
        assert!(cut.starts_with(&"a".repeat(43)));
        let other = format!("{}b", "a".repeat(49));
        assert_ne!(name(&other), cut, "same prefix, different clusters");
        let dashed = format!("{}-{}", "a".repeat(42), "b".repeat(7));
        assert!(!name(&dashed).contains("--"), "{}", name(&dashed));
    }

    fn ours(hash: &str) -> Option<Existing> {
        Some(Existing {
            owned: true,
            hash: Some(hash.to_owned()),
        })
    }

    fn all(hash: &str) -> Observed {
        Observed {
            cron_job: ours(hash),
            service_account: ours(hash),
            role: ours(hash),
            role_binding: ours(hash),
        }
    }

    #[test]
    fn plan_table() {
        let foreign = Some(Existing {
            owned: false,
            hash: None,
        });
        let cases: Vec<(&str, Option<&str>, Observed, Step)> = vec![
            (
                "nothing wanted, nothing there",
                None,
                Observed::default(),
                Step::Absent,
            ),
            (
                "wanted, nothing there",
                Some("h1"),
                Observed::default(),
                Step::Create,
            ),
            (
                "crash after the ServiceAccount: the CronJob is still missing",
                Some("h1"),
                Observed {
                    service_account: ours("h1"),
                    ..Observed::default()
                },
                Step::Create,
            ),
            ("all current", Some("h1"), all("h1"), Step::InSync),
            ("spec changed", Some("h2"), all("h1"), Step::Update),
            (
                "Role deleted by hand",
                Some("h1"),
                Observed {
                    role: None,
                    ..all("h1")
                },
                Step::Update,
            ),
            (
                "crash mid-update: the CronJob still has the old hash",
                Some("h2"),
                Observed {
                    cron_job: ours("h1"),
                    ..all("h2")
                },
                Step::Update,
            ),
            ("spec.backup removed", None, all("h1"), Step::Remove),
            (
                "crash mid-removal: only the CronJob is left",
                None,
                Observed {
                    cron_job: ours("h1"),
                    ..Observed::default()
                },
                Step::Remove,
            ),
            (
                "someone else's CronJob of that name, nothing wanted: left alone",
                None,
                Observed {
                    cron_job: foreign.clone(),
                    ..Observed::default()
                },
                Step::Absent,
            ),
            (
                "someone else's CronJob of that name: never overwritten",
                Some("h1"),
                Observed {
                    cron_job: foreign.clone(),
                    ..Observed::default()
                },
                Step::Foreign { kind: "CronJob" },
            ),
            (
                "someone else's Role of that name: never overwritten",
                Some("h1"),
                Observed {
                    role: foreign,
                    ..all("h1")
                },
                Step::Foreign { kind: "Role" },
            ),
        ];
        for (case, hash, observed, expected) in cases {
            assert_eq!(plan(hash, &observed), expected, "{case}");
        }
    }
}
