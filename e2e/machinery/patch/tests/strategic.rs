//! Strategic merge patch for built-in kinds, against what apimachinery's `strategicpatch`
//! produces on the server: kubectl-apply and helm-upgrade shaped patches, every directive,
//! the per-kind merge keys, list order, and the error texts and statuses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use localkube_patch::{
    GroupKind, ListStrategy, PatchError, UNPROCESSABLE_MESSAGE, list_merge_key,
    strategic_merge_patch, supports_strategic_merge,
};
use serde_json::{Value, json};

const POD: GroupKind<'static> = GroupKind::new("", "Pod");
const DEPLOYMENT: GroupKind<'static> = GroupKind::new("apps", "Deployment");

fn smp(doc: &Value, patch: Value, kind: GroupKind<'_>) -> Value {
    strategic_merge_patch(doc, &patch, kind).unwrap_or_else(|e| panic!("{e}"))
}

fn smp_err(doc: &Value, patch: Value, kind: GroupKind<'_>) -> PatchError {
    strategic_merge_patch(doc, &patch, kind).expect_err("the patch should fail")
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| item["name"].as_str().unwrap())
        .collect()
}

/// A live Deployment as kube-apiserver stores it after defaulting.
fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "generation": 1,
            "labels": {"app": "web"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"old\":true}"}
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "web",
                        "image": "nginx:1.27",
                        "env": [
                            {"name": "A", "value": "1"},
                            {"name": "B", "value": "2"},
                            {"name": "C", "value": "3"}
                        ],
                        "ports": [
                            {"containerPort": 80, "protocol": "TCP"},
                            {"containerPort": 8080, "protocol": "TCP"}
                        ],
                        "imagePullPolicy": "IfNotPresent"
                    }],
                    "restartPolicy": "Always"
                }
            }
        }
    })
}

fn container(doc: &Value) -> &Value {
    &doc["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn kubectl_apply_changes_one_env_var_and_keeps_the_order() {
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
                "env": [{"name": "B", "value": "two"}],
                "name": "web"
            }]
        }}}
    });
    let live = deployment();
    let got = smp(&live, patch, DEPLOYMENT);
    let mut want = live;
    want["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!("{\"new\":true}");
    want["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] = json!("two");
    assert_eq!(got, want);
}

#[test]
fn set_element_order_places_new_items_and_plain_merges_put_them_first() {
    let live = deployment();
    let with_order = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "web"}],
        "containers": [{
            "$setElementOrder/env": [{"name": "A"}, {"name": "N"}, {"name": "B"}, {"name": "C"}],
            "env": [{"name": "N", "value": "new"}],
            "name": "web"
        }]
    }}}});
    let got = smp(&live, with_order, DEPLOYMENT);
    assert_eq!(names(&container(&got)["env"]), ["A", "N", "B", "C"]);

    // `kubectl patch` without the directive: Go's order puts the new item in front.
    let without_order = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "web", "env": [{"name": "N", "value": "new"}]}]
    }}}});
    let got = smp(&live, without_order, DEPLOYMENT);
    assert_eq!(names(&container(&got)["env"]), ["N", "A", "B", "C"]);

    // Patch items take the patch's order; server-only items stay before the patch item that
    // followed them in the live list.
    let reordered = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "web", "env": [{"name": "C", "value": "c"}, {"name": "A", "value": "a"}]}]
    }}}});
    let got = smp(&live, reordered, DEPLOYMENT);
    assert_eq!(names(&container(&got)["env"]), ["B", "C", "A"]);
}

