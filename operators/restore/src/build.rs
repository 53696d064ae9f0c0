//! The seed member's objects (pure). The seed is a member exactly as the cluster operator builds
//! one (the same builder: same labels, owner, Services, flags), so it adopts the seed as its own
//! member; the restore adds one init container that fills the data directory from the snapshot.

use etcd_api::restore::RESTORING_ANNOTATION;
use etcd_api::validation::{EtcdVersion, validate_version};
use etcd_api::{EtcdCluster, EtcdRestore, common::s3_secret_keys};
use etcd_member::build::{
    self, BuildError, DATA_DIR, DATA_MOUNT, DATA_VOLUME, InitialState, MemberPod,
};
use etcd_member::naming::ClusterName;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, LocalObjectReference, PersistentVolumeClaim,
    Pod, PodReadinessGate, SecretKeySelector, SecurityContext, VolumeMount,
};
use kube::ResourceExt;
use kube::api::ObjectMeta;

use crate::plan::Snapshot;

/// Name of the seed's preparing init container.
pub const INIT_CONTAINER: &str = "prepare-seed";
/// The seed Pod's readiness gate. The seed carries the member labels the client Service selects
/// (the cluster operator must adopt it as its own member), so a Ready seed would be served next
/// to old members that are still running. The gate keeps it not Ready until the restore opens it
/// ([`admit_patch`]), after every old member Pod is gone (issue 17, defect 4). The headless peer
/// Service publishes not-ready Pods, so the seed still resolves and the restore still reaches it.
pub const SEED_ADMITTED_CONDITION: &str = "etcd.operator.rs/seed-admitted";
/// Annotation on the seed Pod and PVC: the EtcdRestore that built them.
pub const RESTORED_BY_ANNOTATION: &str = "etcd.operator.rs/restored-by";
/// Where the operator image keeps the default `etcdutl` (the Dockerfile copies it from the etcd
/// image of the default version). Each supported minor's own is beside it: [`etcdutl_for`].
pub const ETCDUTL: &str = "/usr/local/bin/etcdutl";

/// The etcdutl that restores a snapshot for a cluster of `version`: the one of its minor
/// (`/usr/local/bin/etcdutl-3.6`), so the data directory is written as that etcd writes it.
/// etcd 3.4 has no etcdutl; 3.5's restores for it (operators/restore/tests/seed.rs).
pub fn etcdutl_for(version: EtcdVersion) -> String {
    let minor = if (version.major, version.minor) < (3, 5) {
        (3, 5)
    } else {
        (version.major, version.minor)
    };
    format!("{ETCDUTL}-{}.{}", minor.0, minor.1)
}
/// The operator binary in the operator image.
pub const RESTORE_BINARY: &str = "/usr/local/bin/etcd-restore-operator";

/// Why the seed cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SeedBuildError {
    /// The cluster's objects cannot be named (no namespace, no UID).
    #[error(transparent)]
    Cluster(#[from] BuildError),
    /// `spec.version` of the cluster is not one the operator runs.
    #[error("spec.version of EtcdCluster {cluster}: {message}")]
    Version {
        /// The cluster.
        cluster: String,
        /// What is wrong.
        message: String,
    },
}

/// The new cluster token of the restored cluster: `<cluster>-restore-<EtcdRestore UID>`. etcd
/// derives the cluster ID from it, so the restored cluster can never be mistaken for the old one.
pub fn restore_token(cluster: &str, restore: &EtcdRestore) -> String {
    format!(
        "{cluster}-restore-{}",
        restore.metadata.uid.as_deref().unwrap_or("unknown")
    )
}

/// The seed's PVC: the cluster operator's member PVC, marked as built by this restore.
pub fn seed_pvc(
    cluster: &EtcdCluster,
    restore: &EtcdRestore,
    seed: &str,
) -> Result<PersistentVolumeClaim, SeedBuildError> {
    let mut pvc = build::member_pvc(cluster, seed)?;
    mark(&mut pvc.metadata, restore);
    Ok(pvc)
}

