//! Each supported kind decodes into the JSON the same Go client sends with `application/json`.
//! Bodies are built the way gogo marshals Go structs: every non-pointer field is on the wire,
//! empty or not; pointers only when set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_pb::api::batch::v1::{Job, JobSpec, JobStatus};
use k8s_pb::api::core::v1::{
    ConfigMap, Container, ContainerPort, Event, EventSource, HttpGetAction, Namespace,
    NamespaceSpec, NamespaceStatus, ObjectReference, PodSpec, PodTemplateSpec, Probe, ProbeHandler,
    ResourceRequirements, Secret, ServiceAccount,
};
use k8s_pb::api::policy::v1::Eviction;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, MicroTime, ObjectMeta, OwnerReference, Preconditions, Time,
};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use localkube_proto::decode;
use localkube_proto::testing::envelope;
use serde_json::json;

/// 2026-01-02T03:04:05Z.
const JAN_2: i64 = 1_767_323_045;

/// ObjectMeta as gogo writes a Go `metav1.ObjectMeta{Name, Namespace, Labels}`: the non-pointer
/// strings and `generation` present but empty, `creationTimestamp` an empty message.
fn go_object_meta(name: &str, namespace: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        generate_name: Some(String::new()),
        namespace: Some(namespace.to_owned()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(Time::default()),
        labels: strings(labels),
        ..ObjectMeta::default()
    }
}

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn s(value: &str) -> Option<String> {
    Some(value.to_owned())
}

#[test]
fn helm_release_secret() {
    // helm pkg/storage/driver/secrets.go newSecretsObject: the gzipped release under data.release.
    let secret = Secret {
        metadata: Some(go_object_meta(
            "sh.helm.release.v1.demo.v1",
            "apps",
            &[
                ("name", "demo"),
                ("owner", "helm"),
                ("status", "pending-install"),
                ("version", "1"),
            ],
        )),
        data: BTreeMap::from([(
            "release".to_owned(),
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffrelease".to_vec(),
        )]),
        r#type: s("helm.sh/release.v1"),
        ..Secret::default()
    };
    assert_eq!(
        decode(&envelope("v1", "Secret", &secret)).unwrap(),
        json!({
            "kind": "Secret",
            "apiVersion": "v1",
            "metadata": {
                "name": "sh.helm.release.v1.demo.v1",
                "namespace": "apps",
                "creationTimestamp": null,
                "labels": {"name": "demo", "owner": "helm", "status": "pending-install", "version": "1"}
            },
            "data": {"release": "H4sIAAAAAAAA/3JlbGVhc2U="},
            "type": "helm.sh/release.v1"
        })
    );
}

#[test]
fn secret_update_keeps_identity_string_data_and_immutable() {
    // helm upgrade marks the old release "superseded" with an Update carrying resourceVersion/uid.
    let mut metadata = go_object_meta(
        "sh.helm.release.v1.demo.v1",
        "apps",
        &[("status", "superseded")],
    );
    metadata.uid = s("0b7f3e8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b");
    metadata.resource_version = s("42");
    metadata.creation_timestamp = Some(Time {
        seconds: Some(JAN_2),
        nanos: Some(0),
    });
    let secret = Secret {
        metadata: Some(metadata),
        immutable: Some(false),
        data: BTreeMap::from([
            ("empty".to_owned(), Vec::new()),
            ("bin".to_owned(), vec![0, 1, 0xfe, 0xff]),
        ]),
        string_data: strings(&[("plain", "text")]),
        r#type: s(""),
    };
    assert_eq!(
        decode(&envelope("v1", "Secret", &secret)).unwrap(),
        json!({
            "kind": "Secret",
            "apiVersion": "v1",
            "metadata": {
                "name": "sh.helm.release.v1.demo.v1",
                "namespace": "apps",
                "uid": "0b7f3e8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
                "resourceVersion": "42",
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "labels": {"status": "superseded"}
            },
            "immutable": false,
            "data": {"empty": "", "bin": "AAH+/w=="},
            "stringData": {"plain": "text"}
        })
    );
}

#[test]
fn delete_options_under_the_clients_group_version() {
    // client-go stamps DeleteOptions with the group version of the typed client that sends it.
    let options = DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: s("u-1"),
            resource_version: s("7"),
        }),
        propagation_policy: s("Background"),
        dry_run: vec!["All".to_owned()],
        ..DeleteOptions::default()
    };
    for api_version in ["v1", "batch/v1", "apps/v1", "meta.k8s.io/v1"] {
        assert_eq!(
            decode(&envelope(api_version, "DeleteOptions", &options)).unwrap(),
            json!({
                "kind": "DeleteOptions",
                "apiVersion": api_version,
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": "u-1", "resourceVersion": "7"},
                "propagationPolicy": "Background",
                "dryRun": ["All"]
            }),
            "{api_version}"
        );
    }
}

#[test]
fn empty_delete_options_is_only_its_type() {
    assert_eq!(
        decode(&envelope("v1", "DeleteOptions", &DeleteOptions::default())).unwrap(),
        json!({"kind": "DeleteOptions", "apiVersion": "v1"})
    );
}

