#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Field selectors: grammar and escapes, the per-kind label tables with their refusal texts,
//! and matching values read from objects' JSON.

use localkube_query::{
    FieldSchema, FieldSelectorError, escape_value, parse_field_selector, unescape_value,
};
use serde_json::{Value, json};

const POD: FieldSchema<'static> = FieldSchema::BuiltIn {
    group: "",
    kind: "Pod",
};
const EVENT: FieldSchema<'static> = FieldSchema::BuiltIn {
    group: "",
    kind: "Event",
};
const EVENTS_V1: FieldSchema<'static> = FieldSchema::BuiltIn {
    group: "events.k8s.io",
    kind: "Event",
};

fn matches(schema: &FieldSchema<'_>, selector: &str, object: &Value) -> bool {
    parse_field_selector(selector)
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
        .resolve(schema)
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
        .matches(object)
}

fn refusal(schema: &FieldSchema<'_>, selector: &str) -> String {
    parse_field_selector(selector)
        .unwrap()
        .resolve(schema)
        .unwrap_err()
        .to_string()
}

#[test]
fn syntax_errors_are_upstreams_messages() {
    let cases = [
        ("a", "invalid selector: 'a'; can't understand 'a'"),
        // terms are sorted first: the smallest bad term is reported
        ("b=1,a", "invalid selector: 'b=1,a'; can't understand 'a'"),
        ("z,y", "invalid selector: 'z,y'; can't understand 'y'"),
        (
            "a=b\\",
            "invalid field selector: invalid escape sequence: \\",
        ),
        (
            "a=b\\x",
            "invalid field selector: invalid escape sequence: \\x",
        ),
        // Go prints the rune as a number
        (
            "a=b=c",
            "invalid field selector: unescaped character in value: 61",
        ),
    ];
    for (selector, want) in cases {
        assert_eq!(
            parse_field_selector(selector).unwrap_err().to_string(),
            want,
            "{selector:?}"
        );
    }
}

#[test]
fn operators_escapes_and_empty_terms() {
    let s = parse_field_selector(
        "metadata.name=a\\,b\\=c\\\\,,status.phase!=Running,spec.nodeName==n1",
    )
    .unwrap();
    assert_eq!(s.requirements.len(), 3);
    assert_eq!(s.requirements[0].value, "a,b=c\\");
    assert_eq!(
        s.to_string(),
        "metadata.name=a\\,b\\=c\\\\,spec.nodeName=n1,status.phase!=Running"
    );
    assert_eq!(unescape_value(&escape_value("x,y=z\\")).unwrap(), "x,y=z\\");
    assert!(parse_field_selector("").unwrap().requirements.is_empty());
    assert!(parse_field_selector(",").unwrap().requirements.is_empty());
    // `a=!b` is `=` with the value `!b`; `a!=b` is not-equals
    assert_eq!(
        parse_field_selector("a=!b").unwrap().requirements[0].value,
        "!b"
    );
}

#[test]
fn kubectl_wait_metadata_name_works_on_every_kind() {
    let crd_fields: Vec<String> = vec![];
    let schemas = [
        POD,
        FieldSchema::BuiltIn {
            group: "",
            kind: "ConfigMap",
        },
        FieldSchema::BuiltIn {
            group: "apps",
            kind: "Deployment",
        },
        FieldSchema::BuiltIn {
            group: "",
            kind: "Node",
        },
        FieldSchema::BuiltIn {
            group: "",
            kind: "Namespace",
        },
        FieldSchema::BuiltIn {
            group: "batch",
            kind: "Job",
        },
        EVENT,
        EVENTS_V1,
        FieldSchema::Custom {
            namespaced: true,
            selectable_fields: &crd_fields,
        },
        FieldSchema::Custom {
            namespaced: false,
            selectable_fields: &crd_fields,
        },
    ];
    let obj = json!({"metadata": {"name": "foo", "namespace": "ns"}});
    for schema in schemas {
        let resolved = parse_field_selector("metadata.name=foo")
            .unwrap()
            .resolve(&schema)
            .unwrap();
        assert!(resolved.matches(&obj), "{schema:?}");
        assert!(
            !resolved.matches(&json!({"metadata": {"name": "bar"}})),
            "{schema:?}"
        );
        assert_eq!(resolved.requires_exact_match("metadata.name"), Some("foo"));
    }
}