/// The seed's Pod: the cluster operator's member Pod of a one-member cluster, plus the init
/// container that prepares its data directory from `snapshot`. It listens as the spec says,
/// and with `switch_port` (the old members served it: a cluster switched from plaintext to TLS)
/// also serves `https://` clients on 2378, so clients that use that port keep working after the
/// restore: the cluster operator grows the other members and the client Service from it alike.
/// Plaintext clients of a switch not finished are not served (the seed speaks TLS on 2379, where
/// the restore operator reaches it).
pub fn seed_pod(
    cluster: &EtcdCluster,
    restore: &EtcdRestore,
    seed: &str,
    snapshot: &Snapshot,
    image: &str,
    switch_port: bool,
) -> Result<Pod, SeedBuildError> {
    let names = build::cluster_name(cluster)?;
    let version = version_of(cluster)?;
    let initial_cluster = vec![(seed.to_owned(), names.peer_url(seed))];
    let mut listen = build::spec_listeners(cluster);
    if switch_port && cluster.client_tls() {
        listen.client = build::Listen::HttpsWithSwitchPort;
    }
    let mut pod = build::member_pod_listening(
        cluster,
        &MemberPod {
            member: seed,
            version,
            initial_cluster: &initial_cluster,
            state: InitialState::New,
            // The snapshot's size is not known here; the cluster operator's later Pods of the
            // restored members see the seed's database.
            largest_db_bytes: 0,
            snapshot_before_upgrade: false,
        },
        listen,
    )?;
    mark(&mut pod.metadata, restore);
    let init = init_container(&names, restore, seed, snapshot, image, version);
    if let Some(spec) = pod.spec.as_mut() {
        spec.init_containers = Some(vec![init]);
        spec.readiness_gates = Some(vec![PodReadinessGate {
            condition_type: SEED_ADMITTED_CONDITION.to_owned(),
        }]);
    }
    Ok(pod)
}

/// Who the seed Pod runs as and how its image is pulled: `service_account` (e.g. one annotated
/// for IRSA or GKE/Azure workload identity, so `prepare-seed` reads S3 without a credentials
/// Secret) and the operator image's pull secrets. Both must exist in the cluster's namespace.
/// The service account token stays unmounted (the member Pod's setting): identity webhooks
/// project their own token, and nothing in the seed talks to the Kubernetes API.
pub fn set_seed_identity(pod: &mut Pod, service_account: Option<&str>, pull_secrets: &[String]) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if let Some(account) = service_account.filter(|a| !a.is_empty()) {
        spec.service_account_name = Some(account.to_owned());
    }
    if !pull_secrets.is_empty() {
        spec.image_pull_secrets = Some(
            pull_secrets
                .iter()
                .map(|name| LocalObjectReference { name: name.clone() })
                .collect(),
        );
    }
}

/// The strategic merge patch of the seed Pod's status that opens its readiness gate (Pod
/// conditions merge by type: the kubelet's own conditions stay).
pub fn admit_patch(now: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({"status": {"conditions": [{
        "type": SEED_ADMITTED_CONDITION,
        "status": "True",
        "reason": "OldMembersGone",
        "message": "every old member Pod is gone; the restore handed the cluster over",
        "lastTransitionTime": now,
    }]}})
}

/// Whether the seed Pod may be Ready: it has no readiness gate of ours (the cluster operator
/// recreated it), or the gate is open.
pub fn is_admitted(pod: &Pod) -> bool {
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| {
            g.iter()
                .any(|g| g.condition_type == SEED_ADMITTED_CONDITION)
        });
    let open = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == SEED_ADMITTED_CONDITION && c.status == "True")
        });
    !gated || open
}

fn version_of(cluster: &EtcdCluster) -> Result<EtcdVersion, SeedBuildError> {
    validate_version(&cluster.spec.version).map_err(|e| SeedBuildError::Version {
        cluster: cluster.name_any(),
        message: e.to_string(),
    })
}

