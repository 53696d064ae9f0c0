//! Builder tests: names, labels, flags, owner references and determinism of every object.

use etcd_api::validation::EtcdVersion;
use etcd_api::{
    AutoCompactionMode, EtcdClusterSpec, EtcdOptions, PodPolicy, ReclaimPolicy, StorageSpec,
};
use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, ResourceRequirements, SecurityContext, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;

const UID: &str = "0b5e-11";

fn v35() -> EtcdVersion {
    EtcdVersion::parse("3.5.35").unwrap()
}

fn spec() -> EtcdClusterSpec {
    EtcdClusterSpec::new(3, "3.5.35")
}

fn etcd(spec: EtcdClusterSpec) -> EtcdCluster {
    let mut cluster = EtcdCluster::new("main", spec);
    cluster.metadata.namespace = Some("db".into());
    cluster.metadata.uid = Some(UID.into());
    cluster
}

fn initial(members: &[&str]) -> Vec<(String, String)> {
    let names = ClusterName::new("db", "main");
    members
        .iter()
        .map(|m| (m.to_string(), names.peer_url(m)))
        .collect()
}

fn pod_of(cluster: &EtcdCluster, member: &str, state: InitialState) -> Pod {
    let initial_cluster = initial(&["main-0", member]);
    let initial_cluster = if member == "main-0" {
        &initial_cluster[..1]
    } else {
        &initial_cluster[..]
    };
    member_pod(
        cluster,
        &MemberPod {
            member,
            version: v35(),
            initial_cluster,
            state,
            largest_db_bytes: 0,
            snapshot_before_upgrade: false,
        },
    )
    .unwrap()
}

fn args(pod: &Pod) -> Vec<String> {
    pod.spec.as_ref().unwrap().containers[0]
        .args
        .clone()
        .unwrap()
}

fn owner_ref() -> OwnerReference {
    OwnerReference {
        api_version: "etcd.operator.rs/v1alpha1".into(),
        kind: "EtcdCluster".into(),
        name: "main".into(),
        uid: UID.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn cluster_label_set() -> BTreeMap<String, String> {
    labels(&[
        ("app.kubernetes.io/instance", "main"),
        ("app.kubernetes.io/managed-by", "etcd-cluster-operator"),
        ("app.kubernetes.io/name", "etcd"),
        ("etcd.operator.rs/cluster", "main"),
    ])
}

#[test]
fn labels_selector_and_token() {
    let cluster = etcd(spec());
    assert_eq!(cluster_labels(&cluster), cluster_label_set());
    let mut member = cluster_label_set();
    member.insert("etcd.operator.rs/member".into(), "main-2".into());
    assert_eq!(member_labels(&cluster, "main-2"), member);
    assert_eq!(
        selector(&cluster),
        "app.kubernetes.io/instance=main,app.kubernetes.io/managed-by=etcd-cluster-operator,\
         app.kubernetes.io/name=etcd,etcd.operator.rs/cluster=main"
    );
    assert_eq!(cluster_token(&cluster).unwrap(), "main-0b5e-11");
}

#[test]
fn objects_need_namespace_and_uid() {
    let mut no_uid = etcd(spec());
    no_uid.metadata.uid = None;
    let missing_uid = BuildError::MissingUid {
        cluster: "main".into(),
    };
    assert_eq!(cluster_token(&no_uid), Err(missing_uid.clone()));
    assert_eq!(peer_service(&no_uid).unwrap_err(), missing_uid);
    assert_eq!(
        member_pvc(&no_uid, "main-0").unwrap_err().reason(),
        "MissingUid"
    );

    let mut no_ns = etcd(spec());
    no_ns.metadata.namespace = None;
    let missing_ns = BuildError::MissingNamespace {
        cluster: "main".into(),
    };
    assert_eq!(client_service(&no_ns, false).unwrap_err(), missing_ns);
    assert_eq!(pod_disruption_budget(&no_ns, 3).unwrap_err(), missing_ns);
    assert_eq!(missing_ns.reason(), "MissingNamespace");

    let mut no_name = etcd(spec());
    no_name.metadata.name = None;
    assert_eq!(cluster_name(&no_name), Err(BuildError::MissingName));
}

#[test]
fn seed_pod_has_every_flag_name_and_dns_identity() {
    let cluster = etcd(spec());
    let pod = pod_of(&cluster, "main-0", InitialState::New);
    assert_eq!(pod.metadata.name.as_deref(), Some("main-0"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("db"));
    assert_eq!(pod.metadata.owner_references, Some(vec![owner_ref()]));
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("main-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("main"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.enable_service_links, Some(false));
    let container = &spec.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("gcr.io/etcd-development/etcd:v3.5.35")
    );
    assert_eq!(
        container.command,
        Some(vec!["/usr/local/bin/etcd".to_string()])
    );
    assert_eq!(
        args(&pod),
        [
            "--name=main-0",
            "--data-dir=/var/lib/etcd/data",
            "--listen-peer-urls=http://0.0.0.0:2380",
            "--listen-client-urls=http://0.0.0.0:2379",
            "--listen-metrics-urls=http://0.0.0.0:2381",
            "--initial-advertise-peer-urls=http://main-0.main.db.svc:2380",
            "--advertise-client-urls=http://main-0.main.db.svc:2379",
            "--initial-cluster=main-0=http://main-0.main.db.svc:2380",
            "--initial-cluster-state=new",
            "--initial-cluster-token=main-0b5e-11",
            // From the default 1Gi volume (the_backend_quota_defaults_from_the_volume_size...).
            "--quota-backend-bytes=335544320",
        ]
    );
    let ports: Vec<(Option<&str>, i32)> = container
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| (p.name.as_deref(), p.container_port))
        .collect();
    assert_eq!(
        ports,
        [
            (Some("client"), 2379),
            (Some("peer"), 2380),
            (Some("metrics"), 2381)
        ]
    );
    let mount = &container.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(mount.mount_path, DATA_MOUNT);
    let volume = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(mount.name, volume.name);
    assert_eq!(
        volume.persistent_volume_claim.as_ref().unwrap().claim_name,
        "main-0"
    );
    assert!(DATA_DIR.starts_with(&format!("{DATA_MOUNT}/")));
}

#[test]
fn probes_readiness_only() {
    let pod = pod_of(&etcd(spec()), "main-0", InitialState::New);
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert!(container.liveness_probe.is_none());
    assert!(container.startup_probe.is_none());
    let readiness = container.readiness_probe.as_ref().unwrap();
    let http = readiness.http_get.as_ref().unwrap();
    // Issue 17: a member with a NOSPACE alarm still serves reads; plain /health fails on every
    // member (alarms are cluster-wide), emptying the client Service. etcd 3.4.23 and 3.5.1 both
    // answer /health?exclude=NOSPACE with 200 under a NOSPACE alarm (measured), CORRUPT still
    // fails it.
    assert_eq!(http.path.as_deref(), Some("/health?exclude=NOSPACE"));
    assert_eq!(http.port, IntOrString::Int(2379));
    assert_eq!(readiness.period_seconds, Some(5));
    assert_eq!(readiness.failure_threshold, Some(3));
}

/// Issue 21: a member being defragmented is drained from the client Service through a
/// readiness gate the operator closes and opens (`plan/maintenance.rs`).
#[test]
fn member_pods_carry_the_serving_readiness_gate() {
    let pod = pod_of(&etcd(spec()), "main-0", InitialState::New);
    let gates = pod.spec.unwrap().readiness_gates.unwrap();
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0].condition_type, SERVING_CONDITION);
    let closed = serving_patch(false, &"2026-11-26T10:00:00Z".into());
    let condition = &closed["status"]["conditions"][0];
    assert_eq!(condition["type"], SERVING_CONDITION);
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "Defragmenting");
    let open = serving_patch(true, &"2026-11-26T10:00:01Z".into());
    assert_eq!(open["status"]["conditions"][0]["status"], "True");
}