#[test]
fn unsupported_labels_get_each_kinds_own_wording() {
    let selectable = vec![".spec.color".to_string(), "status.ready".to_string()];
    let cr = FieldSchema::Custom {
        namespaced: true,
        selectable_fields: &selectable,
    };
    let cluster_cr = FieldSchema::Custom {
        namespaced: false,
        selectable_fields: &selectable,
    };
    let not_known = |f: &str| {
        format!(
            "\"{f}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
    };
    let cases: Vec<(FieldSchema<'_>, &str, String)> = vec![
        (
            POD,
            "spec.foo=x",
            "field label not supported: spec.foo".into(),
        ),
        // no whitespace trimming
        (
            POD,
            " metadata.name=x",
            "field label not supported:  metadata.name".into(),
        ),
        (
            FieldSchema::BuiltIn {
                group: "",
                kind: "ConfigMap",
            },
            "data.x=1",
            not_known("data.x"),
        ),
        // apps/v1 registers no conversion: status.replicas is only the core RC's
        (
            FieldSchema::BuiltIn {
                group: "apps",
                kind: "ReplicaSet",
            },
            "status.replicas=1",
            not_known("status.replicas"),
        ),
        (
            FieldSchema::BuiltIn {
                group: "batch",
                kind: "Job",
            },
            "status.failed=1",
            "field label \"status.failed\" not supported for Job".into(),
        ),
        (
            FieldSchema::BuiltIn {
                group: "",
                kind: "Node",
            },
            "metadata.namespace=x",
            "field label not supported: metadata.namespace".into(),
        ),
        (
            FieldSchema::BuiltIn {
                group: "",
                kind: "Namespace",
            },
            "name=x",
            "field label not supported: name".into(),
        ),
        (
            EVENTS_V1,
            "involvedObject.name=x",
            "field label not supported: involvedObject.name".into(),
        ),
        (
            EVENT,
            "regarding.name=x",
            "field label not supported: regarding.name".into(),
        ),
        (
            cr,
            "spec.size=3",
            "field label not supported: spec.size".into(),
        ),
        (
            cluster_cr,
            "metadata.namespace=x",
            "field label not supported: metadata.namespace".into(),
        ),
        // the first refused term in sorted order
        (POD, "zzz=1,aaa=2", "field label not supported: aaa".into()),
    ];
    for (schema, selector, want) in cases {
        assert_eq!(refusal(&schema, selector), want, "{schema:?} {selector}");
    }
    assert!(matches!(
        parse_field_selector("x=1")
            .unwrap()
            .resolve(&POD)
            .unwrap_err(),
        FieldSelectorError::UnsupportedField(_)
    ));
}

#[test]
fn kubectl_describe_finds_events_by_involved_object() {
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web-0.17a", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-0", "uid": "u-1",
                           "apiVersion": "v1", "resourceVersion": "42", "fieldPath": "spec.containers{app}"},
        "reason": "Pulled", "type": "Normal", "reportingComponent": "kubelet",
        "source": {"component": "kubelet", "host": "n1"}
    });
    let cases = [
        (
            "involvedObject.name=web-0,involvedObject.namespace=default,involvedObject.uid=u-1",
            true,
        ),
        (
            "involvedObject.name=web-0,involvedObject.namespace=default,involvedObject.uid=u-2",
            false,
        ),
        (
            "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.resourceVersion=42",
            true,
        ),
        ("involvedObject.fieldPath=spec.containers{app}", true),
        ("reason=Pulled,type=Normal", true),
        ("type!=Normal", false),
        ("reportingComponent=kubelet,source=kubelet", true),
        ("metadata.namespace=default", true),
    ];
    for (selector, want) in cases {
        assert_eq!(matches(&EVENT, selector, &event), want, "{selector}");
    }
    // `source` falls back to the reporting controller when the component is empty
    let reported = json!({"reportingComponent": "ctrl", "source": {}});
    assert!(matches(&EVENT, "source=ctrl", &reported));
}

#[test]
fn events_k8s_io_selects_by_regarding() {
    let event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "ns"},
        "regarding": {"kind": "Pod", "name": "web-0", "namespace": "ns", "uid": "u-1"},
        "reason": "Scheduled", "type": "Normal", "reportingController": "default-scheduler",
        "deprecatedSource": {"component": "default-scheduler"}
    });
    assert!(matches(
        &EVENTS_V1,
        "regarding.name=web-0,regarding.kind=Pod,regarding.uid=u-1",
        &event
    ));
    assert!(matches(
        &EVENTS_V1,
        "reportingController=default-scheduler,reason=Scheduled,source=default-scheduler",
        &event
    ));
    assert!(!matches(&EVENTS_V1, "regarding.namespace=other", &event));
    let resolved = parse_field_selector("regarding.name=web-0")
        .unwrap()
        .resolve(&EVENTS_V1)
        .unwrap();
    assert_eq!(
        resolved.requires_exact_match("involvedObject.name"),
        Some("web-0"),
        "canonical upstream label"
    );
}