/// The merge patch that holds (`Some(restore)`) or releases (`None`) the cluster. With the
/// resourceVersion the restore observed, the API server applies it only if the cluster did not
/// change since (409 otherwise, retried after a new observation): two restores that both saw
/// the cluster free cannot both hold it (issue 17).
pub fn hold_patch(holder: Option<&str>, resource_version: Option<&str>) -> serde_json::Value {
    let mut patch =
        serde_json::json!({"metadata": {"annotations": {RESTORING_ANNOTATION: holder}}});
    if let Some(version) = resource_version {
        patch["metadata"]["resourceVersion"] = serde_json::json!(version);
    }
    patch
}

/// Whether a Pod or PVC named like our seed is ours: marked by this restore. An unmarked one is
/// ours only when `unmarked_is_ours`: after the hand-over, for the Pod (the cluster operator
/// recreates the seed's Pod without the mark). Before it, an unmarked object is another's: a
/// volume retained from an earlier cluster of the same name must never be taken for a prepared
/// seed, nor deleted as one (issue 17, defects 9 and 11).
pub fn is_own_seed(meta: &ObjectMeta, restore: &str, unmarked_is_ours: bool) -> bool {
    match meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(RESTORED_BY_ANNOTATION))
    {
        Some(by) => by == restore,
        None => unmarked_is_ours,
    }
}

fn mark(meta: &mut ObjectMeta, restore: &EtcdRestore) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(RESTORED_BY_ANNOTATION.to_owned(), restore.name_any());
}

/// The init container: `etcd-restore-operator prepare-seed` in the operator image.
fn init_container(
    names: &ClusterName,
    restore: &EtcdRestore,
    seed: &str,
    snapshot: &Snapshot,
    image: &str,
    version: EtcdVersion,
) -> Container {
    let connection = &snapshot.connection;
    let peer_url = names.peer_url(seed);
    let mut args = vec![
        "prepare-seed".to_owned(),
        "--log-format=text".to_owned(),
        format!("--bucket={}", connection.bucket),
        format!("--key={}", snapshot.key),
        format!("--region={}", connection.region_or_default()),
        format!("--name={seed}"),
        format!("--initial-cluster={seed}={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!(
            "--initial-cluster-token={}",
            restore_token(&names.name, restore)
        ),
        format!("--data-dir={DATA_DIR}"),
        format!("--etcdutl={}", etcdutl_for(version)),
    ];
    if let Some(endpoint) = &connection.endpoint {
        args.push(format!("--endpoint={endpoint}"));
    }
    if connection.force_path_style {
        args.push("--force-path-style".to_owned());
    }
    if let Some(sha256) = &snapshot.sha256 {
        args.push(format!("--sha256={sha256}"));
    }
    let env = connection.credentials_secret_ref.as_ref().map(|secret| {
        [
            (s3_secret_keys::ACCESS_KEY_ID, false),
            (s3_secret_keys::SECRET_ACCESS_KEY, false),
            (s3_secret_keys::SESSION_TOKEN, true),
        ]
        .into_iter()
        .map(|(key, optional)| EnvVar {
            name: key.to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret.name.clone(),
                    key: key.to_owned(),
                    optional: optional.then_some(true),
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        })
        .collect()
    });
    Container {
        name: INIT_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        command: Some(vec![RESTORE_BINARY.to_owned()]),
        args: Some(args),
        env,
        volume_mounts: Some(vec![VolumeMount {
            name: DATA_VOLUME.to_owned(),
            mount_path: DATA_MOUNT.to_owned(),
            ..VolumeMount::default()
        }]),
        // On a real cluster the reason reaches the Pod status even when the log is gone.
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        security_context: Some(seed_writer_security()),
        ..Container::default()
    }
}