#[test]
fn joining_member_lists_the_cluster_and_joins_existing() {
    let pod = pod_of(&etcd(spec()), "main-1", InitialState::Existing);
    let args = args(&pod);
    assert!(args.contains(
        &"--initial-cluster=main-0=http://main-0.main.db.svc:2380,main-1=http://main-1.main.db.svc:2380"
            .to_string()
    ));
    assert!(args.contains(&"--initial-cluster-state=existing".to_string()));
    assert!(args.contains(&"--name=main-1".to_string()));
}

#[test]
fn member_missing_from_its_initial_cluster_is_refused() {
    let cluster = etcd(spec());
    let others = initial(&["main-0"]);
    let wrong_url = vec![("main-1".to_string(), "http://10.0.0.1:2380".to_string())];
    for list in [others, wrong_url, vec![]] {
        let error = member_pod(
            &cluster,
            &MemberPod {
                member: "main-1",
                version: v35(),
                initial_cluster: &list,
                state: InitialState::Existing,
                largest_db_bytes: 0,
                snapshot_before_upgrade: false,
            },
        )
        .unwrap_err();
        assert_eq!(
            error,
            BuildError::MemberNotInInitialCluster {
                member: "main-1".into(),
                peer_url: "http://main-1.main.db.svc:2380".into(),
            }
        );
    }
}

#[test]
fn etcd_options_become_flags_and_unset_ones_do_not() {
    let mut all = spec();
    all.etcd_options = Some(EtcdOptions {
        quota_backend_bytes: Some(4_294_967_296),
        auto_compaction_mode: Some(AutoCompactionMode::Periodic),
        auto_compaction_retention: Some("1h".into()),
        snapshot_count: Some(10_000),
        heartbeat_interval_ms: Some(200),
        election_timeout_ms: Some(2000),
    });
    let flags = args(&pod_of(&etcd(all), "main-0", InitialState::New));
    assert_eq!(
        flags[10..],
        [
            "--quota-backend-bytes=4294967296",
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=1h",
            "--snapshot-count=10000",
            "--heartbeat-interval=200",
            "--election-timeout=2000",
        ]
    );

    let mut some = spec();
    some.etcd_options = Some(EtcdOptions {
        auto_compaction_mode: Some(AutoCompactionMode::Revision),
        ..EtcdOptions::default()
    });
    let flags = args(&pod_of(&etcd(some), "main-0", InitialState::New));
    // Without quotaBackendBytes the quota comes from the volume size (1Gi by default).
    assert_eq!(
        flags[10..],
        [
            "--quota-backend-bytes=335544320",
            "--auto-compaction-mode=revision"
        ]
    );

    let mut empty = spec();
    empty.etcd_options = Some(EtcdOptions::default());
    assert_eq!(
        args(&pod_of(&etcd(empty), "main-0", InitialState::New))[10..],
        ["--quota-backend-bytes=335544320"]
    );
}

#[test]
fn pod_policy_is_applied_and_our_labels_win() {
    let mut with_policy = spec();
    with_policy.repository = "quay.io/coreos/etcd".into();
    with_policy.pod = Some(PodPolicy {
        labels: labels(&[("team", "storage"), ("etcd.operator.rs/member", "evil")]),
        annotations: labels(&[("note", "x"), ("etcd.operator.rs/version", "0.0.0")]),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([("memory".into(), Quantity("1Gi".into()))])),
            ..ResourceRequirements::default()
        }),
        node_selector: labels(&[("disk", "ssd")]),
        affinity: Some(Default::default()),
        tolerations: vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Toleration::default()
        }],
        priority_class_name: Some("system-cluster-critical".into()),
        ..PodPolicy::default()
    });
    let hash = config_hash(&with_policy);
    let pod = pod_of(&etcd(with_policy), "main-1", InitialState::Existing);
    let meta = &pod.metadata;
    let mut expected = member_labels(&etcd(spec()), "main-1");
    expected.insert("team".into(), "storage".into());
    assert_eq!(meta.labels.as_ref(), Some(&expected));
    assert_eq!(
        meta.annotations.as_ref(),
        Some(&labels(&[
            ("etcd.operator.rs/config-hash", &hash),
            ("etcd.operator.rs/version", "3.5.35"),
            ("note", "x")
        ]))
    );
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_selector, Some(labels(&[("disk", "ssd")])));
    assert!(spec.affinity.is_some());
    assert_eq!(spec.tolerations.as_ref().unwrap().len(), 1);
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    let container = &spec.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("quay.io/coreos/etcd:v3.5.35")
    );
    assert!(container.resources.as_ref().unwrap().requests.is_some());
}

#[test]
fn without_pod_policy_nothing_optional_is_set() {
    let pod = pod_of(&etcd(spec()), "main-0", InitialState::New);
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_selector, None);
    assert_eq!(spec.affinity, None);
    assert_eq!(spec.tolerations, None);
    assert_eq!(spec.priority_class_name, None);
    assert_eq!(spec.containers[0].resources, None);
    assert_eq!(
        pod.metadata.annotations,
        Some(labels(&[
            (
                "etcd.operator.rs/config-hash",
                &config_hash(&super::tests::spec())
            ),
            ("etcd.operator.rs/version", "3.5.35")
        ]))
    );
}