#[test]
fn config_map_with_data_and_binary_data() {
    let config_map = ConfigMap {
        metadata: Some(go_object_meta("settings", "default", &[])),
        data: strings(&[("app.conf", "a=1\nb=2\n"), ("empty", "")]),
        binary_data: BTreeMap::from([("logo.png".to_owned(), b"\x89PNG".to_vec())]),
        ..ConfigMap::default()
    };
    assert_eq!(
        decode(&envelope("v1", "ConfigMap", &config_map)).unwrap(),
        json!({
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "settings", "namespace": "default", "creationTimestamp": null},
            "data": {"app.conf": "a=1\nb=2\n", "empty": ""},
            "binaryData": {"logo.png": "iVBORw=="}
        })
    );
}

#[test]
fn namespace_keeps_empty_spec_and_status() {
    // `kubectl create namespace x` as JSON: {"metadata":{"name":"x","creationTimestamp":null},"spec":{},"status":{}}.
    let namespace = Namespace {
        metadata: Some(go_object_meta("team-a", "", &[])),
        spec: Some(NamespaceSpec::default()),
        status: Some(NamespaceStatus {
            phase: s(""),
            conditions: Vec::new(),
        }),
    };
    let want = json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "team-a", "creationTimestamp": null},
        "spec": {},
        "status": {}
    });
    assert_eq!(
        decode(&envelope("v1", "Namespace", &namespace)).unwrap(),
        want
    );
    // A writer that leaves the empty non-pointer fields off the wire means the same Go struct.
    let sparse = Namespace {
        metadata: Some(ObjectMeta {
            name: s("team-a"),
            ..ObjectMeta::default()
        }),
        ..Namespace::default()
    };
    assert_eq!(decode(&envelope("v1", "Namespace", &sparse)).unwrap(), want);
}

#[test]
fn core_event_writes_zero_times_as_null_and_required_strings_empty() {
    let event = Event {
        metadata: Some(go_object_meta("web.17f", "default", &[])),
        involved_object: Some(ObjectReference {
            kind: s("Pod"),
            name: s("web"),
            namespace: s("default"),
            ..ObjectReference::default()
        }),
        reason: s("Started"),
        message: s("Started container web"),
        source: Some(EventSource {
            component: s("kubelet"),
            host: s(""),
        }),
        first_timestamp: Some(Time {
            seconds: Some(JAN_2),
            nanos: Some(999_999_999),
        }),
        last_timestamp: Some(Time::default()),
        count: Some(1),
        r#type: s("Normal"),
        event_time: Some(MicroTime {
            seconds: Some(JAN_2),
            nanos: Some(123_456_789),
        }),
        reporting_component: s(""),
        reporting_instance: s(""),
        ..Event::default()
    };
    assert_eq!(
        decode(&envelope("v1", "Event", &event)).unwrap(),
        json!({
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {"name": "web.17f", "namespace": "default", "creationTimestamp": null},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
            "reason": "Started",
            "message": "Started container web",
            "source": {"component": "kubelet"},
            "firstTimestamp": "2026-01-02T03:04:05Z",
            "lastTimestamp": null,
            "count": 1,
            "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.123456Z",
            "reportingComponent": "",
            "reportingInstance": ""
        })
    );
}

#[test]
fn eviction_nests_delete_options_without_type() {
    let eviction = Eviction {
        metadata: Some(go_object_meta("web-0", "default", &[])),
        delete_options: Some(DeleteOptions {
            grace_period_seconds: Some(30),
            ..DeleteOptions::default()
        }),
    };
    assert_eq!(
        decode(&envelope("policy/v1", "Eviction", &eviction)).unwrap(),
        json!({
            "kind": "Eviction",
            "apiVersion": "policy/v1",
            "metadata": {"name": "web-0", "namespace": "default", "creationTimestamp": null},
            "deleteOptions": {"gracePeriodSeconds": 30}
        })
    );
}

#[test]
fn service_account() {
    let account = ServiceAccount {
        metadata: Some(go_object_meta("builder", "ci", &[])),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    };
    assert_eq!(
        decode(&envelope("v1", "ServiceAccount", &account)).unwrap(),
        json!({
            "kind": "ServiceAccount",
            "apiVersion": "v1",
            "metadata": {"name": "builder", "namespace": "ci", "creationTimestamp": null},
            "automountServiceAccountToken": false
        })
    );
}

