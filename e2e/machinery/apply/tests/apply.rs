//! Server-side apply scenarios, checked against what kube-apiserver records and answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{
    Endpoint, Owner, configmap_schema, conflict_message, deployment_schema, owner, owners,
};
use localkube_apply::{ApplyError, Deduced, FieldSet, Operation, field};
use serde_json::{Value, json};

const T1: &str = "2024-05-01T10:00:01Z";
const T2: &str = "2024-05-01T10:00:02Z";
const T3: &str = "2024-05-01T10:00:03Z";
const T4: &str = "2024-05-01T10:00:04Z";

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "test-cm", "namespace": "default"}, "data": data})
}

fn deploy(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

/// Gives a created object the identity the server assigns.
fn stored(mut obj: Value) -> Value {
    obj["metadata"]["uid"] = json!("6b2c0f6e-0000-4000-8000-000000000001");
    obj["metadata"]["resourceVersion"] = json!("1");
    obj
}

#[test]
fn first_apply_creates_ownership_like_the_docs_sample() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let applied = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "test-cm", "namespace": "default", "labels": {"test-label": "test"}},
        "data": {"key": "some value"}
    });
    let obj = ep
        .apply("kubectl", "2010-10-10T00:00:00Z", None, &applied, false)
        .unwrap();
    assert_eq!(
        obj,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "test-cm", "namespace": "default", "labels": {"test-label": "test"},
                "managedFields": [{
                    "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                    "time": "2010-10-10T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:test-label": {}}}, "f:data": {"f:key": {}}}
                }]},
            "data": {"key": "some value"}
        })
    );
    assert_eq!(
        owners(&obj),
        [owner(
            "kubectl",
            Operation::Apply,
            "",
            r#"{"f:data":{"f:key":{}},"f:metadata":{"f:labels":{"f:test-label":{}}}}"#
        )]
    );
}

#[test]
fn reapply_removes_what_the_applier_stopped_applying() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let mut first = cm(json!({"key": "v", "old": "o"}));
    first["metadata"]["labels"] = json!({"team": "a"});
    let live = stored(ep.apply("kubectl", T1, None, &first, false).unwrap());
    let obj = ep
        .apply("kubectl", T2, Some(&live), &cm(json!({"key": "v2"})), false)
        .unwrap();
    assert_eq!(obj["data"], json!({"key": "v2"}));
    assert_eq!(
        obj["metadata"].get("labels"),
        None,
        "declared fields go whole"
    );
    assert_eq!(
        obj["metadata"]["uid"], live["metadata"]["uid"],
        "unowned fields stay"
    );
    assert_eq!(
        owners(&obj),
        [owner(
            "kubectl",
            Operation::Apply,
            "",
            r#"{"f:data":{"f:key":{}}}"#
        )]
    );
    assert_eq!(obj["metadata"]["managedFields"][0]["time"], T2);
}

#[test]
fn fields_shared_with_another_manager_survive_pruning() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let live = stored(
        ep.apply(
            "a",
            T1,
            None,
            &cm(json!({"shared": "s", "mine": "m"})),
            false,
        )
        .unwrap(),
    );
    // Same value: no conflict, shared ownership.
    let live = ep
        .apply("b", T2, Some(&live), &cm(json!({"shared": "s"})), false)
        .unwrap();
    let mut without_data = cm(json!({}));
    without_data.as_object_mut().unwrap().remove("data");
    let obj = ep
        .apply("a", T3, Some(&live), &without_data, false)
        .unwrap();
    assert_eq!(obj["data"], json!({"shared": "s"}));
    assert_eq!(
        owners(&obj),
        [owner(
            "b",
            Operation::Apply,
            "",
            r#"{"f:data":{"f:shared":{}}}"#
        )]
    );
    // Applying an empty map claims the map itself, as structured-merge-diff does.
    let obj = ep
        .apply("a", T3, Some(&live), &cm(json!({})), false)
        .unwrap();
    assert_eq!(obj["data"], json!({"shared": "s"}));
    assert_eq!(
        owners(&obj)[1],
        owner("a", Operation::Apply, "", r#"{"f:data":{}}"#)
    );
}

