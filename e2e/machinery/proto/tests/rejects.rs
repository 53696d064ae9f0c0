//! Untrusted bodies: every refusal is a typed error (400 or 415 material), never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_pb::api::apps::v1::Deployment;
use k8s_pb::api::batch::v1::{Job, JobSpec};
use k8s_pb::api::core::v1::{
    Container, HttpGetAction, PodSpec, PodTemplateSpec, Probe, ProbeHandler, Secret,
};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta, Time};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use localkube_proto::testing::{envelope, envelope_raw};
use localkube_proto::{DecodeError, MAGIC, decode};
use prost::Message;

fn malformed(body: &[u8]) -> bool {
    matches!(decode(body), Err(DecodeError::Malformed(_)))
}

fn unknown_body(unknown: &Unknown) -> Vec<u8> {
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

fn secret_with_meta(metadata: ObjectMeta) -> Vec<u8> {
    envelope(
        "v1",
        "Secret",
        &Secret {
            metadata: Some(metadata),
            ..Secret::default()
        },
    )
}

#[test]
fn kinds_without_a_decoder_are_unsupported() {
    let cases = [
        ("apps/v1", "Deployment"),
        ("v2", "Secret"),
        ("v1", "Pod"),
        ("batch/v1", "CronJob"),
        ("policy/v1beta1", "Eviction"),
        ("example.com/v1", "Widget"),
    ];
    for (api_version, kind) in cases {
        assert_eq!(
            decode(&envelope(api_version, kind, &Deployment::default())),
            Err(DecodeError::UnsupportedKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned()
            }),
            "{api_version} {kind}"
        );
    }
}

#[test]
fn bodies_without_the_magic_are_not_protobuf() {
    let cases: &[&[u8]] = &[
        b"",
        b"k8s",
        b"{\"kind\":\"Secret\"}",
        b"k8s\x01\x0a\x00",
        b"K8S\x00\x0a\x00",
        b"\x00k8s\x00",
    ];
    for body in cases {
        assert_eq!(decode(body), Err(DecodeError::NotProtobuf), "{body:?}");
    }
}

#[test]
fn truncation_inside_the_message_is_refused() {
    let secret = Secret {
        metadata: Some(ObjectMeta {
            name: Some("sh.helm.release.v1.a.v1".to_owned()),
            ..ObjectMeta::default()
        }),
        ..Secret::default()
    };
    let raw = secret.encode_to_vec();
    let body = envelope("v1", "Secret", &secret);
    assert!(decode(&body).is_ok());
    let raw_at = body
        .windows(raw.len())
        .position(|window| window == raw.as_slice())
        .unwrap();
    // Cutting inside `raw` leaves its declared length unmet.
    for end in raw_at..raw_at + raw.len() {
        assert!(malformed(&body[..end]), "prefix of {end} bytes");
    }
    // Cuts elsewhere may land on a field boundary, which is valid protobuf; none may panic.
    for end in 0..body.len() {
        let _ = decode(&body[..end]);
    }
}

#[test]
fn garbage_never_panics() {
    // A fixed xorshift sequence keeps the test deterministic.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let valid = envelope(
        "batch/v1",
        "Job",
        &Job {
            metadata: Some(ObjectMeta {
                name: Some("j".to_owned()),
                ..ObjectMeta::default()
            }),
            spec: Some(JobSpec::default()),
            ..Job::default()
        },
    );
    for round in 0..20_000 {
        let mut body = if round % 2 == 0 {
            let mut body = MAGIC.to_vec();
            body.extend((0..next() % 64).map(|_| next() as u8));
            body
        } else {
            valid.clone()
        };
        for _ in 0..1 + next() % 4 {
            let len = body.len() as u64;
            if len <= 4 {
                break;
            }
            let at = (4 + next() % (len - 4)) as usize;
            body[at] = next() as u8;
        }
        let _ = decode(&body);
    }
}

#[test]
fn garbage_raw_message_is_malformed() {
    for raw in [
        vec![0xff],
        vec![0x0a, 0x05, 0x01],
        vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
    ] {
        assert!(
            malformed(&envelope_raw("v1", "Secret", raw.clone())),
            "{raw:?}"
        );
    }
}

#[test]
fn deeply_nested_unknown_groups_are_refused_not_overflowed() {
    // Field 99 as a start-group tag (wire type 3), nested far beyond prost's recursion limit.
    let depth = 100_000;
    let mut raw = Vec::with_capacity(depth * 4);
    for _ in 0..depth {
        raw.extend([0x9b, 0x06]);
    }
    for _ in 0..depth {
        raw.extend([0x9c, 0x06]);
    }
    assert!(malformed(&envelope_raw("v1", "Secret", raw)));
}

#[test]
fn envelope_fields_must_be_what_clients_write() {
    let base = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".to_owned()),
            kind: Some("Secret".to_owned()),
        }),
        raw: Some(Secret::default().encode_to_vec()),
        content_encoding: None,
        content_type: None,
    };
    assert!(decode(&unknown_body(&base)).is_ok());
    let accepted_type = Unknown {
        content_type: Some(localkube_proto::MEDIA_TYPE.to_owned()),
        ..base.clone()
    };
    assert!(decode(&unknown_body(&accepted_type)).is_ok());

    let refused = [
        Unknown {
            content_encoding: Some("gzip".to_owned()),
            ..base.clone()
        },
        Unknown {
            content_type: Some("application/json".to_owned()),
            ..base.clone()
        },
        Unknown {
            type_meta: None,
            ..base.clone()
        },
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("v1".to_owned()),
                kind: None,
            }),
            ..base.clone()
        },
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(String::new()),
                kind: Some("Secret".to_owned()),
            }),
            ..base.clone()
        },
    ];
    for unknown in refused {
        assert!(malformed(&unknown_body(&unknown)), "{unknown:?}");
    }
}

#[test]
fn values_go_could_not_have_written_are_malformed() {
    let not_json = ObjectMeta {
        managed_fields: vec![ManagedFieldsEntry {
            fields_v1: Some(FieldsV1 {
                raw: Some(b"{\"f:data\":".to_vec()),
            }),
            ..ManagedFieldsEntry::default()
        }],
        ..ObjectMeta::default()
    };
    assert!(malformed(&secret_with_meta(not_json)));

    for seconds in [253_402_300_800, i64::MAX, i64::MIN] {
        let far = ObjectMeta {
            creation_timestamp: Some(Time {
                seconds: Some(seconds),
                nanos: None,
            }),
            ..ObjectMeta::default()
        };
        assert!(malformed(&secret_with_meta(far)), "{seconds}");
    }

    let port = IntOrString {
        r#type: Some(2),
        int_val: Some(1),
        str_val: None,
    };
    let job = Job {
        spec: Some(JobSpec {
            template: Some(PodTemplateSpec {
                spec: Some(PodSpec {
                    containers: vec![Container {
                        liveness_probe: Some(Probe {
                            handler: Some(ProbeHandler {
                                http_get: Some(HttpGetAction {
                                    port: Some(port),
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
    assert!(malformed(&envelope("batch/v1", "Job", &job)));
}

#[test]
fn error_texts_name_the_problem() {
    assert_eq!(
        DecodeError::UnsupportedKind {
            api_version: "apps/v1".to_owned(),
            kind: "Deployment".to_owned()
        }
        .to_string(),
        "no protobuf decoder for kind \"Deployment\" in version \"apps/v1\""
    );
    let Err(error) = decode(&envelope_raw("v1", "Secret", vec![0xff])) else {
        panic!("decoded garbage")
    };
    assert!(
        error.to_string().starts_with("malformed protobuf body: "),
        "{error}"
    );
}