#[test]
fn job_created_from_a_cron_job() {
    // kubectl create job --from=cronjob/nightly: the CronJob's jobTemplate, an owner reference
    // and the instantiate annotation; Go writes the empty structs `resources`, `status`.
    let mut metadata = go_object_meta("nightly-manual", "ops", &[]);
    metadata.annotations = strings(&[("cronjob.kubernetes.io/instantiate", "manual")]);
    metadata.owner_references = vec![OwnerReference {
        api_version: s("batch/v1"),
        kind: s("CronJob"),
        name: s("nightly"),
        uid: s("c-1"),
        controller: Some(true),
        block_owner_deletion: None,
    }];
    let container = Container {
        name: s("backup"),
        image: s("busybox:1.36"),
        command: vec!["sh".to_owned(), "-c".to_owned(), "date".to_owned()],
        ports: vec![ContainerPort {
            container_port: Some(8080),
            protocol: s("TCP"),
            name: s(""),
            host_port: Some(0),
            host_ip: s(""),
        }],
        resources: Some(ResourceRequirements {
            limits: BTreeMap::from([("memory".to_owned(), Quantity { string: s("64Mi") })]),
            ..ResourceRequirements::default()
        }),
        liveness_probe: Some(Probe {
            handler: Some(ProbeHandler {
                http_get: Some(HttpGetAction {
                    path: s("/healthz"),
                    port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("http"),
                    }),
                    host: s(""),
                    scheme: s("HTTP"),
                    http_headers: Vec::new(),
                }),
                ..ProbeHandler::default()
            }),
            initial_delay_seconds: Some(0),
            timeout_seconds: Some(1),
            period_seconds: Some(10),
            success_threshold: Some(1),
            failure_threshold: Some(3),
            termination_grace_period_seconds: None,
        }),
        termination_message_path: s("/dev/termination-log"),
        termination_message_policy: s("File"),
        image_pull_policy: s("IfNotPresent"),
        stdin: Some(false),
        ..Container::default()
    };
    let job = Job {
        metadata: Some(metadata),
        spec: Some(JobSpec {
            backoff_limit: Some(6),
            template: Some(PodTemplateSpec {
                metadata: Some(go_object_meta("", "", &[])),
                spec: Some(PodSpec {
                    containers: vec![container],
                    restart_policy: s("OnFailure"),
                    termination_grace_period_seconds: Some(30),
                    dns_policy: s("ClusterFirst"),
                    host_network: Some(false),
                    node_selector: strings(&[("disk", "ssd")]),
                    ..PodSpec::default()
                }),
            }),
            ..JobSpec::default()
        }),
        status: Some(JobStatus {
            active: Some(0),
            ..JobStatus::default()
        }),
    };
    assert_eq!(
        decode(&envelope("batch/v1", "Job", &job)).unwrap(),
        json!({
            "kind": "Job",
            "apiVersion": "batch/v1",
            "metadata": {
                "name": "nightly-manual",
                "namespace": "ops",
                "creationTimestamp": null,
                "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "c-1", "controller": true}
                ]
            },
            "spec": {
                "backoffLimit": 6,
                "template": {
                    "metadata": {"creationTimestamp": null},
                    "spec": {
                        "containers": [{
                            "name": "backup",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", "date"],
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"limits": {"memory": "64Mi"}},
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                                "timeoutSeconds": 1,
                                "periodSeconds": 10,
                                "successThreshold": 1,
                                "failureThreshold": 3
                            },
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "imagePullPolicy": "IfNotPresent"
                        }],
                        "restartPolicy": "OnFailure",
                        "terminationGracePeriodSeconds": 30,
                        "dnsPolicy": "ClusterFirst",
                        "nodeSelector": {"disk": "ssd"}
                    }
                }
            },
            "status": {}
        })
    );
}

#[test]
fn pod_spec_without_containers_writes_null_like_go() {
    // `containers` has no omitempty: a nil slice is `null`, and an unset `resources` struct `{}`.
    let job = Job {
        spec: Some(JobSpec {
            template: Some(PodTemplateSpec {
                spec: Some(PodSpec {
                    init_containers: vec![Container {
                        name: s("init"),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                ..PodTemplateSpec::default()
            }),
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    let got = decode(&envelope("batch/v1", "Job", &job)).unwrap();
    assert_eq!(
        got["spec"]["template"]["spec"],
        json!({"initContainers": [{"name": "init", "resources": {}}], "containers": null})
    );
    assert_eq!(got["metadata"], json!({"creationTimestamp": null}));
}

#[test]
fn int_or_string_number_form() {
    let port = |int_or_string: IntOrString| {
        let job = Job {
            spec: Some(JobSpec {
                template: Some(PodTemplateSpec {
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: s("c"),
                            readiness_probe: Some(Probe {
                                handler: Some(ProbeHandler {
                                    http_get: Some(HttpGetAction {
                                        port: Some(int_or_string),
                                        ..HttpGetAction::default()
                                    }),
                                    ..ProbeHandler::default()
                                }),
                                ..Probe::default()
                            }),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                    ..PodTemplateSpec::default()
                }),
                ..JobSpec::default()
            }),
            ..Job::default()
        };
        decode(&envelope("batch/v1", "Job", &job)).unwrap()["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
            ["httpGet"]["port"]
            .clone()
    };
    assert_eq!(
        port(IntOrString {
            r#type: Some(0),
            int_val: Some(8080),
            str_val: s("")
        }),
        json!(8080)
    );
    assert_eq!(
        port(IntOrString {
            r#type: None,
            int_val: Some(443),
            str_val: None
        }),
        json!(443)
    );
    assert_eq!(port(IntOrString::default()), json!(0));
    assert_eq!(
        port(IntOrString {
            r#type: Some(1),
            int_val: None,
            str_val: s("https")
        }),
        json!("https")
    );
}