#[test]
fn two_appliers_conflict_and_force_takes_the_field_over() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let live = stored(
        ep.apply(
            "helm",
            T1,
            None,
            &cm(json!({"key": "a", "keep": "k"})),
            false,
        )
        .unwrap(),
    );
    let theirs = cm(json!({"key": "b"}));

    let err = ep
        .apply("other", T2, Some(&live), &theirs, false)
        .unwrap_err();
    let ApplyError::Conflict(conflict) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        conflict.message,
        r#"Apply failed with 1 conflict: conflict with "helm": .data.key"#
    );
    assert_eq!(
        conflict.to_status(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Apply failed with 1 conflict: conflict with \"helm\": .data.key",
            "reason": "Conflict",
            "details": {"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"helm\"", "field": ".data.key"}]},
            "code": 409
        })
    );

    let obj = ep.apply("other", T2, Some(&live), &theirs, true).unwrap();
    assert_eq!(obj["data"], json!({"key": "b", "keep": "k"}));
    assert_eq!(
        owners(&obj),
        [
            owner("helm", Operation::Apply, "", r#"{"f:data":{"f:keep":{}}}"#),
            owner("other", Operation::Apply, "", r#"{"f:data":{"f:key":{}}}"#),
        ]
    );
    // helm, applying its old value again, now conflicts with the new owner.
    let again = ep.apply(
        "helm",
        T3,
        Some(&obj),
        &cm(json!({"key": "a", "keep": "k"})),
        false,
    );
    assert_eq!(
        conflict_message(again),
        r#"Apply failed with 1 conflict: conflict with "other": .data.key"#
    );
}

#[test]
fn updaters_own_what_they_change_and_appliers_conflict_with_them() {
    let schema = deployment_schema();
    let ep = Endpoint::new("apps/v1", &schema);
    let created = ep.update(
        "kubectl-client-side-apply",
        T1,
        None,
        &deploy(json!({"replicas": 3, "paused": false,
            "template": {"spec": {"containers": [{"name": "a", "image": "nginx:1"}]}}})),
    );
    let live = stored(created);
    assert_eq!(
        owners(&live),
        [owner(
            "kubectl-client-side-apply",
            Operation::Update,
            "",
            r#"{"f:spec":{".":{},"f:paused":{},"f:replicas":{},"f:template":{".":{},"f:spec":{".":{},"f:containers":{".":{},"k:{\"name\":\"a\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#
        )]
    );

    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "one field",
            deploy(json!({"replicas": 5})),
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#,
        ),
        (
            "several fields",
            deploy(json!({"replicas": 5, "paused": true,
                "template": {"spec": {"containers": [{"name": "a", "image": "nginx:2"}]}}})),
            "Apply failed with 3 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1:\n- .spec.paused\n- .spec.replicas\n- .spec.template.spec.containers[name=\"a\"].image",
        ),
    ];
    for (name, applied, want) in cases {
        assert_eq!(
            conflict_message(ep.apply("helm", T2, Some(&live), &applied, false)),
            want,
            "{name}"
        );
    }
    // The same values do not conflict: helm co-owns them.
    let obj = ep
        .apply(
            "helm",
            T2,
            Some(&live),
            &deploy(json!({"replicas": 3})),
            false,
        )
        .unwrap();
    assert_eq!(obj["spec"]["replicas"], 3);
    assert_eq!(
        owners(&obj)[0],
        owner(
            "helm",
            Operation::Apply,
            "",
            r#"{"f:spec":{"f:replicas":{}}}"#
        )
    );
}

#[test]
fn conflicts_list_managers_in_identifier_order() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let live = stored(
        ep.apply("zeta", T1, None, &cm(json!({"z": "1"})), false)
            .unwrap(),
    );
    let live = ep.update("kube-rs", T2, Some(&live), &{
        let mut next = live.clone();
        next["data"]["k"] = json!("1");
        next
    });
    let live = ep
        .apply("alpha", T3, Some(&live), &cm(json!({"a": "1"})), false)
        .unwrap();
    let err = ep.apply(
        "me",
        T4,
        Some(&live),
        &cm(json!({"a": "2", "k": "2", "z": "2"})),
        false,
    );
    assert_eq!(
        conflict_message(err),
        "Apply failed with 3 conflicts: conflicts with \"alpha\":\n- .data.a\nconflicts with \"kube-rs\" using v1:\n- .data.k\nconflicts with \"zeta\":\n- .data.z"
    );
}