#[test]
fn pod_fields_read_like_pod_to_selectable_fields() {
    let pod = json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                 "serviceAccountName": "sa"},
        "status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}
    });
    let cases = [
        ("spec.nodeName=n1", true),
        ("spec.host=n1", true),
        (
            "spec.restartPolicy=Always,spec.schedulerName=default-scheduler,spec.serviceAccountName=sa",
            true,
        ),
        // absent bool reads "false"
        ("spec.hostNetwork=false", true),
        ("spec.hostNetwork=true", false),
        ("status.phase=Running", true),
        ("status.phase!=Running", false),
        // the first of status.podIPs wins
        ("status.podIP=10.0.0.1", true),
        ("status.podIP=10.0.0.9", false),
        // accepted but never set upstream: only the empty value matches
        ("status.podIPs=10.0.0.1", false),
        ("status.podIPs=", true),
        ("status.nominatedNodeName=", true),
        ("spec.nodeName=", false),
    ];
    for (selector, want) in cases {
        assert_eq!(matches(&POD, selector, &pod), want, "{selector}");
    }
    let host_network = json!({"spec": {"hostNetwork": true}, "status": {"podIP": "1.2.3.4"}});
    assert!(matches(
        &POD,
        "spec.hostNetwork=true,status.podIP=1.2.3.4",
        &host_network
    ));
    let resolved = parse_field_selector("spec.host=n1")
        .unwrap()
        .resolve(&POD)
        .unwrap();
    assert_eq!(resolved.requires_exact_match("spec.nodeName"), Some("n1"));
    assert_eq!(resolved.requires_exact_match("metadata.name"), None);
    let neq = parse_field_selector("metadata.name!=x")
        .unwrap()
        .resolve(&POD)
        .unwrap();
    assert_eq!(neq.requires_exact_match("metadata.name"), None);
}

#[test]
fn other_built_in_kinds() {
    let kind = |group, kind| FieldSchema::BuiltIn { group, kind };
    let cases: Vec<(FieldSchema<'_>, &str, Value, bool)> = vec![
        (
            kind("", "Secret"),
            "type=helm.sh/release.v1",
            json!({"type": "helm.sh/release.v1"}),
            true,
        ),
        (kind("", "Secret"), "type=Opaque", json!({}), false),
        (
            kind("", "Namespace"),
            "status.phase=Active",
            json!({"status": {"phase": "Active"}}),
            true,
        ),
        (
            kind("", "Node"),
            "spec.unschedulable=false",
            json!({"spec": {}}),
            true,
        ),
        (
            kind("", "Node"),
            "spec.unschedulable=true",
            json!({"spec": {"unschedulable": true}}),
            true,
        ),
        (
            kind("", "Service"),
            "spec.clusterIP=10.96.0.1,spec.type=ClusterIP",
            json!({"spec": {"clusterIP": "10.96.0.1", "type": "ClusterIP"}}),
            true,
        ),
        (
            kind("", "ReplicationController"),
            "status.replicas=0",
            json!({}),
            true,
        ),
        (
            kind("", "ReplicationController"),
            "status.replicas=3",
            json!({"status": {"replicas": 3}}),
            true,
        ),
        // status.successful is read from status.succeeded; absent is 0
        (
            kind("batch", "Job"),
            "status.successful=0",
            json!({"status": {}}),
            true,
        ),
        (
            kind("batch", "Job"),
            "status.successful=2",
            json!({"status": {"succeeded": 2}}),
            true,
        ),
        (
            kind("certificates.k8s.io", "CertificateSigningRequest"),
            "spec.signerName=kubernetes.io/kubelet-serving",
            json!({"spec": {"signerName": "kubernetes.io/kubelet-serving"}}),
            true,
        ),
        // cluster-scoped kinds without a table accept metadata.namespace; it is always empty
        (
            kind("rbac.authorization.k8s.io", "ClusterRole"),
            "metadata.namespace=",
            json!({"metadata": {"name": "x"}}),
            true,
        ),
    ];
    for (schema, selector, object, want) in cases {
        assert_eq!(
            matches(&schema, selector, &object),
            want,
            "{schema:?} {selector}"
        );
    }
}

#[test]
fn custom_resources_select_on_declared_fields() {
    let selectable = vec![
        ".spec.color".to_string(),
        ".spec.size".to_string(),
        ".status.ready".to_string(),
    ];
    let cr = FieldSchema::Custom {
        namespaced: true,
        selectable_fields: &selectable,
    };
    let obj = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {"color": "blue", "size": 3}, "status": {"ready": true}});
    assert!(matches(
        &cr,
        "spec.color=blue,spec.size=3,status.ready=true,metadata.namespace=ns",
        &obj
    ));
    assert!(!matches(&cr, "spec.color=red", &obj));
    assert!(matches(&cr, "spec.color!=red", &obj));
    assert!(
        matches(&cr, "spec.color=", &json!({"spec": {}})),
        "absent reads as empty"
    );
}

#[test]
fn empty_selector_matches_everything_and_garbage_objects_do_not_panic() {
    let resolved = parse_field_selector("").unwrap().resolve(&POD).unwrap();
    assert!(resolved.is_everything());
    assert!(resolved.matches(&json!(null)));
    let strict =
        parse_field_selector("spec.nodeName=n1,status.podIP=1.1.1.1,spec.hostNetwork=true")
            .unwrap();
    let strict = strict.resolve(&POD).unwrap();
    for garbage in [
        json!(null),
        json!(1),
        json!([1, 2]),
        json!({"spec": "x", "status": {"podIPs": "y"}}),
        json!({"status": {"podIPs": [1]}}),
    ] {
        assert!(!strict.matches(&garbage), "{garbage}");
    }
}