#[test]
fn helm_upgrade_three_way_patch() {
    // Shape of helm's createPatch (CreateThreeWayMergePatch): a new image, a label, a
    // rotated checksum annotation, a removed port and a field reset to its default.
    let patch = json!({
        "metadata": {"labels": {"app.kubernetes.io/version": "2.0"}},
        "spec": {"template": {
            "metadata": {"annotations": {"checksum/config": "bbb"}},
            "spec": {
                "$setElementOrder/containers": [{"name": "web"}],
                "containers": [{
                    "$setElementOrder/ports": [{"containerPort": 8080}],
                    "image": "nginx:1.28",
                    "imagePullPolicy": null,
                    "name": "web",
                    "ports": [{"$patch": "delete", "containerPort": 80}]
                }]
            }
        }}
    });
    let got = smp(&deployment(), patch, DEPLOYMENT);
    assert_eq!(
        got["metadata"]["labels"],
        json!({"app": "web", "app.kubernetes.io/version": "2.0"})
    );
    assert_eq!(
        got["spec"]["template"]["metadata"],
        json!({"labels": {"app": "web"}, "annotations": {"checksum/config": "bbb"}})
    );
    let c = container(&got);
    assert_eq!(c["image"], "nginx:1.28");
    assert!(c.get("imagePullPolicy").is_none());
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 8080, "protocol": "TCP"}])
    );
    assert_eq!(names(&c["env"]), ["A", "B", "C"]);
}

#[test]
fn list_item_directives() {
    let pod = json!({"spec": {"containers": [
        {"name": "a", "image": "1"}, {"name": "b", "image": "1"}, {"name": "a", "image": "dup"}
    ]}});
    let got = smp(
        &pod,
        json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        POD,
    );
    assert_eq!(
        got["spec"]["containers"],
        json!([{"name": "b", "image": "1"}])
    );

    let got = smp(
        &pod,
        json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": "2"}]}}),
        POD,
    );
    assert_eq!(
        got["spec"]["containers"],
        json!([{"name": "c", "image": "2"}])
    );

    let got = smp(
        &pod,
        json!({"spec": {"containers": [{"$patch": "replace"}]}}),
        POD,
    );
    assert_eq!(got["spec"]["containers"], json!([]));
}

#[test]
fn deleting_and_adding_under_set_element_order_keeps_gos_order() {
    // Go deletes and appends in the original list's array, and `$setElementOrder` then orders
    // server-only items by that rewritten array: "4" ends up before the new "3".
    let pod = json!({"spec": {"containers": [
        {"name": "1"}, {"name": "2", "image": "b"}, {"name": "4", "image": "c"}
    ]}});
    let patch = json!({"spec": {
        "$setElementOrder/containers": [{"name": "2"}, {"name": "3"}],
        "containers": [{"name": "3"}, {"$patch": "delete", "name": "1"}]
    }});
    let got = smp(&pod, patch, POD);
    assert_eq!(
        got["spec"]["containers"],
        json!([{"name": "2", "image": "b"}, {"name": "4", "image": "c"}, {"name": "3"}])
    );
}

#[test]
fn map_directives_and_nulls() {
    let pod = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}, "spec": {"nodeSelector": {"x": "y"}}});
    let cases = [
        (
            "$patch: replace replaces the map",
            json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
            json!({"metadata": {"name": "p", "labels": {"c": "3"}}, "spec": {"nodeSelector": {"x": "y"}}}),
        ),
        (
            "$patch: delete empties the map",
            json!({"metadata": {"labels": {"$patch": "delete"}}}),
            json!({"metadata": {"name": "p", "labels": {}}, "spec": {"nodeSelector": {"x": "y"}}}),
        ),
        (
            "null deletes a member",
            json!({"metadata": {"labels": {"a": null}}, "spec": {"nodeSelector": null}}),
            json!({"metadata": {"name": "p", "labels": {"b": "2"}}, "spec": {}}),
        ),
        (
            "a directive map where the object has nothing is dropped",
            json!({"metadata": {"annotations": {"$patch": "replace", "k": "v"}}}),
            pod.clone(),
        ),
        (
            "new maps lose their nulls",
            json!({"metadata": {"annotations": {"k": "v", "gone": null}}}),
            json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "annotations": {"k": "v"}}, "spec": {"nodeSelector": {"x": "y"}}}),
        ),
        (
            "$patch: replace at the root replaces the object",
            json!({"$patch": "replace", "kind": "Pod"}),
            json!({"kind": "Pod"}),
        ),
    ];
    for (name, patch, want) in cases {
        assert_eq!(smp(&pod, patch, POD), want, "{name}");
    }
}