#[test]
fn pvc_is_owned_only_when_the_policy_deletes() {
    let retained = member_pvc(&etcd(spec()), "main-2").unwrap();
    assert_eq!(retained.metadata.name.as_deref(), Some("main-2"));
    assert_eq!(retained.metadata.namespace.as_deref(), Some("db"));
    assert_eq!(retained.metadata.owner_references, None);
    assert_eq!(
        retained.metadata.labels,
        Some(member_labels(&etcd(spec()), "main-2"))
    );
    let pvc_spec = retained.spec.as_ref().unwrap();
    assert_eq!(
        pvc_spec.access_modes,
        Some(vec!["ReadWriteOnce".to_string()])
    );
    assert_eq!(
        pvc_spec.resources.as_ref().unwrap().requests,
        Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))]))
    );
    assert_eq!(pvc_spec.storage_class_name, None);

    let mut deleting = spec();
    deleting.storage = StorageSpec {
        size: Quantity("8Gi".into()),
        storage_class_name: Some("fast".into()),
        reclaim_policy: ReclaimPolicy::Delete,
    };
    let owned = member_pvc(&etcd(deleting), "main-2").unwrap();
    assert_eq!(owned.metadata.owner_references, Some(vec![owner_ref()]));
    let pvc_spec = owned.spec.as_ref().unwrap();
    assert_eq!(pvc_spec.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(
        pvc_spec.resources.as_ref().unwrap().requests,
        Some(BTreeMap::from([("storage".into(), Quantity("8Gi".into()))]))
    );
}

#[test]
fn services_and_budget() {
    let cluster = etcd(spec());
    let peer = peer_service(&cluster).unwrap();
    assert_eq!(peer.metadata.name.as_deref(), Some("main"));
    assert_eq!(peer.metadata.owner_references, Some(vec![owner_ref()]));
    let peer_spec = peer.spec.as_ref().unwrap();
    assert_eq!(peer_spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(peer_spec.publish_not_ready_addresses, Some(true));
    assert_eq!(peer_spec.selector, Some(cluster_label_set()));
    let ports: Vec<(Option<&str>, i32)> = peer_spec
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| (p.name.as_deref(), p.port))
        .collect();
    assert_eq!(ports, [(Some("peer"), 2380), (Some("client"), 2379)]);

    let client = client_service(&cluster, false).unwrap();
    assert_eq!(client.metadata.name.as_deref(), Some("main-client"));
    assert_eq!(client.metadata.owner_references, Some(vec![owner_ref()]));
    let client_spec = client.spec.as_ref().unwrap();
    assert_eq!(client_spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(client_spec.cluster_ip, None);
    assert_eq!(client_spec.publish_not_ready_addresses, None);
    assert_eq!(client_spec.selector, Some(cluster_label_set()));
    let port = &client_spec.ports.as_ref().unwrap()[..];
    assert_eq!(port.len(), 1);
    assert_eq!(
        (port[0].name.as_deref(), port[0].port),
        (Some("client"), 2379)
    );

    for (size, min) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)] {
        let voters = usize::try_from(size).unwrap();
        let pdb = pod_disruption_budget(&etcd(EtcdClusterSpec { size, ..spec() }), voters).unwrap();
        assert_eq!(pdb.metadata.name.as_deref(), Some("main"));
        assert_eq!(pdb.metadata.owner_references, Some(vec![owner_ref()]));
        let pdb_spec = pdb.spec.unwrap();
        assert_eq!(
            pdb_spec.min_available,
            Some(IntOrString::Int(min)),
            "size {size}"
        );
        assert_eq!(pdb_spec.max_unavailable, None);
        assert_eq!(
            pdb_spec.selector.unwrap().match_labels,
            Some(cluster_label_set())
        );
    }
}

#[test]
fn member_pods_select_into_services_and_budget() {
    let cluster = etcd(spec());
    let pod_labels = pod_of(&cluster, "main-0", InitialState::New)
        .metadata
        .labels
        .unwrap();
    let selected = |selector: &BTreeMap<String, String>| {
        selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v))
    };
    assert!(selected(
        &peer_service(&cluster)
            .unwrap()
            .spec
            .unwrap()
            .selector
            .unwrap()
    ));
    assert!(selected(
        &client_service(&cluster, false)
            .unwrap()
            .spec
            .unwrap()
            .selector
            .unwrap()
    ));
    let pdb = pod_disruption_budget(&cluster, 3).unwrap();
    assert!(selected(
        &pdb.spec.unwrap().selector.unwrap().match_labels.unwrap()
    ));
}