#[test]
fn list_map_items_are_owned_per_key() {
    let schema = deployment_schema();
    let ep = Endpoint::new("apps/v1", &schema);
    let with =
        |containers: Value| deploy(json!({"template": {"spec": {"containers": containers}}}));
    let live = stored(
        ep.apply(
            "a",
            T1,
            None,
            &with(json!([{"name": "a", "image": "a:1", "ports": [{"containerPort": 80}]}])),
            false,
        )
        .unwrap(),
    );
    let live = ep
        .apply(
            "b",
            T2,
            Some(&live),
            &with(json!([{"name": "b", "image": "b:1"}])),
            false,
        )
        .unwrap();
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "a:1", "ports": [{"containerPort": 80}]}, {"name": "b", "image": "b:1"}])
    );
    assert_eq!(
        owners(&live),
        [
            owner(
                "a",
                Operation::Apply,
                "",
                r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}"#
            ),
            owner(
                "b",
                Operation::Apply,
                "",
                r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"b\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#
            ),
        ]
    );
    assert_eq!(
        conflict_message(ep.apply(
            "b",
            T3,
            Some(&live),
            &with(json!([{"name": "a", "image": "a:2"}, {"name": "b", "image": "b:1"}])),
            false
        )),
        r#"Apply failed with 1 conflict: conflict with "a": .spec.template.spec.containers[name="a"].image"#
    );
    // a stops applying its container: only b's stays, and a owns nothing any more.
    let obj = ep
        .apply("a", T3, Some(&live), &with(json!([])), false)
        .unwrap();
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b", "image": "b:1"}])
    );
    assert_eq!(owners(&obj).len(), 1);
}

#[test]
fn shared_list_items_follow_the_applied_order() {
    let schema = deployment_schema();
    let ep = Endpoint::new("apps/v1", &schema);
    let with = |names: &[&str]| {
        let containers: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        deploy(json!({"template": {"spec": {"containers": containers}}}))
    };
    let live = stored(
        ep.apply("a", T1, None, &with(&["x", "y", "z"]), false)
            .unwrap(),
    );
    let obj = ep
        .apply("b", T2, Some(&live), &with(&["z", "new", "x"]), false)
        .unwrap();
    let names: Vec<&str> = obj["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["y", "z", "new", "x"]);
}

#[test]
fn set_lists_merge_per_value() {
    let schema = Deduced;
    let ep = Endpoint::new("v1", &schema);
    let with = |finalizers: Value| json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t", "finalizers": finalizers}});
    let live = stored(
        ep.apply("a", T1, None, &with(json!(["example.com/x"])), false)
            .unwrap(),
    );
    let live = ep
        .apply("b", T2, Some(&live), &with(json!(["example.com/y"])), false)
        .unwrap();
    assert_eq!(
        live["metadata"]["finalizers"],
        json!(["example.com/x", "example.com/y"])
    );
    assert_eq!(
        owners(&live),
        [
            owner(
                "a",
                Operation::Apply,
                "",
                r#"{"f:metadata":{"f:finalizers":{"v:\"example.com/x\"":{}}}}"#
            ),
            owner(
                "b",
                Operation::Apply,
                "",
                r#"{"f:metadata":{"f:finalizers":{"v:\"example.com/y\"":{}}}}"#
            ),
        ]
    );
    let obj = ep
        .apply(
            "a",
            T3,
            Some(&live),
            &json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}}),
            false,
        )
        .unwrap();
    assert_eq!(obj["metadata"]["finalizers"], json!(["example.com/y"]));
}