/// The init container writes the data directory that etcd then serves, so it runs as etcd's
/// user: no user or group of its own, the Pod's (the member Pod's security context: uid and
/// gid 65532 with `fsGroup` 65532 by default, so the volume is writable; whatever
/// `spec.pod.securityContext` sets otherwise, root included). Files it wrote as another user
/// (`etcdutl snapshot restore` makes 0700 directories) would be unreadable to etcd. Every
/// capability dropped, no escalation, a read-only root file system.
fn seed_writer_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

/// The EtcdCluster a restore creates when `spec.clusterName` does not exist: `spec.clusterSpec`,
/// held by the restore from its first moment, so the cluster operator never bootstraps it.
pub fn new_cluster(restore: &EtcdRestore, namespace: &str) -> Option<EtcdCluster> {
    let spec = restore.spec.cluster_spec.clone()?;
    let mut cluster = EtcdCluster::new(&restore.spec.cluster_name, spec);
    cluster.metadata.namespace = Some(namespace.to_owned());
    cluster.metadata.annotations = Some(
        [(RESTORING_ANNOTATION.to_owned(), restore.name_any())]
            .into_iter()
            .collect(),
    );
    Some(cluster)
}

/// The merge patch that marks an old member PVC retained by `restore`: the label, and no owner
/// reference (`null` removes the field), so the garbage collector never deletes it with the
/// EtcdCluster, whatever its `reclaimPolicy`. Retained means retained.
pub fn retain_patch(restore: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {
        "labels": {etcd_api::restore::RETAINED_BY_RESTORE_LABEL: restore},
        "ownerReferences": null,
    }})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use etcd_api::{EtcdClusterSpec, LocalObjectReference, RestoreSource, S3Connection};

    fn cluster() -> EtcdCluster {
        let mut c = EtcdCluster::new("main", EtcdClusterSpec::new(3, "3.5.35"));
        c.metadata.namespace = Some("db".into());
        c.metadata.uid = Some("c-uid".into());
        c
    }

    fn restore() -> EtcdRestore {
        let mut r = EtcdRestore::new(
            "r1",
            etcd_api::EtcdRestoreSpec {
                cluster_name: "main".into(),
                source: RestoreSource::default(),
                cluster_spec: None,
                force: false,
                timeout_seconds: None,
            },
        );
        r.metadata.uid = Some("r-uid".into());
        r
    }

    fn snapshot(secret: Option<&str>) -> Snapshot {
        Snapshot {
            connection: S3Connection {
                bucket: "backups".into(),
                endpoint: Some("http://s3:8333".into()),
                region: None,
                force_path_style: true,
                credentials_secret_ref: secret
                    .map(|name| LocalObjectReference { name: name.into() }),
            },
            key: "main/snap.db".into(),
            sha256: Some("ab".repeat(32)),
            revision: Some(40),
            etcd_version: None,
        }
    }

    #[test]
    fn each_minor_restores_with_its_own_etcdutl() {
        let table = [
            ("3.4.23", "/usr/local/bin/etcdutl-3.5"),
            ("3.5.35", "/usr/local/bin/etcdutl-3.5"),
            ("3.6.16", "/usr/local/bin/etcdutl-3.6"),
            ("3.7.3", "/usr/local/bin/etcdutl-3.7"),
        ];
        for (version, etcdutl) in table {
            let version = EtcdVersion::parse(version).unwrap();
            assert_eq!(etcdutl_for(version), etcdutl, "{version}");
        }
    }

    /// Issue 19: a cluster switched from plaintext to TLS keeps serving TLS clients on 2378 after
    /// the switch; its restore must not take that port away. The old members' Pods (still there
    /// when the seed is built, without `force`) show it; the seed then listens there too, which
    /// the cluster operator carries on to the members it grows and to the client Service.
    #[test]
    fn a_restore_keeps_2378_when_the_old_members_served_it() {
        let mut tls = cluster();
        tls.spec.tls = serde_json::from_value(serde_json::json!({"client": {}})).unwrap();
        let old_pod = |listen: build::Listeners| {
            let member = "main-0";
            let initial = vec![(
                member.to_owned(),
                "http://main-0.main.db.svc:2380".to_owned(),
            )];
            build::member_pod_listening(
                &tls,
                &MemberPod {
                    member,
                    version: EtcdVersion::parse("3.5.35").unwrap(),
                    initial_cluster: &initial,
                    state: InitialState::New,
                    largest_db_bytes: 0,
                    snapshot_before_upgrade: false,
                },
                listen,
            )
            .unwrap()
        };
        let observed = |pods: Vec<(&str, Pod)>| {
            let kube = etcd_member::observe::KubeObservation {
                pods: pods
                    .into_iter()
                    .map(|(name, pod)| (name.to_owned(), pod))
                    .collect(),
                pvcs: Default::default(),
                expandable_classes: Default::default(),
            };
            crate::observe::cluster_state(&tls, &kube, Some("main-3")).old_pods_serve_switch_port
        };
        let listening = |client| build::Listeners {
            peer: build::Listen::Http,
            client,
        };
        // After the switch, plaintext dropped (2379 and 2378 TLS), or during it (2378 TLS next
        // to plain 2379): served. A cluster created with TLS, or the seed's own Pod: not.
        assert!(observed(vec![(
            "main-0",
            old_pod(listening(build::Listen::HttpsWithSwitchPort))
        )]));
        assert!(observed(vec![(
            "main-0",
            old_pod(listening(build::Listen::Dual))
        )]));
        assert!(!observed(vec![(
            "main-0",
            old_pod(listening(build::Listen::Https))
        )]));
        assert!(!observed(vec![(
            "main-3",
            old_pod(listening(build::Listen::HttpsWithSwitchPort))
        )]));
        assert!(!observed(vec![]));

        let client_urls = |pod: &Pod| -> Vec<String> {
            pod.spec.as_ref().unwrap().containers[0]
                .args
                .clone()
                .unwrap()
                .into_iter()
                .filter(|a| a.contains("-client-urls="))
                .collect()
        };
        let seed = |switch_port| {
            seed_pod(
                &tls,
                &restore(),
                "main-3",
                &snapshot(None),
                "op",
                switch_port,
            )
            .unwrap()
        };
        assert_eq!(
            client_urls(&seed(true)),
            [
                "--listen-client-urls=https://0.0.0.0:2379,https://0.0.0.0:2378",
                "--advertise-client-urls=https://main-3.main.db.svc:2379,https://main-3.main.db.svc:2378",
            ]
        );
        assert_eq!(
            client_urls(&seed(false)),
            [
                "--listen-client-urls=https://0.0.0.0:2379",
                "--advertise-client-urls=https://main-3.main.db.svc:2379",
            ]
        );
        // Without client TLS there is no such port to keep.
        let plain = seed_pod(
            &cluster(),
            &restore(),
            "main-3",
            &snapshot(None),
            "op",
            true,
        )
        .unwrap();
        assert!(!client_urls(&plain).concat().contains("2378"));
    }

    #[test]
    fn the_seed_is_a_one_member_cluster_member_with_a_preparing_init_container() {
        let pod = seed_pod(
            &cluster(),
            &restore(),
            "main-3",
            &snapshot(Some("s3")),
            "op:1",
            false,
        )
        .unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("main-3"));
        let spec = pod.spec.clone().unwrap();
        let etcd_args = spec.containers[0].args.clone().unwrap();
        let peer = "http://main-3.main.db.svc:2380";
        assert!(etcd_args.contains(&format!("--initial-cluster=main-3={peer}")));
        let init = &spec.init_containers.unwrap()[0];
        assert_eq!(init.image.as_deref(), Some("op:1"));
        let args = init.args.clone().unwrap();
        for expected in [
            "prepare-seed".to_owned(),
            "--bucket=backups".to_owned(),
            "--key=main/snap.db".to_owned(),
            "--region=us-east-1".to_owned(),
            format!("--initial-cluster=main-3={peer}"),
            "--initial-cluster-token=main-restore-r-uid".to_owned(),
            format!("--data-dir={DATA_DIR}"),
            "--endpoint=http://s3:8333".to_owned(),
            "--force-path-style".to_owned(),
            format!("--sha256={}", "ab".repeat(32)),
            // The etcdutl of the cluster's minor (3.5.35 here).
            "--etcdutl=/usr/local/bin/etcdutl-3.5".to_owned(),
        ] {
            assert!(args.contains(&expected), "{expected} not in {args:?}");
        }
        // Credentials from the Secret, the session token optional.
        let env = init.env.clone().unwrap();
        let names: Vec<_> = env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN"
            ]
        );
        let token = env[2].value_from.clone().unwrap().secret_key_ref.unwrap();
        assert_eq!((token.name.as_str(), token.optional), ("s3", Some(true)));
        // The same data volume as etcd's.
        assert_eq!(
            init.volume_mounts.clone().unwrap()[0].mount_path,
            DATA_MOUNT
        );
        // It writes as etcd's user (the Pod's: non-root 65532 by default), with nothing else
        // allowed: files another user wrote would be unreadable to etcd.
        let sc = init.security_context.clone().unwrap();
        assert_eq!(
            (
                sc.run_as_user,
                sc.run_as_group,
                sc.run_as_non_root,
                sc.allow_privilege_escalation
            ),
            (None, None, None, Some(false))
        );
        let pod_sc = spec.security_context.clone().unwrap();
        assert_eq!(
            (pod_sc.run_as_user, pod_sc.fs_group, pod_sc.run_as_non_root),
            (Some(65532), Some(65532), Some(true))
        );
        let etcd_sc = spec.containers[0].security_context.clone().unwrap();
        assert_eq!((etcd_sc.run_as_user, etcd_sc.run_as_group), (None, None));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(
            pod.metadata.annotations.unwrap()[RESTORED_BY_ANNOTATION],
            "r1"
        );
    }

    /// Workload identity and private registries: the configured ServiceAccount and pull
    /// secrets reach the seed Pod; without them the Pod is the member Pod's (namespace default).
    #[test]
    fn the_seed_pod_runs_as_the_configured_account_with_pull_secrets() {
        let plain = seed_pod(
            &cluster(),
            &restore(),
            "main-0",
            &snapshot(None),
            "op",
            false,
        )
        .unwrap();
        let mut pod = plain.clone();
        set_seed_identity(&mut pod, None, &[]);
        assert_eq!(pod, plain, "nothing configured, nothing changed");
        set_seed_identity(
            &mut pod,
            Some("etcd-restore-irsa"),
            &["regcred".to_owned(), "mirror".to_owned()],
        );
        let spec = pod.spec.unwrap();
        assert_eq!(
            spec.service_account_name.as_deref(),
            Some("etcd-restore-irsa")
        );
        let secrets: Vec<String> = spec
            .image_pull_secrets
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(secrets, ["regcred", "mirror"]);
        assert_eq!(spec.automount_service_account_token, Some(false));
    }

    #[test]
    fn ambient_credentials_need_no_env_and_a_bad_version_is_named() {
        let pod = seed_pod(
            &cluster(),
            &restore(),
            "main-0",
            &snapshot(None),
            "op",
            false,
        )
        .unwrap();
        assert!(pod.spec.unwrap().init_containers.unwrap()[0].env.is_none());
        let mut bad = cluster();
        bad.spec.version = "3.9".into();
        let e = seed_pod(&bad, &restore(), "main-0", &snapshot(None), "op", false).unwrap_err();
        assert!(e.to_string().contains("spec.version"), "{e}");
    }

    /// Issue 17 (defect 4): the seed carries the member labels the client Service selects, so
    /// it is kept not Ready by a readiness gate until the restore opens it.
    #[test]
    fn the_seed_is_not_ready_until_admitted() {
        let mut pod = seed_pod(
            &cluster(),
            &restore(),
            "main-0",
            &snapshot(None),
            "op",
            false,
        )
        .unwrap();
        let gates = pod.spec.as_ref().unwrap().readiness_gates.clone().unwrap();
        assert_eq!(gates[0].condition_type, SEED_ADMITTED_CONDITION);
        assert!(!is_admitted(&pod));
        // The patch the executor sends, as the API server merges it into the conditions.
        let patch = admit_patch(&serde_json::json!("2026-11-25T20:00:00Z"));
        let condition: k8s_openapi::api::core::v1::PodCondition =
            serde_json::from_value(patch["status"]["conditions"][0].clone()).unwrap();
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(vec![condition]),
            ..Default::default()
        });
        assert!(is_admitted(&pod));
        // A member Pod without the gate (the cluster operator's own) is never held back.
        pod.spec.as_mut().unwrap().readiness_gates = None;
        pod.status = None;
        assert!(is_admitted(&pod));
    }

    #[test]
    fn a_new_cluster_is_held_from_its_first_moment() {
        let mut r = restore();
        assert!(new_cluster(&r, "db").is_none());
        r.spec.cluster_spec = Some(cluster().spec);
        let c = new_cluster(&r, "db").unwrap();
        assert_eq!(c.metadata.annotations.unwrap()[RESTORING_ANNOTATION], "r1");
        assert_eq!(c.metadata.namespace.as_deref(), Some("db"));
    }

    /// Issue 17 (defect 13): a retained PVC keeps no owner reference, or the garbage collector
    /// deletes it with the EtcdCluster under `reclaimPolicy: Delete`: retained means retained.
    #[test]
    fn retaining_a_pvc_drops_its_owner_reference() {
        assert_eq!(
            retain_patch("r1"),
            serde_json::json!({"metadata": {
                "labels": {etcd_api::restore::RETAINED_BY_RESTORE_LABEL: "r1"},
                "ownerReferences": null,
            }})
        );
    }

    /// Issue 17 (defect 11): two EtcdRestores of one cluster must not both hold it. The hold is
    /// a merge patch carrying the resourceVersion the restore observed: the API server refuses
    /// it (409) if anything changed the cluster since, e.g. another restore's hold.
    #[test]
    fn the_hold_is_conditional_on_the_observed_cluster() {
        assert_eq!(
            hold_patch(Some("r1"), Some("42")),
            serde_json::json!({"metadata": {
                "annotations": {RESTORING_ANNOTATION: "r1"},
                "resourceVersion": "42",
            }})
        );
        assert_eq!(
            hold_patch(None, Some("43")),
            serde_json::json!({"metadata": {
                "annotations": {RESTORING_ANNOTATION: null},
                "resourceVersion": "43",
            }})
        );
    }

    /// Issue 17 (defect 11): a restore that lost the race for the hold cleans up only its own
    /// seed: a Pod or PVC with the seed's name that another restore created is not its own.
    /// (One without the mark is: the cluster operator recreates the seed's Pod unmarked.)
    #[test]
    fn another_restores_seed_is_not_ours() {
        let marked = |by: Option<&str>| ObjectMeta {
            annotations: by.map(|by| [(RESTORED_BY_ANNOTATION.to_owned(), by.to_owned())].into()),
            ..ObjectMeta::default()
        };
        assert!(is_own_seed(&marked(Some("r1")), "r1", false));
        assert!(is_own_seed(&marked(None), "r1", true));
        assert!(!is_own_seed(&marked(Some("r2")), "r1", true));
        // Issue 17 (defect 9): before the hand-over an unmarked object (a retained volume of
        // an earlier cluster of the same name) is not ours.
        assert!(!is_own_seed(&marked(None), "r1", false));
    }
}