#[test]
fn primitive_merge_lists_and_their_directives() {
    let doc = json!({"metadata": {"name": "p", "finalizers": ["a", "b"]}});
    let finalizers =
        |patch: Value| smp(&doc, json!({"metadata": patch}), POD)["metadata"]["finalizers"].clone();
    assert_eq!(
        finalizers(json!({"finalizers": ["c"]})),
        json!(["c", "a", "b"])
    );
    assert_eq!(
        finalizers(json!({"finalizers": ["b", "c"]})),
        json!(["a", "b", "c"])
    );
    assert_eq!(
        finalizers(json!({"$setElementOrder/finalizers": ["a", "b", "c"], "finalizers": ["c"]})),
        json!(["a", "b", "c"])
    );
    assert_eq!(
        finalizers(json!({"$deleteFromPrimitiveList/finalizers": ["a"]})),
        json!(["b"])
    );
    // kubectl apply removing a finalizer.
    assert_eq!(
        finalizers(
            json!({"$setElementOrder/finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]})
        ),
        json!(["b"])
    );
    assert_eq!(
        finalizers(json!({"$deleteFromPrimitiveList/finalizers": ["zz"]})),
        json!(["a", "b"])
    );
    // A deletion list for a list the object lacks adds nothing.
    let pod = json!({"spec": {"containers": [{"name": "a"}]}});
    let got = smp(
        &pod,
        json!({"spec": {"containers": [{"name": "a", "$deleteFromPrimitiveList/args": ["x"]}]}}),
        POD,
    );
    assert_eq!(got, pod);
    // Node podCIDRs is the other merged primitive list.
    let node = json!({"spec": {"podCIDRs": ["10.0.0.0/24"]}});
    let got = smp(
        &node,
        json!({"spec": {"podCIDRs": ["fd00::/64"]}}),
        GroupKind::new("", "Node"),
    );
    assert_eq!(got["spec"]["podCIDRs"], json!(["fd00::/64", "10.0.0.0/24"]));
}

#[test]
fn retain_keys() {
    let recreate = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}});
    let got = smp(&deployment(), recreate, DEPLOYMENT);
    assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));

    let pod = json!({"spec": {"volumes": [
        {"name": "v", "configMap": {"name": "c"}},
        {"name": "w", "emptyDir": {}}
    ]}});
    let to_secret = json!({"spec": {"volumes": [
        {"$retainKeys": ["name", "secret"], "name": "v", "secret": {"secretName": "s"}}
    ]}});
    let got = smp(&pod, to_secret, POD);
    assert_eq!(
        got["spec"]["volumes"],
        json!([{"name": "v", "secret": {"secretName": "s"}}, {"name": "w", "emptyDir": {}}])
    );

    for bad in [
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}}),
        json!({"spec": {"strategy": {"$retainKeys": "type", "type": "Recreate"}}}),
    ] {
        let error = smp_err(&deployment(), bad, DEPLOYMENT);
        assert_eq!(error, PatchError::BadPatchFormatForRetainKeys);
        assert_eq!(error.status().code, 400);
        assert_eq!(error.status().message, "invalid patch format of retainKeys");
    }
}

