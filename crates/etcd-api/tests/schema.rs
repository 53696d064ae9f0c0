//! The generated CRD schemas: the structural constraints users rely on, and every CEL rule
//! evaluated (create and update) with the same CEL library kube-rs uses, without an API server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use etcd_api::{EtcdBackup, EtcdCluster, EtcdRestore};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::cel::{ScopeContext, Validator, analyze_rule, compile_schema};
use serde_json::{Value, json};

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    etcd_api::crd::openapi_schema(crd).unwrap()
}

/// The schema node at a dotted path of property names, e.g. `spec.s3.bucket`.
fn node<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(schema, |node, name| {
        let next = if name == "[]" {
            &node["items"]
        } else {
            &node["properties"][name]
        };
        assert!(!next.is_null(), "no schema node {name} in {path}");
        next
    })
}

/// CEL errors as `field: message`, or empty when the object passes.
fn cel_errors(schema: &Value, object: Value, old: Option<Value>) -> Vec<String> {
    match Validator::new().validate(schema, &object, old.as_ref()) {
        Ok(()) => vec![],
        Err(errors) => errors.iter().map(|e| e.message.clone()).collect(),
    }
}

fn cluster(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "etcd.operator.rs/v1alpha1", "kind": "EtcdCluster",
           "metadata": {"name": name, "namespace": "db"}, "spec": spec})
}

fn backup(spec: Value) -> Value {
    json!({"apiVersion": "etcd.operator.rs/v1alpha1", "kind": "EtcdBackup",
           "metadata": {"name": "b1", "namespace": "db"}, "spec": spec})
}

fn restore(spec: Value) -> Value {
    json!({"apiVersion": "etcd.operator.rs/v1alpha1", "kind": "EtcdRestore",
           "metadata": {"name": "r1", "namespace": "db"}, "spec": spec})
}

#[test]
fn names_scope_and_subresources() {
    let cases = [
        (
            EtcdCluster::crd(),
            "etcdclusters.etcd.operator.rs",
            "EtcdCluster",
            vec!["etcd"],
        ),
        (
            EtcdBackup::crd(),
            "etcdbackups.etcd.operator.rs",
            "EtcdBackup",
            vec![],
        ),
        (
            EtcdRestore::crd(),
            "etcdrestores.etcd.operator.rs",
            "EtcdRestore",
            vec![],
        ),
    ];
    for (crd, name, kind, short_names) in cases {
        assert_eq!(crd.metadata.name.as_deref(), Some(name));
        assert_eq!(crd.spec.group, "etcd.operator.rs");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(
            crd.spec.names.short_names.clone().unwrap_or_default(),
            short_names
        );
        assert_eq!(crd.spec.versions.len(), 1);
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.served && version.storage);
        assert!(
            version.subresources.as_ref().unwrap().status.is_some(),
            "{kind} has the status subresource"
        );
    }
}