#[test]
fn status_is_applied_through_its_subresource() {
    let schema = deployment_schema();
    let mut main = Endpoint::new("apps/v1", &schema);
    main.reset = FieldSet::from_paths([[field("status")].as_slice()]);
    let mut status = Endpoint::new("apps/v1", &schema);
    status.subresource = "status";
    status.reset = FieldSet::from_paths([[field("spec")].as_slice()]);

    let mut applied = deploy(json!({"replicas": 1}));
    applied["status"] = json!({"phase": "Pending"});
    let live = stored(main.apply("helm", T1, None, &applied, false).unwrap());
    assert_eq!(
        owners(&live),
        [owner(
            "helm",
            Operation::Apply,
            "",
            r#"{"f:spec":{"f:replicas":{}}}"#
        )]
    );

    let mut report = deploy(json!({"replicas": 9}));
    report["status"] =
        json!({"phase": "Ready", "conditions": [{"type": "Available", "status": "True"}]});
    let live = status
        .apply("operator", T2, Some(&live), &report, false)
        .unwrap();
    assert_eq!(
        owners(&live),
        [
            owner(
                "helm",
                Operation::Apply,
                "",
                r#"{"f:spec":{"f:replicas":{}}}"#
            ),
            owner(
                "operator",
                Operation::Apply,
                "status",
                r#"{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:status":{},"f:type":{}}},"f:phase":{}}}"#
            ),
        ]
    );
    assert_eq!(
        live["metadata"]["managedFields"][1]["subresource"],
        "status"
    );

    let mut rival = deploy(json!({}));
    rival["status"] = json!({"phase": "Failed"});
    assert_eq!(
        conflict_message(status.apply("other", T3, Some(&live), &rival, false)),
        r#"Apply failed with 1 conflict: conflict with "operator" with subresource "status": .status.phase"#
    );
    // Through the main endpoint status is neither owned nor contested.
    assert!(main.apply("other", T3, Some(&live), &rival, false).is_ok());

    // A status write that is not an apply (kube-rs replace_status) is an Update on "status".
    let mut next = live.clone();
    next["status"]["replicas"] = json!(1);
    let updated = status.update("kube-rs", T3, Some(&live), &next);
    assert_eq!(
        owners(&updated)[2],
        owner(
            "kube-rs",
            Operation::Update,
            "status",
            r#"{"f:status":{"f:replicas":{}}}"#
        )
    );
}

#[test]
fn record_update_tracks_non_apply_writes() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let mut created = cm(json!({"a": "1", "b": "1"}));
    created["metadata"]["labels"] = json!({"x": "y"});
    let live = stored(ep.update("kubectl-create", T1, None, &created));
    assert_eq!(
        owners(&live),
        [owner(
            "kubectl-create",
            Operation::Update,
            "",
            r#"{"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}"#
        )]
    );
    assert_eq!(live["metadata"]["managedFields"][0]["time"], T1);

    let edit = |f: &dyn Fn(&mut Value)| {
        let mut next = live.clone();
        f(&mut next);
        next
    };
    let cases: Vec<(&str, Value, Vec<Owner>)> = vec![
        (
            "a change moves the field",
            edit(&|o| o["data"]["a"] = json!("2")),
            vec![
                owner(
                    "kubectl-create",
                    Operation::Update,
                    "",
                    r#"{"f:data":{".":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}"#,
                ),
                owner(
                    "kubectl-edit",
                    Operation::Update,
                    "",
                    r#"{"f:data":{"f:a":{}}}"#,
                ),
            ],
        ),
        (
            "a removal drops the field from its owner",
            edit(&|o| {
                o["data"].as_object_mut().unwrap().remove("b");
            }),
            vec![owner(
                "kubectl-create",
                Operation::Update,
                "",
                r#"{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}"#,
            )],
        ),
        (
            "no change, no entry",
            edit(&|_| {}),
            vec![owner(
                "kubectl-create",
                Operation::Update,
                "",
                r#"{"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}"#,
            )],
        ),
        (
            "identity-only change, no entry",
            edit(&|o| {
                o["metadata"]["resourceVersion"] = json!("2");
                o["metadata"]["generation"] = json!(2);
            }),
            vec![owner(
                "kubectl-create",
                Operation::Update,
                "",
                r#"{"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}"#,
            )],
        ),
        (
            "managedFields: [] clears tracking",
            edit(&|o| o["metadata"]["managedFields"] = json!([])),
            vec![],
        ),
    ];
    for (name, new, want) in cases {
        let obj = ep.update("kubectl-edit", T2, Some(&live), &new);
        assert_eq!(owners(&obj), want, "{name}");
    }

    // Nor does it move the writer's own time.
    let mut bumped = live.clone();
    bumped["metadata"]["generation"] = json!(2);
    let obj = ep.update("kubectl-create", T2, Some(&live), &bumped);
    assert_eq!(obj["metadata"]["managedFields"][0]["time"], T1);

    // An existing object without managedFields stays untracked.
    let mut untracked = live.clone();
    untracked["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    let mut next = untracked.clone();
    next["data"]["a"] = json!("3");
    assert_eq!(
        ep.update("x", T2, Some(&untracked), &next)["metadata"].get("managedFields"),
        None
    );

    // Sent managedFields replace the stored ones (helm's client-side-apply upgrade does this).
    let mut upgraded = live.clone();
    upgraded["metadata"]["managedFields"][0]["manager"] = json!("helm");
    upgraded["metadata"]["managedFields"][0]["operation"] = json!("Apply");
    let obj = ep.update("helm", T2, Some(&live), &upgraded);
    assert_eq!(owners(&obj)[0].0, "helm");
    assert_eq!(owners(&obj)[0].1, Operation::Apply);
}