#[test]
fn merge_keys_of_the_core_kinds() {
    let pod = json!({
        "metadata": {"ownerReferences": [{"uid": "u1", "name": "a"}, {"uid": "u2", "name": "b"}]},
        "spec": {
            "initContainers": [{"name": "init", "image": "1"}],
            "containers": [{
                "name": "c",
                "ports": [{"containerPort": 80, "name": "http"}],
                "volumeMounts": [{"name": "a", "mountPath": "/a"}],
                "args": ["x", "y"]
            }],
            "imagePullSecrets": [{"name": "s1"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
            "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}],
            "tolerations": [{"key": "a", "operator": "Exists"}]
        },
        "status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "Initialized", "status": "True"}
        ]}
    });
    let patch = json!({
        "metadata": {"ownerReferences": [{"uid": "u2", "controller": true}]},
        "spec": {
            "initContainers": [{"name": "init", "image": "2"}],
            "containers": [{
                "name": "c",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "volumeMounts": [{"name": "b", "mountPath": "/a"}],
                "args": ["z"]
            }],
            "imagePullSecrets": [{"name": "s2"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}],
            "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}],
            "tolerations": [{"key": "b", "operator": "Exists"}]
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    });
    let want = json!({
        "metadata": {"ownerReferences": [{"uid": "u1", "name": "a"}, {"uid": "u2", "name": "b", "controller": true}]},
        "spec": {
            "initContainers": [{"name": "init", "image": "2"}],
            "containers": [{
                "name": "c",
                "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
                "volumeMounts": [{"name": "b", "mountPath": "/a"}],
                "args": ["z"]
            }],
            "imagePullSecrets": [{"name": "s2"}, {"name": "s1"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}],
            "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}],
            "tolerations": [{"key": "b", "operator": "Exists"}]
        },
        "status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "Initialized", "status": "True"}
        ]}
    });
    assert_eq!(smp(&pod, patch, POD), want);

    let service = json!({"spec": {"ports": [
        {"name": "http", "port": 80, "targetPort": 8080},
        {"name": "https", "port": 443, "targetPort": 8443}
    ]}});
    let got = smp(
        &service,
        json!({"spec": {"ports": [{"port": 443, "targetPort": 9443}]}}),
        GroupKind::new("", "Service"),
    );
    assert_eq!(
        got["spec"]["ports"],
        json!([{"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443, "targetPort": 9443}])
    );

    let account = json!({"secrets": [{"name": "t1"}], "imagePullSecrets": [{"name": "p1"}]});
    let got = smp(
        &account,
        json!({"secrets": [{"name": "t2"}], "imagePullSecrets": [{"name": "p2"}]}),
        GroupKind::new("", "ServiceAccount"),
    );
    assert_eq!(got["secrets"], json!([{"name": "t2"}, {"name": "t1"}]));
    // ServiceAccount.imagePullSecrets has no strategy tag (unlike the pod's).
    assert_eq!(got["imagePullSecrets"], json!([{"name": "p2"}]));
}

#[test]
fn pod_templates_merge_inside_every_workload_and_nowhere_else() {
    let template = |containers: Value| json!({"spec": {"containers": containers}});
    let workloads: [(&str, &str, &[&str], bool); 8] = [
        ("apps", "Deployment", &["spec", "template"], true),
        ("apps", "ReplicaSet", &["spec", "template"], true),
        ("batch", "Job", &["spec", "template"], true),
        (
            "batch",
            "CronJob",
            &["spec", "jobTemplate", "spec", "template"],
            true,
        ),
        ("", "Pod", &[], true),
        // Untagged kinds: the same-looking list is replaced.
        (
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &["spec", "template"],
            false,
        ),
        ("", "ConfigMap", &["spec", "template"], false),
        ("apps", "Deployment", &["spec", "other"], false),
    ];
    for (group, kind, path, merges) in workloads {
        let nest = |leaf: Value| {
            path.iter()
                .rev()
                .fold(leaf, |inner, key| json!({ *key: inner }))
        };
        let doc = nest(template(
            json!([{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]),
        ));
        let patch = nest(template(json!([{"name": "b", "image": "2"}])));
        let got = smp(&doc, patch, GroupKind::new(group, kind));
        let want = if merges {
            json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}])
        } else {
            json!([{"name": "b", "image": "2"}])
        };
        let mut at = &got;
        for key in path {
            at = &at[*key];
        }
        assert_eq!(at["spec"]["containers"], want, "{group}/{kind} at {path:?}");
    }
}