#[test]
fn printer_columns() {
    let columns = |crd: CustomResourceDefinition| -> Vec<(String, String)> {
        crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.json_path))
            .collect()
    };
    let owned = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        columns(EtcdCluster::crd()),
        owned(&[
            ("Size", ".spec.size"),
            ("Ready", ".status.readyMembers"),
            ("Version", ".status.currentVersion"),
            ("Phase", ".status.phase"),
            (
                "Available",
                ".status.conditions[?(@.type==\"Available\")].status"
            ),
            ("Age", ".metadata.creationTimestamp"),
            // -o wide only (priority 1).
            ("Endpoint", ".status.clientEndpoint"),
        ])
    );
    assert_eq!(
        columns(EtcdBackup::crd()),
        owned(&[
            ("Cluster", ".spec.clusterName"),
            ("Phase", ".status.phase"),
            // Human-readable ("1.2 GiB"), set by the operator.
            ("Size", ".status.artifact.size"),
            // -o wide only: the exact byte count.
            ("Bytes", ".status.artifact.sizeBytes"),
            ("Revision", ".status.artifact.revision"),
            ("Reason", ".status.reason"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        columns(EtcdRestore::crd()),
        owned(&[
            ("Cluster", ".spec.clusterName"),
            ("Phase", ".status.phase"),
            ("Step", ".status.step"),
            ("Status", ".status.message"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
}

#[test]
fn cluster_structural_constraints() {
    let schema = schema_of(&EtcdCluster::crd());
    let spec = node(&schema, "spec");
    assert_eq!(spec["required"], json!(["size"]));
    // A cluster created without a version runs the default, written into the object by the
    // API server at creation, so a later operator with another default does not move it.
    assert_eq!(
        spec["properties"]["version"]["default"],
        json!(etcd_api::validation::DEFAULT_VERSION)
    );
    assert_eq!(node(&schema, "spec.size")["minimum"], json!(1.0));
    assert_eq!(node(&schema, "spec.size")["maximum"], json!(7.0));
    assert_eq!(
        node(&schema, "spec.repository")["default"],
        json!("gcr.io/etcd-development/etcd")
    );
    assert_eq!(node(&schema, "spec.paused")["default"], json!(false));
    assert_eq!(
        node(&schema, "spec.storage")["default"],
        json!({"size": "1Gi", "reclaimPolicy": "Retain"})
    );
    assert_eq!(
        node(&schema, "spec.storage.reclaimPolicy")["enum"],
        json!(["Retain", "Delete"])
    );
    assert_eq!(
        node(&schema, "spec.etcdOptions.autoCompactionMode")["enum"],
        json!(["Periodic", "Revision"])
    );
    assert_eq!(
        node(&schema, "status.phase")["enum"],
        json!([
            "Creating",
            "Running",
            "Scaling",
            "Upgrading",
            "Degraded",
            "QuorumLost",
            "Restoring",
            "Paused",
            "Invalid"
        ])
    );
    // Server-side apply merges status lists by key, not by position.
    for (list, key) in [("status.conditions", "type"), ("status.members", "name")] {
        assert_eq!(
            node(&schema, list)["x-kubernetes-list-type"],
            json!("map"),
            "{list}"
        );
        assert_eq!(
            node(&schema, list)["x-kubernetes-list-map-keys"],
            json!([key]),
            "{list}"
        );
    }
    assert_eq!(
        node(&schema, "status.conditions.[]")["required"],
        json!(["lastTransitionTime", "message", "reason", "status", "type"])
    );
    assert!(
        node(&schema, "status")
            .get("properties")
            .unwrap()
            .get("clusterID")
            .is_some()
    );
    assert!(
        node(&schema, "status.members.[]")
            .get("properties")
            .unwrap()
            .get("peerURL")
            .is_some()
    );
}

/// Checks a schema `pattern` with Rust's regex (RE2 semantics, like the API server's Go regexp).
fn pattern_matches(schema: &Value, path: &str, text: &str) -> bool {
    let pattern = node(schema, path)["pattern"]
        .as_str()
        .unwrap_or_else(|| panic!("{path} has no pattern"));
    regex::Regex::new(pattern).unwrap().is_match(text)
}

#[test]
fn patterns_accept_and_refuse_what_they_should() {
    let cluster = schema_of(&EtcdCluster::crd());
    for ok in ["3.5.1", "3.4.23", "3.10.0", "0.0.0"] {
        assert!(pattern_matches(&cluster, "spec.version", ok), "{ok}");
    }
    for bad in ["v3.5.1", "3.5", "3.5.1-rc.0", "3.05.1", "latest", "3.5.1 "] {
        assert!(!pattern_matches(&cluster, "spec.version", bad), "{bad}");
    }
    for ok in ["1h", "30m", "1h30m", "0", "1000", "2.5h"] {
        assert!(
            pattern_matches(&cluster, "spec.etcdOptions.autoCompactionRetention", ok),
            "{ok}"
        );
    }
    for bad in ["1 h", "h", "-1", "1d"] {
        assert!(
            !pattern_matches(&cluster, "spec.etcdOptions.autoCompactionRetention", bad),
            "{bad}"
        );
    }

    let backup = schema_of(&EtcdBackup::crd());
    assert_eq!(node(&backup, "spec.s3.bucket")["minLength"], json!(3));
    assert_eq!(node(&backup, "spec.s3.bucket")["maxLength"], json!(63));
    for ok in ["etcd-backups", "a.b.c", "abc", "0-backups-9"] {
        assert!(pattern_matches(&backup, "spec.s3.bucket", ok), "{ok}");
    }
    for bad in ["Etcd", "-abc", "abc-", "a_b", "ab/c", "abc."] {
        assert!(!pattern_matches(&backup, "spec.s3.bucket", bad), "{bad}");
    }
    for ok in ["", "prod/etcd/", "a", "team_1/etcd"] {
        assert!(pattern_matches(&backup, "spec.s3.prefix", ok), "{ok:?}");
    }
    for bad in ["/abs", "sp ace/", "q?x", "a\\b"] {
        assert!(!pattern_matches(&backup, "spec.s3.prefix", bad), "{bad:?}");
    }
    for ok in [
        "http://127.0.0.1:9000",
        "https://s3.eu-west-1.amazonaws.com",
        "http://minio/base",
    ] {
        assert!(pattern_matches(&backup, "spec.s3.endpoint", ok), "{ok}");
    }
    for bad in ["127.0.0.1:9000", "s3://bucket", "http://", "http://a b"] {
        assert!(!pattern_matches(&backup, "spec.s3.endpoint", bad), "{bad}");
    }
    for ok in ["http://10.0.0.1:2379", "https://etcd-0.etcd.db.svc:2379"] {
        assert!(pattern_matches(&backup, "spec.endpoints.[]", ok), "{ok}");
    }
    assert!(!pattern_matches(
        &backup,
        "spec.endpoints.[]",
        "etcd-0:2379"
    ));
    assert_eq!(node(&backup, "spec.timeoutSeconds")["minimum"], json!(10.0));
    assert_eq!(node(&backup, "spec")["required"], json!(["s3"]));
    assert_eq!(node(&backup, "spec.s3")["required"], json!(["bucket"]));
    assert_eq!(
        node(&backup, "status.phase")["enum"],
        json!(["Pending", "Running", "Succeeded", "Failed"])
    );

    let restore = schema_of(&EtcdRestore::crd());
    assert_eq!(
        node(&restore, "spec")["required"],
        json!(["clusterName", "source"])
    );
    assert_eq!(
        node(&restore, "spec.source.s3")["required"],
        json!(["bucket", "key"])
    );
    let sha = "a".repeat(64);
    assert!(pattern_matches(&restore, "spec.source.sha256", &sha));
    assert!(!pattern_matches(
        &restore,
        "spec.source.sha256",
        &"A".repeat(64)
    ));
    assert!(!pattern_matches(
        &restore,
        "spec.source.sha256",
        &"a".repeat(63)
    ));
    for ok in ["prod/etcd/main/20261122T101500Z-rev4711-1f0c.db", "snap.db"] {
        assert!(pattern_matches(&restore, "spec.source.s3.key", ok), "{ok}");
    }
    for bad in ["/snap.db", "snap db"] {
        assert!(
            !pattern_matches(&restore, "spec.source.s3.key", bad),
            "{bad}"
        );
    }
    // A restore can create the cluster it rebuilds: the embedded spec has the same rules.
    assert_eq!(
        node(&restore, "spec.clusterSpec.size")["maximum"],
        json!(7.0)
    );
}

#[test]
fn every_cel_rule_compiles_and_fits_the_cost_budget() {
    for crd in etcd_api::crd::all() {
        let schema = schema_of(&crd);
        let compiled = compile_schema(&schema);
        assert!(
            !compiled.has_errors(),
            "{:?}: {:?}",
            crd.metadata.name,
            compiled.compilation_errors()
        );
        let mut rules = Vec::new();
        collect_rules(&schema, &mut rules);
        assert!(!rules.is_empty());
        for rule in rules {
            let warnings = analyze_rule(&rule, &compiled, ScopeContext::CrdValidation);
            assert!(warnings.is_empty(), "{rule}: {warnings:?}");
        }
    }
}

fn collect_rules(schema: &Value, rules: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(validations)) = map.get("x-kubernetes-validations") {
                rules.extend(
                    validations
                        .iter()
                        .map(|v| v["rule"].as_str().unwrap().to_owned()),
                );
            }
            map.values().for_each(|v| collect_rules(v, rules));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_rules(v, rules)),
        _ => {}
    }
}

#[test]
fn cluster_name_must_fit_member_dns_names() {
    let schema = schema_of(&EtcdCluster::crd());
    let spec = json!({"size": 3, "version": "3.6.16"});
    assert_eq!(
        cel_errors(&schema, cluster("main", spec.clone()), None),
        Vec::<String>::new()
    );
    assert_eq!(
        cel_errors(&schema, cluster(&"a".repeat(50), spec.clone()), None),
        Vec::<String>::new()
    );
    let expected = vec![
        "metadata.name must be a DNS label of at most 50 characters (lowercase letters, digits and '-', starting with a letter): member Pods, PVCs and Services are named after it".to_owned(),
    ];
    for bad in [
        "a".repeat(51),
        "1main".into(),
        "main-".into(),
        "main.db".into(),
    ] {
        assert_eq!(
            cel_errors(&schema, cluster(&bad, spec.clone()), None),
            expected,
            "{bad}"
        );
    }
}

#[test]
fn election_timeout_must_be_five_heartbeats() {
    let schema = schema_of(&EtcdCluster::crd());
    let message = "electionTimeoutMs must be at least 5 times heartbeatIntervalMs (etcd's defaults are 1000 and 100)";
    let with = |options: Value| {
        cluster(
            "main",
            json!({"size": 3, "version": "3.6.16", "etcdOptions": options}),
        )
    };
    for ok in [
        json!({}),
        json!({"heartbeatIntervalMs": 200}),
        json!({"heartbeatIntervalMs": 100, "electionTimeoutMs": 500}),
        json!({"electionTimeoutMs": 500}),
    ] {
        assert_eq!(
            cel_errors(&schema, with(ok.clone()), None),
            Vec::<String>::new(),
            "{ok}"
        );
    }
    // 300 ms heartbeats against etcd's default 1000 ms election timeout.
    for bad in [
        json!({"heartbeatIntervalMs": 300}),
        json!({"electionTimeoutMs": 499}),
        json!({"heartbeatIntervalMs": 1000, "electionTimeoutMs": 4000}),
    ] {
        assert_eq!(
            cel_errors(&schema, with(bad.clone()), None),
            vec![message.to_owned()],
            "{bad}"
        );
    }
}

#[test]
fn storage_class_is_immutable() {
    let schema = schema_of(&EtcdCluster::crd());
    let with = |storage: Value| {
        cluster(
            "main",
            json!({"size": 3, "version": "3.6.16", "storage": storage}),
        )
    };
    let message = vec![
        "storageClassName is immutable: existing members' volumes cannot move to another class"
            .to_owned(),
    ];
    let fast = with(json!({"storageClassName": "fast"}));
    let slow = with(json!({"storageClassName": "slow"}));
    let unset = with(json!({}));
    assert_eq!(
        cel_errors(&schema, fast.clone(), Some(fast.clone())),
        Vec::<String>::new()
    );
    assert_eq!(
        cel_errors(&schema, slow.clone(), Some(fast.clone())),
        message
    );
    assert_eq!(
        cel_errors(&schema, fast.clone(), Some(unset.clone())),
        message
    );
    assert_eq!(
        cel_errors(&schema, unset.clone(), Some(fast.clone())),
        message
    );
    // Growing the volume and changing the reclaim policy are allowed.
    let bigger =
        with(json!({"storageClassName": "fast", "size": "8Gi", "reclaimPolicy": "Delete"}));
    assert_eq!(
        cel_errors(&schema, bigger, Some(fast)),
        Vec::<String>::new()
    );
}

#[test]
fn backup_targets_exactly_one_cluster_and_never_changes() {
    let schema = schema_of(&EtcdBackup::crd());
    let s3 = json!({"bucket": "etcd-backups"});
    let by_name = backup(json!({"clusterName": "main", "s3": s3}));
    let by_endpoints = backup(json!({"endpoints": ["http://10.0.0.1:2379"], "s3": s3}));
    assert_eq!(
        cel_errors(&schema, by_name.clone(), None),
        Vec::<String>::new()
    );
    assert_eq!(
        cel_errors(&schema, by_endpoints.clone(), None),
        Vec::<String>::new()
    );
    let one_of = vec!["exactly one of spec.clusterName and spec.endpoints must be set".to_owned()];
    assert_eq!(
        cel_errors(
            &schema,
            backup(json!({"clusterName": "main", "endpoints": ["http://a:2379"], "s3": s3})),
            None
        ),
        one_of
    );
    assert_eq!(cel_errors(&schema, backup(json!({"s3": s3})), None), one_of);

    let immutable =
        vec!["spec is immutable: an EtcdBackup runs once; create a new one instead".to_owned()];
    assert_eq!(
        cel_errors(&schema, by_name.clone(), Some(by_name.clone())),
        Vec::<String>::new()
    );
    let other_bucket = backup(json!({"clusterName": "main", "s3": {"bucket": "elsewhere"}}));
    assert_eq!(cel_errors(&schema, other_bucket, Some(by_name)), immutable);

    assert_eq!(
        cel_errors(
            &schema,
            backup(json!({"clusterName": "main", "s3": {"bucket": "a..b"}})),
            None
        ),
        vec!["bucket must not contain '..'".to_owned()]
    );
    assert_eq!(
        cel_errors(
            &schema,
            backup(json!({"clusterName": "main", "s3": {"bucket": "abc", "prefix": "a//b"}})),
            None
        ),
        vec!["prefix must not contain '//' or '..'".to_owned()]
    );
}

#[test]
fn restore_source_is_one_thing_and_fixed_once_set() {
    let schema = schema_of(&EtcdRestore::crd());
    let from_backup =
        restore(json!({"clusterName": "main", "source": {"backupRef": {"name": "b1"}}}));
    let from_s3 = restore(
        json!({"clusterName": "main", "source": {"s3": {"bucket": "etcd-backups", "key": "main/snap.db"}}}),
    );
    assert_eq!(
        cel_errors(&schema, from_backup.clone(), None),
        Vec::<String>::new()
    );
    assert_eq!(
        cel_errors(&schema, from_s3.clone(), None),
        Vec::<String>::new()
    );

    let one_of = vec!["exactly one of source.backupRef and source.s3 must be set".to_owned()];
    let both = restore(
        json!({"clusterName": "main", "source": {"backupRef": {"name": "b1"}, "s3": {"bucket": "etcd-backups", "key": "k"}}}),
    );
    assert_eq!(cel_errors(&schema, both, None), one_of);
    assert_eq!(
        cel_errors(
            &schema,
            restore(json!({"clusterName": "main", "source": {}})),
            None
        ),
        one_of
    );

    assert_eq!(
        cel_errors(&schema, from_s3.clone(), Some(from_backup.clone())),
        vec!["source is immutable once set".to_owned()]
    );
    let other_cluster =
        restore(json!({"clusterName": "other", "source": {"backupRef": {"name": "b1"}}}));
    assert_eq!(
        cel_errors(&schema, other_cluster, Some(from_backup.clone())),
        vec!["clusterName is immutable".to_owned()]
    );
    let forced = restore(
        json!({"clusterName": "main", "force": true, "source": {"backupRef": {"name": "b1"}}}),
    );
    assert_eq!(
        cel_errors(&schema, forced, Some(from_backup)),
        Vec::<String>::new()
    );
}

#[test]
fn tls_sources_are_consistent_and_tls_is_switched_on_never_off() {
    let schema = schema_of(&EtcdCluster::crd());
    let with = |tls: Value| cluster("main", json!({"size": 3, "version": "3.6.16", "tls": tls}));
    let ok = Vec::<String>::new();
    // Operator-managed on both sides, and Secrets you provide with an operator certificate.
    let managed = with(json!({"peer": {}, "client": {"clientCertAuth": true}}));
    assert_eq!(cel_errors(&schema, managed.clone(), None), ok);
    let provided = with(json!({"client": {"secretRef": {"name": "serving"},
        "operatorSecretRef": {"name": "ops"}, "clientCertAuth": true}}));
    assert_eq!(cel_errors(&schema, provided.clone(), None), ok);
    // An operator certificate without a serving Secret: the operator issues its own.
    assert_eq!(
        cel_errors(
            &schema,
            with(json!({"client": {"operatorSecretRef": {"name": "ops"}}})),
            None
        ),
        [
            "operatorSecretRef needs secretRef: with operator-managed certificates the operator issues its own client certificate"
        ]
    );
    // Client certificates required, but none for the operators to present.
    assert_eq!(
        cel_errors(
            &schema,
            with(json!({"client": {"secretRef": {"name": "serving"}, "clientCertAuth": true}})),
            None
        ),
        [
            "clientCertAuth with secretRef needs operatorSecretRef: the client certificate the operators present to the members"
        ]
    );
    // spec.tls may be set on a plaintext cluster (the switch to TLS), never removed or changed.
    let changed = vec!["spec.tls cannot be removed or changed once set: a running plaintext cluster is switched to TLS by setting it, never back to plain HTTP (operator-managed certificates are renewed by themselves; rotate the CA with the annotation etcd.operator.rs/rotate-ca; update a Secret you provide in place)".to_owned()];
    let plain = cluster("main", json!({"size": 3, "version": "3.6.16"}));
    assert_eq!(
        cel_errors(&schema, managed.clone(), Some(managed.clone())),
        ok
    );
    assert_eq!(cel_errors(&schema, plain.clone(), Some(plain.clone())), ok);
    assert_eq!(
        cel_errors(&schema, managed.clone(), Some(plain.clone())),
        ok
    );
    assert_eq!(cel_errors(&schema, plain, Some(managed.clone())), changed);
    assert_eq!(cel_errors(&schema, provided, Some(managed)), changed);
}

#[test]
fn backup_tls_secret_goes_with_endpoints_only() {
    let schema = schema_of(&EtcdBackup::crd());
    let s3 = json!({"bucket": "etcd-backups"});
    let secret = json!({"name": "etcd-client"});
    assert_eq!(
        cel_errors(
            &schema,
            backup(
                json!({"endpoints": ["https://10.0.0.1:2379"], "tlsSecretRef": secret, "s3": s3})
            ),
            None
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        cel_errors(
            &schema,
            backup(json!({"clusterName": "main", "tlsSecretRef": secret, "s3": s3})),
            None
        ),
        [
            "tlsSecretRef is for spec.endpoints: with clusterName the cluster's own TLS settings are used"
        ]
    );
}

#[test]
fn backup_schedule_is_cron_and_refusals_name_the_field() {
    let schema = schema_of(&EtcdCluster::crd());
    let with = |schedule: &str| {
        cluster(
            "main",
            json!({"size": 1, "version": "3.6.16", "backup": {
                "schedule": schedule, "s3": {"bucket": "etcd-backups"}, "retain": 2}}),
        )
    };
    for ok in [
        "* * * * *",
        "0 */6 * * *",
        "30 2 * * 1-5",
        "0,15,30,45 * 1-7/2 JAN-MAR MON",
        "5  4 * * ?",
        "@daily",
        "@hourly",
    ] {
        assert_eq!(
            cel_errors(&schema, with(ok), None),
            Vec::<String>::new(),
            "{ok}"
        );
    }
    for bad in [
        "",
        "* * * *",
        "* * * * * *",
        "every day",
        "@often",
        "0 */6 * * * ; rm",
        "TZ=UTC 0 * * * *",
        "100 * * * *",
    ] {
        let errors = cel_errors(&schema, with(bad), None);
        assert_eq!(
            errors,
            vec![etcd_api::cluster::BACKUP_SCHEDULE_MESSAGE.to_owned()],
            "{bad:?}"
        );
        assert!(errors[0].starts_with("spec.backup.schedule "));
    }
    let s3 = node(&schema, "spec.backup.s3");
    assert_eq!(
        s3["required"],
        json!(["bucket"]),
        "the same S3 fields as EtcdBackup.spec.s3"
    );
    assert_eq!(
        node(&schema, "spec.backup.timeoutSeconds")["minimum"].as_f64(),
        Some(10.0)
    );
}

#[test]
fn defrag_schedule_is_cron_and_refusals_name_the_field() {
    let schema = schema_of(&EtcdCluster::crd());
    let with = |schedule: &str| {
        cluster(
            "main",
            json!({"size": 3, "version": "3.6.16", "maintenance": {"defrag": {
                "schedule": schedule, "windowMinutes": 120}}}),
        )
    };
    assert_eq!(
        cel_errors(&schema, with("0 2 * * *"), None),
        Vec::<String>::new()
    );
    assert_eq!(
        cel_errors(&schema, with("nightly"), None),
        vec![etcd_api::cluster::DEFRAG_SCHEDULE_MESSAGE.to_owned()]
    );
    assert_eq!(
        node(&schema, "spec.maintenance.defrag.windowMinutes")["minimum"].as_f64(),
        Some(1.0)
    );
}