#[test]
fn apply_to_an_untracked_object_credits_before_first_apply() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let live = stored(cm(json!({"a": "1"})));
    assert_eq!(
        conflict_message(ep.apply("helm", T1, Some(&live), &cm(json!({"a": "2"})), false)),
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a"#
    );
    let obj = ep
        .apply("helm", T1, Some(&live), &cm(json!({"b": "2"})), false)
        .unwrap();
    assert_eq!(
        owners(&obj),
        [
            owner("helm", Operation::Apply, "", r#"{"f:data":{"f:b":{}}}"#),
            owner(
                "before-first-apply",
                Operation::Update,
                "",
                r#"{"f:data":{".":{},"f:a":{}}}"#
            ),
        ]
    );
}

#[test]
fn unchanged_apply_keeps_the_time() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let live = stored(
        ep.apply("helm", T1, None, &cm(json!({"a": "1"})), false)
            .unwrap(),
    );
    let again = ep
        .apply("helm", T2, Some(&live), &cm(json!({"a": "1"})), false)
        .unwrap();
    assert_eq!(again, live);
    // A new co-owner of unchanged values gets an entry without time, as in kube-apiserver.
    let shared = ep
        .apply("other", T2, Some(&live), &cm(json!({"a": "1"})), false)
        .unwrap();
    let entries = shared["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries[0]["manager"], "other");
    assert_eq!(entries[0].get("time"), None);
}

#[test]
fn kubectl_server_side_apply_upgrades_client_side_apply() {
    let schema = deployment_schema();
    let ep = Endpoint::new("apps/v1", &schema);
    let last = deploy(json!({"replicas": 3}));
    let mut created = last.clone();
    created["metadata"]["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": serde_json::to_string(&last).unwrap()
    });
    let live = stored(ep.update("kubectl-client-side-apply", T1, None, &created));
    let applied = deploy(json!({"replicas": 5}));

    let obj = ep
        .apply("kubectl", T2, Some(&live), &applied, false)
        .unwrap();
    assert_eq!(obj["spec"]["replicas"], 5);
    assert_eq!(
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"replicas\":5}}\n"
    );
    assert_eq!(
        owners(&obj)[0],
        owner(
            "kubectl",
            Operation::Apply,
            "",
            r#"{"f:spec":{"f:replicas":{}}}"#
        )
    );

    // Other managers get no such leniency.
    assert!(matches!(
        ep.apply("helm", T2, Some(&live), &applied, false),
        Err(ApplyError::Conflict(_))
    ));
    // Nor does kubectl when the live value drifted from the annotation.
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(7);
    let scaled = ep.update("kube-controller-manager", T2, Some(&live), &scaled);
    assert_eq!(
        conflict_message(ep.apply("kubectl", T3, Some(&scaled), &applied, false)),
        r#"Apply failed with 1 conflict: conflict with "kube-controller-manager" using apps/v1: .spec.replicas"#
    );
}