#[test]
fn other_kinds() {
    let config = json!({"data": {"a": "1", "b": "2"}});
    let got = smp(
        &config,
        json!({"data": {"a": null, "c": "3"}}),
        GroupKind::new("", "ConfigMap"),
    );
    assert_eq!(got, json!({"data": {"b": "2", "c": "3"}}));

    let crd = json!({"spec": {"versions": [{"name": "v1", "served": true}, {"name": "v2", "served": true}]}});
    let got = smp(
        &crd,
        json!({"spec": {"versions": [{"name": "v2", "served": false}]}}),
        GroupKind::new("apiextensions.k8s.io", "CustomResourceDefinition"),
    );
    assert_eq!(
        got["spec"]["versions"],
        json!([{"name": "v2", "served": false}])
    );

    let pdb = json!({"spec": {"selector": {"matchLabels": {"a": "1"}}, "minAvailable": 1}});
    let got = smp(
        &pdb,
        json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
        GroupKind::new("policy", "PodDisruptionBudget"),
    );
    assert_eq!(
        got["spec"],
        json!({"selector": {"matchLabels": {"b": "2"}}, "minAvailable": 1})
    );

    let lease = json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
    let got = smp(
        &lease,
        json!({"spec": {"holderIdentity": "b"}}),
        GroupKind::new("coordination.k8s.io", "Lease"),
    );
    assert_eq!(
        got["spec"],
        json!({"holderIdentity": "b", "leaseDurationSeconds": 15})
    );
}

#[test]
fn new_list_items_are_inserted_verbatim() {
    let pod = json!({"spec": {"containers": [{"name": "a"}]}});
    let got = smp(
        &pod,
        json!({"spec": {"containers": [{"name": "b", "image": null}]}}),
        POD,
    );
    assert_eq!(
        got["spec"]["containers"],
        json!([{"name": "b", "image": null}, {"name": "a"}])
    );
}

#[test]
fn custom_resources_are_refused_with_415() {
    let kind = GroupKind::new("example.com", "Widget");
    assert!(!supports_strategic_merge(kind));
    assert!(!supports_strategic_merge(GroupKind::new("", "Deployment")));
    assert!(supports_strategic_merge(DEPLOYMENT));
    let error = smp_err(&json!({}), json!({}), kind);
    let status = error.status();
    assert_eq!((status.code, status.reason), (415, "UnsupportedMediaType"));
    assert_eq!(
        status.message,
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
}

#[test]
fn malformed_patches_give_the_go_errors() {
    let pod = json!({"metadata": {"labels": {"a": "1"}, "finalizers": []}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
    let internal = |text: &str| PatchError::Internal(text.to_owned());
    let cases = [
        (
            "not an object",
            json!([{"a": 1}]),
            PatchError::BadRequest(
                "json: cannot unmarshal array into Go value of type map[string]interface {}".into(),
            ),
            400,
        ),
        (
            "$patch: merge in a map",
            json!({"metadata": {"labels": {"$patch": "merge", "b": "2"}}}),
            internal("unknown patch type: merge in map: map[$patch:merge b:2]"),
            500,
        ),
        (
            "a non-string $patch",
            json!({"metadata": {"labels": {"$patch": 1}}}),
            internal("unknown patch type: %!s(int64=1) in map: map[$patch:1]"),
            500,
        ),
        (
            "$patch: merge in a list",
            json!({"spec": {"containers": [{"$patch": "merge"}]}}),
            internal("merging lists cannot yet be specified in the patch"),
            500,
        ),
        (
            "an unknown $patch in a list",
            json!({"spec": {"containers": [{"name": "a", "$patch": "frob"}]}}),
            internal("unknown patch type: frob in map: map[$patch:frob name:a]"),
            500,
        ),
        (
            "a list item without its merge key",
            json!({"spec": {"containers": [{"image": "x"}]}}),
            internal("map: map[image:x] does not contain declared merge key: name"),
            500,
        ),
        (
            "a delete item without its merge key",
            json!({"spec": {"containers": [{"$patch": "delete"}]}}),
            internal("map: map[$patch:delete] does not contain declared merge key: name"),
            500,
        ),
        (
            "a list of lists",
            json!({"metadata": {"finalizers": [["x"]]}}),
            PatchError::NoListOfLists,
            422,
        ),
        (
            "mixed element types",
            json!({"spec": {"containers": ["a"]}}),
            internal("list element types are not identical: [[map[name:a] map[name:b]] [a]]"),
            500,
        ),
        (
            "maps in a primitive merge list",
            json!({"metadata": {"finalizers": [{"x": 1}]}}),
            internal("cannot merge lists without merge key for string"),
            500,
        ),
        (
            "$setElementOrder that contradicts the patch list",
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b", "image": "2"}, {"name": "a", "image": "2"}]
            }}),
            internal(
                "The order in patch list:\n[map[image:2 name:b] map[image:2 name:a]]\n doesn't match $setElementOrder list:\n[map[name:a] map[name:b]]\n",
            ),
            500,
        ),
        (
            "$setElementOrder without a slash",
            json!({"spec": {"$setElementOrderContainers": []}}),
            PatchError::BadPatchFormatForSetElementOrderList,
            400,
        ),
        (
            "$setElementOrder that is not a list",
            json!({"spec": {"$setElementOrder/containers": "a"}}),
            internal("expected a []interface {}, but received a string"),
            500,
        ),
        (
            "$deleteFromPrimitiveList without a slash",
            json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}),
            PatchError::BadPatchFormatForPrimitiveList,
            400,
        ),
        (
            "a leading null in a merge list (a Go nil dereference)",
            json!({"metadata": {"finalizers": [null]}}),
            PatchError::GoPanic("runtime error: invalid memory address or nil pointer dereference"),
            500,
        ),
        (
            "maps as merge-key values (Go cannot compare them)",
            json!({"spec": {"containers": [{"name": {"x": 1}}]}}),
            PatchError::GoPanic(
                "runtime error: comparing uncomparable type map[string]interface {}",
            ),
            500,
        ),
    ];
    let pod_with_map_name = json!({"spec": {"containers": [{"name": {"x": 1}}]}});
    for (name, patch, want, code) in cases {
        let doc = if name.starts_with("maps as merge-key") {
            &pod_with_map_name
        } else {
            &pod
        };
        let error = smp_err(doc, patch, POD);
        assert_eq!(error, want, "{name}");
        assert_eq!(error.http_status(), code, "{name}");
    }
    let status = PatchError::NoListOfLists.status();
    assert_eq!(
        (status.reason, status.message.as_str()),
        ("Invalid", UNPROCESSABLE_MESSAGE)
    );
    let status = internal("x").status();
    assert_eq!(
        (status.code, status.reason, status.message.as_str()),
        (500, "", "x")
    );
}