#[test]
fn member_of_pod_reads_only_our_member_label() {
    let cluster = etcd(spec());
    let ours = pod_of(&cluster, "main-1", InitialState::Existing);
    assert_eq!(member_of_pod(&cluster, &ours).as_deref(), Some("main-1"));

    let mut other_cluster = etcd(spec());
    other_cluster.metadata.name = Some("other".into());
    assert_eq!(member_of_pod(&other_cluster, &ours), None);

    let with = |pairs: &[(&str, &str)]| Pod {
        metadata: ObjectMeta {
            labels: Some(labels(pairs)),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    for pod in [
        Pod::default(),
        with(&[("etcd.operator.rs/cluster", "main")]),
        with(&[
            ("etcd.operator.rs/cluster", "main"),
            ("etcd.operator.rs/member", "main-x"),
        ]),
        with(&[("etcd.operator.rs/member", "main-1")]),
    ] {
        assert_eq!(member_of_pod(&cluster, &pod), None, "{pod:?}");
    }
}

#[test]
fn unchanged_spec_builds_identical_objects() {
    let mut full = spec();
    full.pod = Some(PodPolicy {
        labels: labels(&[("z", "1"), ("a", "2"), ("m", "3")]),
        annotations: labels(&[("z", "1"), ("a", "2")]),
        node_selector: labels(&[("b", "1"), ("a", "1")]),
        ..PodPolicy::default()
    });
    let cluster = etcd(full);
    let json = |cluster: &EtcdCluster| {
        [
            serde_json::to_string(&pod_of(cluster, "main-1", InitialState::Existing)).unwrap(),
            serde_json::to_string(&member_pvc(cluster, "main-1").unwrap()).unwrap(),
            serde_json::to_string(&peer_service(cluster).unwrap()).unwrap(),
            serde_json::to_string(&client_service(cluster, true).unwrap()).unwrap(),
            serde_json::to_string(&pod_disruption_budget(cluster, 3).unwrap()).unwrap(),
        ]
    };
    assert_eq!(json(&cluster), json(&cluster.clone()));
    // Labels serialise in key order whatever order they were written in.
    let pod = json(&cluster)[0].clone();
    let a = pod.find("\"a\":\"2\"").unwrap();
    let m = pod.find("\"m\":\"3\"").unwrap();
    assert!(a < m);
}

/// Issue 17: the budget keeps a quorum of the voters that exist, not of `spec.size`: shrinking
/// 5 → 3 removes one member at a time, and meanwhile five voters need three up.
#[test]
fn the_disruption_budget_follows_the_voters_that_exist() {
    for (size, voters, min) in [(3, 5, 3), (5, 3, 2), (3, 4, 3), (1, 1, 1)] {
        let pdb = pod_disruption_budget(&etcd(EtcdClusterSpec { size, ..spec() }), voters).unwrap();
        assert_eq!(
            pdb.spec.unwrap().min_available,
            Some(IntOrString::Int(min)),
            "size {size}, {voters} voters"
        );
    }
}

/// Issue 17: etcd's default backend quota (2 GiB) is larger than the default volume (1Gi): the
/// disk fills before etcd's own NOSPACE guard trips. Without `quotaBackendBytes` the quota is
/// derived from the volume: the WAL's 5 segments of 64 MB (384 MiB with margin) come off first,
/// and the rest must hold the database twice (a snapshot received from the leader, or a
/// defragmentation, writes a full second copy); etcd's suggested maximum of 8 GiB caps it.
#[test]
fn the_backend_quota_defaults_from_the_volume_size_with_headroom() {
    let quota_of = |spec: EtcdClusterSpec| -> Vec<String> {
        args(&pod_of(&etcd(spec), "main-0", InitialState::New))
            .into_iter()
            .filter(|a| a.starts_with("--quota-backend-bytes="))
            .collect()
    };
    let mib = 1024 * 1024;
    for (size, quota) in [
        ("1Gi", 320 * mib),
        ("2Gi", 832 * mib),
        ("512Mi", 128 * mib),
        ("100Gi", 8 * 1024 * mib),
    ] {
        let mut s = spec();
        s.storage.size = Quantity(size.into());
        assert_eq!(
            quota_of(s),
            [format!("--quota-backend-bytes={quota}")],
            "volume {size}"
        );
    }
    let mut explicit = spec();
    explicit.etcd_options = Some(EtcdOptions {
        quota_backend_bytes: Some(100 * mib),
        ..EtcdOptions::default()
    });
    assert_eq!(
        quota_of(explicit),
        [format!("--quota-backend-bytes={}", 100 * mib)]
    );
}

/// Issue 17 (risk of the derived quota): a Pod re-created for a cluster whose database is
/// already larger than the quota derived from its volume (a cluster that ran under etcd's own
/// 2 GiB default) must not get that smaller quota: NOSPACE would stop every write at once. The
/// quota is never below the largest database a member reports, plus a quarter.
#[test]
fn the_derived_quota_is_never_below_the_current_database() {
    let cluster = etcd(spec());
    let initial = initial(&["main-0", "main-1"]);
    let db = 400 * 1024 * 1024_u64; // larger than the 320 MiB derived from 1Gi
    let pod = member_pod(
        &cluster,
        &MemberPod {
            member: "main-1",
            version: v35(),
            initial_cluster: &initial,
            state: InitialState::Existing,
            largest_db_bytes: db,
            snapshot_before_upgrade: false,
        },
    )
    .unwrap();
    let quota: Vec<String> = args(&pod)
        .into_iter()
        .filter(|a| a.starts_with("--quota-backend-bytes="))
        .collect();
    assert_eq!(quota, [format!("--quota-backend-bytes={}", db + db / 4)]);
    // A small database leaves the volume's quota as it is.
    assert_eq!(default_quota_for("1Gi", 1024 * 1024), Some(335_544_320));
}

#[test]
fn tls_members_speak_https_with_their_certificates_mounted() {
    use etcd_api::{ClientTls, LocalObjectReference, PeerTls, TlsSpec};
    // Peer: operator-managed; client: a Secret the user provides, client certificates required.
    let cluster = etcd(EtcdClusterSpec {
        tls: Some(TlsSpec {
            peer: Some(PeerTls::default()),
            client: Some(ClientTls {
                secret_ref: Some(LocalObjectReference {
                    name: "serving".into(),
                }),
                operator_secret_ref: Some(LocalObjectReference { name: "ops".into() }),
                cert_manager: None,
                client_cert_auth: true,
            }),
        }),
        ..spec()
    });
    let names = ClusterName::new("db", "main").with_tls(true, true);
    let members = [("main-0".to_owned(), names.peer_url("main-0"))];
    let pod = member_pod(
        &cluster,
        &MemberPod {
            member: "main-0",
            version: v35(),
            initial_cluster: &members,
            state: InitialState::New,
            largest_db_bytes: 0,
            snapshot_before_upgrade: false,
        },
    )
    .unwrap();
    let args = args(&pod);
    for flag in [
        "--listen-peer-urls=https://0.0.0.0:2380",
        "--listen-client-urls=https://0.0.0.0:2379",
        "--listen-metrics-urls=http://0.0.0.0:2381",
        "--initial-advertise-peer-urls=https://main-0.main.db.svc:2380",
        "--advertise-client-urls=https://main-0.main.db.svc:2379",
        "--initial-cluster=main-0=https://main-0.main.db.svc:2380",
        "--peer-cert-file=/etc/etcd/tls/peer/tls.crt",
        "--peer-key-file=/etc/etcd/tls/peer/tls.key",
        "--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt",
        "--peer-client-cert-auth",
        "--cert-file=/etc/etcd/tls/client/tls.crt",
        "--key-file=/etc/etcd/tls/client/tls.key",
        "--trusted-ca-file=/etc/etcd/tls/client/ca.crt",
        "--client-cert-auth",
    ] {
        assert!(
            args.contains(&flag.to_owned()),
            "{flag} missing from {args:?}"
        );
    }
    let spec = pod.spec.as_ref().unwrap();
    let secrets: Vec<(String, String)> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| Some((v.name.clone(), v.secret.as_ref()?.secret_name.clone()?)))
        .collect();
    assert_eq!(
        secrets,
        [
            ("peer-tls".to_owned(), "main-0-tls".to_owned()),
            ("client-tls".to_owned(), "serving".to_owned()),
        ]
    );
    let mounts: Vec<(String, String, Option<bool>)> = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone(), m.read_only))
        .collect();
    assert_eq!(
        mounts,
        [
            ("data".to_owned(), "/var/lib/etcd".to_owned(), None),
            (
                "peer-tls".to_owned(),
                "/etc/etcd/tls/peer".to_owned(),
                Some(true)
            ),
            (
                "client-tls".to_owned(),
                "/etc/etcd/tls/client".to_owned(),
                Some(true)
            ),
        ]
    );
    // The kubelet has no client certificate: readiness asks the plain-HTTP metrics port.
    let probe = spec.containers[0].readiness_probe.as_ref().unwrap();
    let get = probe.http_get.as_ref().unwrap();
    assert_eq!(get.port, IntOrString::Int(2381));
    assert_eq!(get.scheme.as_deref(), Some("HTTP"));
}

#[test]
fn plain_members_keep_http_and_no_certificate_flags() {
    let pod = pod_of(&etcd(spec()), "main-0", InitialState::New);
    let args = args(&pod);
    assert!(args.contains(&"--listen-client-urls=http://0.0.0.0:2379".to_owned()));
    assert!(
        !args
            .iter()
            .any(|a| a.contains("cert") || a.contains("https"))
    );
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.volumes.as_ref().unwrap().len(), 1);
    let get = spec.containers[0]
        .readiness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(get.port, IntOrString::Int(2379));
}