#[test]
fn eleven_update_managers_fold_the_oldest_into_ancient_changes() {
    let schema = configmap_schema();
    let ep = Endpoint::new("v1", &schema);
    let mut live = stored(ep.update(
        "m00",
        "2024-01-01T00:00:00Z",
        None,
        &cm(json!({"k00": "x"})),
    ));
    for i in 1..=10 {
        let mut next = live.clone();
        next["data"][format!("k{i:02}")] = json!("x");
        live = ep.update(
            &format!("m{i:02}"),
            &format!("2024-01-01T00:00:{i:02}Z"),
            Some(&live),
            &next,
        );
    }
    let rows = owners(&live);
    assert_eq!(rows.len(), 10);
    assert_eq!(
        rows[0],
        owner(
            "ancient-changes",
            Operation::Update,
            "",
            r#"{"f:data":{".":{},"f:k00":{},"f:k01":{}}}"#
        )
    );
    assert_eq!(
        live["metadata"]["managedFields"][0]["time"],
        "2024-01-01T00:00:01Z"
    );
    assert_eq!(rows[9].0, "m10");
}

#[test]
fn malformed_requests_are_refused() {
    let schema = deployment_schema();
    let ep = Endpoint::new("apps/v1", &schema);
    let mut with_managed = deploy(json!({}));
    with_managed["metadata"]["managedFields"] = json!([]);
    let mut bad_live = stored(deploy(json!({})));
    bad_live["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Merge", "apiVersion": "v1", "fieldsType": "FieldsV1"}]);
    let containers = |c: Value| deploy(json!({"template": {"spec": {"containers": c}}}));

    let cases: Vec<(&str, Option<Value>, Value, ApplyError)> = vec![
        ("managedFields in the patch", None, with_managed, ApplyError::BadRequest("metadata.managedFields must be nil".into())),
        ("not an object", None, json!([1]), ApplyError::BadRequest("apply patch must be an object".into())),
        (
            "duplicate keys",
            None,
            containers(json!([{"name": "a"}, {"name": "a"}])),
            ApplyError::Invalid(r#".spec.template.spec.containers: duplicate entries for key [name="a"]"#.into()),
        ),
        (
            "several problems at once",
            None,
            containers(json!([{"name": "a"}, {"name": "a"}, {"image": "x"}])),
            ApplyError::Invalid("errors:\n  .spec.template.spec.containers: duplicate entries for key [name=\"a\"]\n  .spec.template.spec.containers: element 2: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)".into()),
        ),
        (
            "item without key",
            None,
            containers(json!([{"image": "x"}])),
            ApplyError::Invalid(r#".spec.template.spec.containers: element 0: associative list with keys has an element that omits all key fields ["name"] (and doesn't have default values for any key fields)"#.into()),
        ),
        (
            "scalar in a keyed list",
            None,
            containers(json!(["a"])),
            ApplyError::Invalid(".spec.template.spec.containers: element 0: associative list with keys may not have non-map elements".into()),
        ),
        (
            "undecodable live managedFields",
            Some(bad_live),
            deploy(json!({"replicas": 1})),
            ApplyError::ManagedFields("operation must be `Apply` or `Update`".into()),
        ),
    ];
    for (name, live, applied, want) in cases {
        assert_eq!(
            ep.apply("helm", T1, live.as_ref(), &applied, false),
            Err(want),
            "{name}"
        );
    }
}

#[test]
fn deep_and_hostile_input_gives_errors_not_crashes() {
    let schema = Deduced;
    let ep = Endpoint::new("v1", &schema);
    let mut deep = json!("leaf");
    for _ in 0..300 {
        deep = json!({ "a": deep });
    }
    let applied =
        json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": deep});
    assert!(matches!(
        ep.apply("x", T1, None, &applied, false),
        Err(ApplyError::Invalid(_))
    ));
    // record_update never fails: it keeps the old managedFields.
    let live = stored(ep.apply("x", T1, None, &json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"a": 1}}), false).unwrap());
    let mut next = live.clone();
    next["spec"] = applied["spec"].clone();
    let obj = ep.update("y", T2, Some(&live), &next);
    assert_eq!(
        obj["metadata"]["managedFields"],
        live["metadata"]["managedFields"]
    );
}