#[test]
fn the_merge_key_table_is_public() {
    let cases: [(GroupKind<'_>, &[&str], Option<ListStrategy>); 12] = [
        (
            POD,
            &["spec", "containers"],
            Some(ListStrategy::MergeByKey("name")),
        ),
        (
            POD,
            &["spec", "containers", "ports"],
            Some(ListStrategy::MergeByKey("containerPort")),
        ),
        (
            POD,
            &["spec", "containers", "volumeMounts"],
            Some(ListStrategy::MergeByKey("mountPath")),
        ),
        (POD, &["spec", "tolerations"], Some(ListStrategy::Replace)),
        (
            POD,
            &["metadata", "finalizers"],
            Some(ListStrategy::MergePrimitives),
        ),
        (
            POD,
            &["metadata", "ownerReferences"],
            Some(ListStrategy::MergeByKey("uid")),
        ),
        (
            DEPLOYMENT,
            &["spec", "template", "spec", "containers", "env"],
            Some(ListStrategy::MergeByKey("name")),
        ),
        (
            DEPLOYMENT,
            &["status", "conditions"],
            Some(ListStrategy::MergeByKey("type")),
        ),
        (
            GroupKind::new("batch", "CronJob"),
            &["spec", "jobTemplate", "spec", "template", "spec", "volumes"],
            Some(ListStrategy::MergeByKey("name")),
        ),
        (
            GroupKind::new("", "Service"),
            &["spec", "ports"],
            Some(ListStrategy::MergeByKey("port")),
        ),
        (
            GroupKind::new("", "Node"),
            &["status", "addresses"],
            Some(ListStrategy::MergeByKey("type")),
        ),
        (
            GroupKind::new("example.com", "Widget"),
            &["spec", "items"],
            None,
        ),
    ];
    for (kind, path, want) in cases {
        assert_eq!(list_merge_key(kind, path), want, "{kind:?} {path:?}");
    }
}