#[test]
fn managed_tls_secret_is_owned_and_typed() {
    let cluster = etcd(spec());
    let issued = Issued {
        cert_pem: "C".into(),
        key_pem: "K".into(),
    };
    let secret = tls_secret(&cluster, "main-0-tls", &issued, Some("A")).unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(
        secret.metadata.owner_references.as_deref(),
        Some(&[owner_ref()][..])
    );
    let data = secret.data.unwrap();
    assert_eq!(data["tls.crt"].0, b"C");
    assert_eq!(data["tls.key"].0, b"K");
    assert_eq!(data["ca.crt"].0, b"A");
}

// === configuration hash ===

#[test]
fn the_config_hash_is_stable_across_runs() {
    // A literal: a change here rolls every member of every cluster when the operator is
    // upgraded. Change it only on purpose (POD_TEMPLATE_REVISION), never by accident.
    // Revision 1 gave "3cd5bab834c2c3b7"; revision 2 (security defaults) "af40e2c22af3003f";
    // revision 3 (the serving readiness gate) rolls every member once more.
    assert_eq!(config_hash(&spec()), "6e9ff54a25b66117");
    assert_eq!(config_hash(&spec()), config_hash(&spec().clone()));
}

#[test]
fn the_config_hash_changes_with_every_field_that_shapes_a_member_pod() {
    let base = config_hash(&spec());
    let with_pod = |policy: PodPolicy| EtcdClusterSpec {
        pod: Some(policy),
        ..spec()
    };
    let with_options = |options: EtcdOptions| EtcdClusterSpec {
        etcd_options: Some(options),
        ..spec()
    };
    let changed = [
        (
            "pod.labels",
            with_pod(PodPolicy {
                labels: [("team".to_owned(), "a".to_owned())].into(),
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.annotations",
            with_pod(PodPolicy {
                annotations: [("team".to_owned(), "a".to_owned())].into(),
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.resources",
            with_pod(PodPolicy {
                resources: Some(ResourceRequirements {
                    requests: Some([("cpu".to_owned(), Quantity("250m".into()))].into()),
                    ..ResourceRequirements::default()
                }),
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.nodeSelector",
            with_pod(PodPolicy {
                node_selector: [("disk".to_owned(), "ssd".to_owned())].into(),
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.affinity",
            with_pod(PodPolicy {
                affinity: Some(k8s_openapi::api::core::v1::Affinity::default()),
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.tolerations",
            with_pod(PodPolicy {
                tolerations: vec![Toleration {
                    key: Some("dedicated".into()),
                    operator: Some("Exists".into()),
                    ..Toleration::default()
                }],
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.priorityClassName",
            with_pod(PodPolicy {
                priority_class_name: Some("high".into()),
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.securityContext",
            with_pod(PodPolicy {
                security_context: Some(PodSecurityContext {
                    run_as_user: Some(1000),
                    ..PodSecurityContext::default()
                }),
                ..PodPolicy::default()
            }),
        ),
        (
            "pod.containerSecurityContext",
            with_pod(PodPolicy {
                container_security_context: Some(SecurityContext {
                    read_only_root_filesystem: Some(false),
                    ..SecurityContext::default()
                }),
                ..PodPolicy::default()
            }),
        ),
        (
            "etcdOptions.snapshotCount",
            with_options(EtcdOptions {
                snapshot_count: Some(5000),
                ..EtcdOptions::default()
            }),
        ),
        (
            "etcdOptions.quotaBackendBytes",
            with_options(EtcdOptions {
                quota_backend_bytes: Some(1 << 30),
                ..EtcdOptions::default()
            }),
        ),
        (
            "etcdOptions.autoCompactionMode",
            with_options(EtcdOptions {
                auto_compaction_mode: Some(AutoCompactionMode::Revision),
                ..EtcdOptions::default()
            }),
        ),
        (
            "etcdOptions.heartbeatIntervalMs",
            with_options(EtcdOptions {
                heartbeat_interval_ms: Some(200),
                election_timeout_ms: Some(2000),
                ..EtcdOptions::default()
            }),
        ),
        (
            "repository",
            EtcdClusterSpec {
                repository: "quay.io/coreos/etcd".into(),
                ..spec()
            },
        ),
        (
            // The default quota follows the volume, and is a flag of the member.
            "storage.size",
            EtcdClusterSpec {
                storage: StorageSpec {
                    size: Quantity("8Gi".into()),
                    ..StorageSpec::default()
                },
                ..spec()
            },
        ),
    ];
    for (field, spec) in changed {
        assert_ne!(config_hash(&spec), base, "{field} does not change the hash");
    }
}

#[test]
fn the_config_hash_ignores_what_does_not_shape_a_member_pod() {
    let base = config_hash(&spec());
    let unchanged = [
        ("size", EtcdClusterSpec { size: 5, ..spec() }),
        (
            "version (upgrades roll it)",
            EtcdClusterSpec {
                version: "3.6.16".into(),
                ..spec()
            },
        ),
        (
            "paused",
            EtcdClusterSpec {
                paused: true,
                ..spec()
            },
        ),
        (
            "storage.reclaimPolicy",
            EtcdClusterSpec {
                storage: StorageSpec {
                    reclaim_policy: ReclaimPolicy::Delete,
                    ..StorageSpec::default()
                },
                ..spec()
            },
        ),
        (
            "an empty spec.pod",
            EtcdClusterSpec {
                pod: Some(PodPolicy::default()),
                ..spec()
            },
        ),
    ];
    for (field, spec) in unchanged {
        assert_eq!(config_hash(&spec), base, "{field} changes the hash");
    }
}

#[test]
fn member_pods_record_the_config_hash_over_a_users_annotation() {
    let mut with_annotation = spec();
    with_annotation.pod = Some(PodPolicy {
        annotations: [(ANNOTATION_CONFIG_HASH.to_owned(), "mine".to_owned())].into(),
        ..PodPolicy::default()
    });
    for spec in [spec(), with_annotation] {
        let expected = config_hash(&spec);
        let cluster = etcd(spec);
        let members = initial(&["main-0"]);
        let pod = member_pod(
            &cluster,
            &MemberPod {
                member: "main-0",
                version: v35(),
                initial_cluster: &members,
                state: InitialState::Existing,
                largest_db_bytes: 0,
                snapshot_before_upgrade: false,
            },
        )
        .unwrap();
        let annotations = pod.metadata.annotations.unwrap();
        assert_eq!(annotations.get(ANNOTATION_CONFIG_HASH), Some(&expected));
    }
}

/// The Pod that takes a v2 snapshot before an upgrade to 3.6 runs `--snapshot-count=1` (and not
/// the spec's count), is marked for the observer, and keeps the spec's configuration hash: the
/// upgrade that follows replaces it, no configuration roll does.
#[test]
fn the_snapshot_before_upgrade_pod_runs_snapshot_count_one() {
    let mut with_count = spec();
    with_count.etcd_options = Some(EtcdOptions {
        snapshot_count: Some(10_000),
        ..EtcdOptions::default()
    });
    let cluster = etcd(with_count);
    let initial = initial(&["main-0", "main-1"]);
    let build = |snapshot_before_upgrade| {
        member_pod(
            &cluster,
            &MemberPod {
                member: "main-1",
                version: v35(),
                initial_cluster: &initial,
                state: InitialState::Existing,
                largest_db_bytes: 0,
                snapshot_before_upgrade,
            },
        )
        .unwrap()
    };
    let normal = build(false);
    let snapshotting = build(true);
    let counts = |pod: &Pod| {
        args(pod)
            .into_iter()
            .filter(|a| a.starts_with("--snapshot-count="))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&normal), ["--snapshot-count=10000"]);
    assert_eq!(counts(&snapshotting), ["--snapshot-count=1"]);
    let annotations = |pod: &Pod| pod.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations(&snapshotting)
            .get(ANNOTATION_SNAPSHOT_BEFORE_UPGRADE)
            .map(String::as_str),
        Some("true")
    );
    assert!(!annotations(&normal).contains_key(ANNOTATION_SNAPSHOT_BEFORE_UPGRADE));
    assert_eq!(
        annotations(&snapshotting).get(ANNOTATION_CONFIG_HASH),
        annotations(&normal).get(ANNOTATION_CONFIG_HASH)
    );
}

// === security context ===

/// What the `restricted` Pod Security level (Kubernetes' pod-security-admission checks, as of
/// 1.37) refuses in a Pod, one message per violation: the same rules the API server's PodSecurity
/// admission applies (the e2e configuration scenario checks the real one).
fn restricted_violations(pod: &Pod) -> Vec<String> {
    let spec = pod.spec.as_ref().unwrap();
    let pod_sc = spec.security_context.clone().unwrap_or_default();
    let mut violations = vec![];
    if spec.host_network == Some(true) || spec.host_pid == Some(true) || spec.host_ipc == Some(true)
    {
        violations.push("host namespaces".to_owned());
    }
    for volume in spec.volumes.iter().flatten() {
        let allowed = volume.persistent_volume_claim.is_some()
            || volume.secret.is_some()
            || volume.config_map.is_some()
            || volume.empty_dir.is_some()
            || volume.projected.is_some()
            || volume.downward_api.is_some()
            || volume.csi.is_some()
            || volume.ephemeral.is_some();
        if !allowed {
            violations.push(format!("volume {} has a restricted type", volume.name));
        }
    }
    let pod_seccomp = pod_sc.seccomp_profile.as_ref().map(|p| p.type_.as_str());
    for c in &spec.containers {
        let sc = c.security_context.clone().unwrap_or_default();
        if sc.privileged == Some(true) {
            violations.push(format!("{} privileged", c.name));
        }
        if sc.allow_privilege_escalation != Some(false) {
            violations.push(format!("{} allowPrivilegeEscalation != false", c.name));
        }
        let caps = sc.capabilities.clone().unwrap_or_default();
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            violations.push(format!("{} does not drop ALL capabilities", c.name));
        }
        if caps.add.iter().flatten().any(|a| a != "NET_BIND_SERVICE") {
            violations.push(format!("{} adds capabilities", c.name));
        }
        let non_root = sc.run_as_non_root.or(pod_sc.run_as_non_root);
        if non_root != Some(true) {
            violations.push(format!("{} runAsNonRoot != true", c.name));
        }
        if sc.run_as_user.or(pod_sc.run_as_user) == Some(0) {
            violations.push(format!("{} runAsUser=0", c.name));
        }
        let seccomp = sc
            .seccomp_profile
            .as_ref()
            .map(|p| p.type_.as_str())
            .or(pod_seccomp);
        if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
            violations.push(format!("{} seccompProfile not RuntimeDefault", c.name));
        }
        for port in c.ports.iter().flatten() {
            if port.host_port.is_some_and(|p| p != 0) {
                violations.push(format!("{} hostPort", c.name));
            }
        }
    }
    violations
}

#[test]
fn member_pods_meet_the_restricted_pod_security_level() {
    use etcd_api::{ClientTls, PeerTls, TlsSpec};
    let tls = etcd(EtcdClusterSpec {
        tls: Some(TlsSpec {
            peer: Some(PeerTls::default()),
            client: Some(ClientTls::default()),
        }),
        ..spec()
    });
    let tls_names = ClusterName::new("db", "main").with_tls(true, true);
    let tls_members = [("main-0".to_owned(), tls_names.peer_url("main-0"))];
    let tls_pod = member_pod(
        &tls,
        &MemberPod {
            member: "main-0",
            version: v35(),
            initial_cluster: &tls_members,
            state: InitialState::New,
            largest_db_bytes: 0,
            snapshot_before_upgrade: false,
        },
    )
    .unwrap();
    for pod in [
        pod_of(&etcd(spec()), "main-1", InitialState::Existing),
        tls_pod,
    ] {
        assert_eq!(restricted_violations(&pod), Vec::<String>::new());
        let spec = pod.spec.unwrap();
        let pod_sc = spec.security_context.unwrap();
        assert_eq!(pod_sc.run_as_user, Some(65532));
        assert_eq!(pod_sc.run_as_group, Some(65532));
        // The kubelet gives the data volume this group, writable: etcd (uid 65532) can write.
        assert_eq!(pod_sc.fs_group, Some(65532));
        assert_eq!(
            pod_sc.fs_group_change_policy.as_deref(),
            Some("OnRootMismatch")
        );
        let sc = spec.containers[0].security_context.clone().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        // etcd writes nothing outside its data volume (and the certificates are read-only).
        let mounts = spec.containers[0].volume_mounts.clone().unwrap();
        let writable: Vec<&str> = mounts
            .iter()
            .filter(|m| m.read_only != Some(true))
            .map(|m| m.mount_path.as_str())
            .collect();
        assert_eq!(writable, vec![DATA_MOUNT]);
    }
}

#[test]
fn the_users_security_context_overrides_only_the_fields_it_sets() {
    let mut custom = spec();
    custom.pod = Some(PodPolicy {
        security_context: Some(PodSecurityContext {
            run_as_user: Some(1001),
            fs_group: Some(2000),
            ..PodSecurityContext::default()
        }),
        container_security_context: Some(SecurityContext {
            capabilities: Some(Capabilities {
                add: Some(vec!["NET_BIND_SERVICE".into()]),
                drop: None,
            }),
            ..SecurityContext::default()
        }),
        ..PodPolicy::default()
    });
    let pod = pod_of(&etcd(custom), "main-0", InitialState::New);
    let spec = pod.spec.as_ref().unwrap();
    let pod_sc = spec.security_context.clone().unwrap();
    assert_eq!(pod_sc.run_as_user, Some(1001));
    assert_eq!(pod_sc.fs_group, Some(2000));
    // Unset by the user: the defaults stay.
    assert_eq!(pod_sc.run_as_group, Some(65532));
    assert_eq!(pod_sc.run_as_non_root, Some(true));
    assert_eq!(pod_sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let caps = spec.containers[0]
        .security_context
        .clone()
        .unwrap()
        .capabilities
        .unwrap();
    assert_eq!(caps.drop, Some(vec!["ALL".to_owned()]));
    assert_eq!(caps.add, Some(vec!["NET_BIND_SERVICE".to_owned()]));
    assert_eq!(restricted_violations(&pod), Vec::<String>::new());
}

#[test]
fn running_as_root_is_possible_and_the_restricted_level_then_refuses_it() {
    // For storage that ignores fsGroup and whose volumes only root may write.
    let mut root = spec();
    root.pod = Some(PodPolicy {
        security_context: Some(PodSecurityContext {
            run_as_user: Some(0),
            run_as_non_root: Some(false),
            ..PodSecurityContext::default()
        }),
        ..PodPolicy::default()
    });
    let pod = pod_of(&etcd(root), "main-0", InitialState::New);
    assert_eq!(
        restricted_violations(&pod),
        vec!["etcd runAsNonRoot != true", "etcd runAsUser=0"]
    );
}

/// The certificate hash covers exactly the Secrets a member mounts: the member's own for an
/// operator-managed side, the one you provide otherwise; unknown while one is not read.
#[test]
fn member_tls_hash_follows_the_secrets_the_member_mounts() {
    use std::collections::BTreeMap;
    let mut spec: etcd_api::EtcdClusterSpec =
        serde_json::from_value(serde_json::json!({"size": 3})).unwrap();
    let mut plain = EtcdCluster::new("main", spec.clone());
    plain.metadata.namespace = Some("db".into());
    assert_eq!(member_tls_hash(&plain, "main-0", &BTreeMap::new()), None);

    spec.tls = Some(serde_json::from_value(serde_json::json!({"peer": {}, "client": {}})).unwrap());
    let mut managed = EtcdCluster::new("main", spec.clone());
    managed.metadata.namespace = Some("db".into());
    let digest =
        |v: &str| secret_digest(&BTreeMap::from([("tls.crt".into(), v.as_bytes().to_vec())]));
    let mut digests = BTreeMap::from([
        ("main-0-tls".to_owned(), digest("a")),
        ("main-1-tls".to_owned(), digest("a")),
    ]);
    let before = member_tls_hash(&managed, "main-0", &digests).unwrap();
    assert_eq!(member_tls_hash(&managed, "main-2", &digests), None);
    // Another member's renewal does not touch this member's hash; its own does.
    digests.insert("main-1-tls".into(), digest("b"));
    assert_eq!(
        member_tls_hash(&managed, "main-0", &digests),
        Some(before.clone())
    );
    digests.insert("main-0-tls".into(), digest("b"));
    assert_ne!(member_tls_hash(&managed, "main-0", &digests), Some(before));

    spec.tls = Some(
        serde_json::from_value(
            serde_json::json!({"peer": {}, "client": {"secretRef": {"name": "serving"}}}),
        )
        .unwrap(),
    );
    let mut mixed = EtcdCluster::new("main", spec);
    mixed.metadata.namespace = Some("db".into());
    assert_eq!(
        member_tls_hash(&mixed, "main-0", &digests),
        None,
        "serving not read"
    );
    digests.insert("serving".into(), digest("s"));
    let with_serving = member_tls_hash(&mixed, "main-0", &digests).unwrap();
    digests.insert("serving".into(), digest("t"));
    assert_ne!(
        member_tls_hash(&mixed, "main-0", &digests),
        Some(with_serving)
    );
}

/// A peer certificate the operator does not issue is mounted through the member's copy, and
/// only the copy's digest counts: the source reaches the member through the copy. A Pod built
/// before copies existed mounted the source directly with the same volume name and maybe the
/// same bytes; the hash still differs, so it is rolled onto its copy once.
#[test]
fn a_provided_peer_secret_is_mounted_through_the_members_copy() {
    use std::collections::BTreeMap;
    let provided = etcd(EtcdClusterSpec {
        tls: Some(
            serde_json::from_value(serde_json::json!({"peer": {"secretRef": {"name": "shared"}}}))
                .unwrap(),
        ),
        ..spec()
    });
    assert_eq!(
        member_tls_volumes(&provided, "main-1"),
        [(
            PEER_TLS_VOLUME,
            PEER_TLS_DIR,
            "main-1-peer-mounted".to_owned()
        )]
    );
    let digest =
        |v: &str| secret_digest(&BTreeMap::from([("tls.crt".into(), v.as_bytes().to_vec())]));
    let mut digests = BTreeMap::from([("shared".to_owned(), digest("a"))]);
    assert_eq!(
        member_tls_hash(&provided, "main-1", &digests),
        None,
        "no copy yet"
    );
    digests.insert("main-1-peer-mounted".into(), digest("a"));
    let through_copy = member_tls_hash(&provided, "main-1", &digests).unwrap();
    digests.insert("shared".into(), digest("b"));
    assert_eq!(
        member_tls_hash(&provided, "main-1", &digests).as_ref(),
        Some(&through_copy),
        "the source alone changed: the copy decides"
    );
    // The same volume on the same bytes, mounted directly (an operator-managed peer side
    // hashes this way, as every peer side did before copies).
    let managed = both_tls();
    let direct = BTreeMap::from([
        ("main-1-tls".to_owned(), digest("a")),
        ("main-1-peer-mounted".to_owned(), digest("a")),
    ]);
    let managed_peer_only = etcd(EtcdClusterSpec {
        tls: Some(etcd_api::TlsSpec {
            peer: managed.spec.tls.as_ref().unwrap().peer.clone(),
            client: None,
        }),
        ..spec()
    });
    assert_ne!(
        member_tls_hash(&managed_peer_only, "main-1", &direct),
        Some(through_copy)
    );
}

fn both_tls() -> EtcdCluster {
    use etcd_api::{ClientTls, PeerTls, TlsSpec};
    etcd(EtcdClusterSpec {
        tls: Some(TlsSpec {
            peer: Some(PeerTls::default()),
            client: Some(ClientTls::default()),
        }),
        ..spec()
    })
}

fn switching_pod(cluster: &EtcdCluster, own_url: &str, listen: Listeners) -> Pod {
    let members = [
        ("main-0".to_owned(), own_url.to_owned()),
        (
            "main-1".to_owned(),
            "http://main-1.main.db.svc:2380".to_owned(),
        ),
    ];
    member_pod_listening(
        cluster,
        &MemberPod {
            member: "main-0",
            version: v35(),
            initial_cluster: &members,
            state: InitialState::Existing,
            largest_db_bytes: 0,
            snapshot_before_upgrade: false,
        },
        listen,
    )
    .unwrap()
}

fn ports(pod: &Pod) -> Vec<(String, i32)> {
    pod.spec.as_ref().unwrap().containers[0]
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap(), p.container_port))
        .collect()
}

#[test]
fn a_member_switching_to_tls_listens_on_both_and_advertises_its_peer_url_as_etcd_holds_it() {
    let cluster = both_tls();
    let dual = Listeners {
        peer: Listen::Dual,
        client: Listen::Dual,
    };
    // Stage 1: still http:// in etcd's member list, listening on both.
    let pod = switching_pod(&cluster, "http://main-0.main.db.svc:2380", dual);
    let flags = args(&pod);
    for flag in [
        "--listen-peer-urls=http://0.0.0.0:2380,https://0.0.0.0:2382",
        "--listen-client-urls=http://0.0.0.0:2379,https://0.0.0.0:2378",
        "--initial-advertise-peer-urls=http://main-0.main.db.svc:2380",
        "--advertise-client-urls=http://main-0.main.db.svc:2379,https://main-0.main.db.svc:2378",
        "--peer-cert-file=/etc/etcd/tls/peer/tls.crt",
        "--cert-file=/etc/etcd/tls/client/tls.crt",
    ] {
        assert!(
            flags.contains(&flag.to_owned()),
            "{flag} missing from {flags:?}"
        );
    }
    assert_eq!(
        ports(&pod),
        [
            ("client".to_owned(), 2379),
            ("client-tls".to_owned(), 2378),
            ("peer".to_owned(), 2380),
            ("peer-tls".to_owned(), 2382),
            ("metrics".to_owned(), 2381),
        ]
    );
    // Its URL moved: a restart advertises https://…:2382.
    let pod = switching_pod(&cluster, "https://main-0.main.db.svc:2382", dual);
    assert!(
        args(&pod)
            .contains(&"--initial-advertise-peer-urls=https://main-0.main.db.svc:2382".to_owned())
    );
    // The end: https:// only, peers on the port of its URL.
    let tls = Listeners {
        peer: Listen::Https,
        client: Listen::Https,
    };
    let pod = switching_pod(&cluster, "https://main-0.main.db.svc:2382", tls);
    let flags = args(&pod);
    assert!(flags.contains(&"--listen-peer-urls=https://0.0.0.0:2382".to_owned()));
    assert!(flags.contains(&"--listen-client-urls=https://0.0.0.0:2379".to_owned()));
    assert_eq!(
        ports(&pod),
        [
            ("client".to_owned(), 2379),
            ("peer".to_owned(), 2382),
            ("metrics".to_owned(), 2381),
        ]
    );
    // A side still plain has no certificate flags.
    let plain_client = Listeners {
        peer: Listen::Dual,
        client: Listen::Http,
    };
    let pod = switching_pod(&cluster, "http://main-0.main.db.svc:2380", plain_client);
    let flags = args(&pod);
    assert!(flags.contains(&"--peer-cert-file=/etc/etcd/tls/peer/tls.crt".to_owned()));
    assert!(
        !flags.iter().any(|a| a.starts_with("--cert-file")),
        "{flags:?}"
    );
}

#[test]
fn a_switched_member_after_the_drop_serves_tls_clients_on_2379_and_keeps_2378() {
    let cluster = both_tls();
    let dropped = Listeners {
        peer: Listen::Https,
        client: Listen::HttpsWithSwitchPort,
    };
    let pod = switching_pod(&cluster, "https://main-0.main.db.svc:2382", dropped);
    let flags = args(&pod);
    for flag in [
        "--listen-client-urls=https://0.0.0.0:2379,https://0.0.0.0:2378",
        // 2379 first: what etcd's member list shows first is the port TLS clusters use.
        "--advertise-client-urls=https://main-0.main.db.svc:2379,https://main-0.main.db.svc:2378",
        "--listen-peer-urls=https://0.0.0.0:2382",
        "--cert-file=/etc/etcd/tls/client/tls.crt",
    ] {
        assert!(
            flags.contains(&flag.to_owned()),
            "{flag} missing from {flags:?}"
        );
    }
    assert!(!flags.iter().any(|a| a.contains("http://0.0.0.0:2379")));
    assert_eq!(
        ports(&pod),
        [
            ("client".to_owned(), 2379),
            ("client-tls".to_owned(), 2378),
            ("peer".to_owned(), 2382),
            ("metrics".to_owned(), 2381),
        ]
    );
}

#[test]
fn the_listeners_a_pod_is_built_with_are_read_back_from_its_flags() {
    use crate::plan::tls_switch::listeners_of_args;
    let cluster = both_tls();
    for peer in [Listen::Http, Listen::Dual, Listen::Https] {
        for client in [
            Listen::Http,
            Listen::Dual,
            Listen::Https,
            Listen::HttpsWithSwitchPort,
        ] {
            let listen = Listeners { peer, client };
            let url = if peer == Listen::Https {
                "https://main-0.main.db.svc:2382"
            } else {
                "http://main-0.main.db.svc:2380"
            };
            let pod = switching_pod(&cluster, url, listen);
            assert_eq!(listeners_of_args(&args(&pod)), Some(listen));
        }
    }
    // Pods built as the spec says read back as such (plain and TLS clusters).
    let plain = pod_of(&etcd(spec()), "main-0", InitialState::New);
    assert_eq!(
        listeners_of_args(&args(&plain)),
        Some(Listeners {
            peer: Listen::Http,
            client: Listen::Http
        })
    );
    // A cluster created with TLS: https:// on 2379 alone, never read as serving 2378.
    let tls = pod_of(&both_tls(), "main-0", InitialState::New);
    assert_eq!(
        listeners_of_args(&args(&tls)),
        Some(Listeners {
            peer: Listen::Https,
            client: Listen::Https
        })
    );
    assert_eq!(listeners_of_args(&["--name=x".to_owned()]), None);
}

#[test]
fn a_peer_url_not_of_this_member_is_still_refused() {
    let cluster = both_tls();
    let members = [(
        "main-0".to_owned(),
        "https://main-1.main.db.svc:2382".to_owned(),
    )];
    let refused = member_pod_listening(
        &cluster,
        &MemberPod {
            member: "main-0",
            version: v35(),
            initial_cluster: &members,
            state: InitialState::Existing,
            largest_db_bytes: 0,
            snapshot_before_upgrade: false,
        },
        spec_listeners(&cluster),
    );
    assert!(
        matches!(refused, Err(BuildError::MemberNotInInitialCluster { .. })),
        "{refused:?}"
    );
}

#[test]
fn the_client_service_publishes_the_switch_port_only_while_members_serve_it() {
    let names = |cluster: &EtcdCluster, switch_port: bool| -> Vec<(String, i32)> {
        client_service(cluster, switch_port)
            .unwrap()
            .spec
            .unwrap()
            .ports
            .unwrap()
            .into_iter()
            .map(|p| (p.name.unwrap(), p.port))
            .collect()
    };
    assert_eq!(names(&etcd(spec()), false), [("client".to_owned(), 2379)]);
    // Created with TLS: nothing listens on 2378, so it is not published.
    assert_eq!(names(&both_tls(), false), [("client".to_owned(), 2379)]);
    // Switched from plaintext (during the switch and after the drop).
    assert_eq!(
        names(&both_tls(), true),
        [("client".to_owned(), 2379), ("client-tls".to_owned(), 2378)]
    );
}
