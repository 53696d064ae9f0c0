//! Bad input gets the Status error the real server returns, never a panic and never a partial
//! write (issue "Bad input"): malformed JSON/YAML/protobuf, unknown and duplicate fields under
//! Strict, oversized bodies, invalid names, selectors that do not parse, patches that do not
//! apply, stale resourceVersions, writes into a terminating namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, Request};
use common::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};

async fn call(
    client: &kube::Client,
    method: Method,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(body)
        .unwrap();
    let resp = client
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| json!({ "raw": String::from_utf8_lossy(&bytes) }));
    (status, value)
}

fn expect(result: (u16, Value), code: u16, reason: &str, message_part: &str) {
    let (status, body) = result;
    assert_eq!(status, code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    let message = body["message"].as_str().unwrap_or("");
    assert!(
        message.contains(message_part),
        "message {message:?} lacks {message_part:?}"
    );
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn bad_requests_get_real_status_errors_and_write_nothing() {
    let lk = start().await;
    let c = client(&lk).await;
    let json_ct = "application/json";

    expect(
        call(&c, Method::POST, CMS, json_ct, b"{\"metadata\": {".to_vec()).await,
        400,
        "BadRequest",
        "",
    );
    expect(
        call(
            &c,
            Method::POST,
            CMS,
            "application/vnd.kubernetes.protobuf",
            b"k8s\0garbage".to_vec(),
        )
        .await,
        400,
        "BadRequest",
        "",
    );
    expect(
        call(&c, Method::POST, CMS, "text/plain", b"hello".to_vec()).await,
        415,
        "UnsupportedMediaType",
        "",
    );
    expect(
        call(
            &c,
            Method::POST,
            CMS,
            json_ct,
            vec![b' '; 3 * 1024 * 1024 + 10],
        )
        .await,
        413,
        "RequestEntityTooLarge",
        "",
    );
    expect(
        call(
            &c,
            Method::POST,
            &format!("{CMS}?fieldValidation=Strict"),
            json_ct,
            br#"{"metadata":{"name":"a"},"data":{"k":"1"},"data":{"k":"2"}}"#.to_vec(),
        )
        .await,
        400,
        "BadRequest",
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "data""#,
    );
    expect(
        call(
            &c,
            Method::POST,
            &format!("{CMS}?fieldValidation=Strict"),
            json_ct,
            br#"{"metadata":{"name":"a"},"dta":{"k":"1"}}"#.to_vec(),
        )
        .await,
        400,
        "BadRequest",
        r#"strict decoding error: unknown field "dta""#,
    );
    expect(
        call(
            &c,
            Method::POST,
            CMS,
            json_ct,
            br#"{"metadata":{"name":"a","resourceVersion":"5"}}"#.to_vec(),
        )
        .await,
        400,
        "BadRequest",
        "resourceVersion should not be set on objects to be created",
    );
    expect(
        call(
            &c,
            Method::POST,
            CMS,
            json_ct,
            br#"{"metadata":{"name":"UPPER"}}"#.to_vec(),
        )
        .await,
        422,
        "Invalid",
        r#"ConfigMap "UPPER" is invalid: metadata.name: Invalid value: "UPPER""#,
    );
    expect(
        call(
            &c,
            Method::GET,
            &format!("{CMS}?labelSelector=a%20in%20(b"),
            json_ct,
            vec![],
        )
        .await,
        400,
        "BadRequest",
        "",
    );
    expect(
        call(
            &c,
            Method::GET,
            &format!("{CMS}?fieldSelector=spec.bogus%3Dx"),
            json_ct,
            vec![],
        )
        .await,
        400,
        "BadRequest",
        "spec.bogus",
    );
    expect(
        call(
            &c,
            Method::GET,
            &format!("{CMS}?continue=not-a-token"),
            json_ct,
            vec![],
        )
        .await,
        400,
        "BadRequest",
        "continue key is not valid",
    );

    // Nothing above was written.
    let (_, list) = call(&c, Method::GET, CMS, json_ct, vec![]).await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert!(
        !names.contains(&"a") && !names.contains(&"UPPER"),
        "{names:?}"
    );

    // Patches that do not apply, and a stale resourceVersion.
    let (created, obj) = call(
        &c,
        Method::POST,
        CMS,
        json_ct,
        br#"{"metadata":{"name":"p"},"data":{"k":"v"}}"#.to_vec(),
    )
    .await;
    assert_eq!(created, 201, "{obj}");
    let item = format!("{CMS}/p");
    expect(
        call(
            &c,
            Method::PATCH,
            &item,
            "application/json-patch+json",
            br#"[{"op":"test","path":"/data/k","value":"other"}]"#.to_vec(),
        )
        .await,
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    );
    expect(
        call(
            &c,
            Method::PATCH,
            &item,
            "application/merge-patch+json",
            b"[1,2]".to_vec(),
        )
        .await,
        400,
        "BadRequest",
        "",
    );
    let stale = json!({"metadata": {"name": "p", "resourceVersion": "1"}, "data": {"k": "w"}});
    expect(
        call(
            &c,
            Method::PUT,
            &item,
            json_ct,
            serde_json::to_vec(&stale).unwrap(),
        )
        .await,
        409,
        "Conflict",
        r#"Operation cannot be fulfilled on configmaps "p": the object has been modified"#,
    );
    let (_, now) = call(&c, Method::GET, &item, json_ct, vec![]).await;
    assert_eq!(now["data"]["k"], "v", "no partial write");
    assert_eq!(
        now["metadata"]["resourceVersion"],
        obj["metadata"]["resourceVersion"]
    );

    // Strategic merge patch is for built-ins only.
    lk.kubectl_stdin(
        &clients(KubePair::Current),
        &["apply"],
        include_str!("fixtures/chart/crds/widgets.yaml"),
    )
    .unwrap();
    let widgets = "/apis/probe.example.com/v1/namespaces/default/widgets";
    let (code, w) = call(&c, Method::POST, widgets, json_ct, br#"{"apiVersion":"probe.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}"#.to_vec()).await;
    assert_eq!(code, 201, "{w}");
    assert_eq!(w["spec"]["size"], 1, "schema default");
    expect(
        call(
            &c,
            Method::PATCH,
            &format!("{widgets}/w"),
            "application/strategic-merge-patch+json",
            br#"{"spec":{"size":2}}"#.to_vec(),
        )
        .await,
        415,
        "UnsupportedMediaType",
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    );
    expect(
        call(
            &c,
            Method::PATCH,
            &format!("{widgets}/w"),
            "application/merge-patch+json",
            br#"{"spec":{"color":"green"}}"#.to_vec(),
        )
        .await,
        422,
        "Invalid",
        r#"Widget.probe.example.com "w" is invalid: spec.color: Unsupported value: "green": supported values: "red", "blue""#,
    );

    // A terminating namespace takes no new objects; a missing one is a 404.
    let (_, _) = call(
        &c,
        Method::POST,
        "/api/v1/namespaces",
        json_ct,
        br#"{"metadata":{"name":"doomed","finalizers":["example.com/hold"]}}"#.to_vec(),
    )
    .await;
    let (_, _) = call(
        &c,
        Method::POST,
        "/api/v1/namespaces/doomed/configmaps",
        json_ct,
        br#"{"metadata":{"name":"x"}}"#.to_vec(),
    )
    .await;
    let (code, ns) = call(
        &c,
        Method::DELETE,
        "/api/v1/namespaces/doomed",
        json_ct,
        vec![],
    )
    .await;
    assert!(code == 200 || code == 202, "{ns}");
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
    expect(
        call(
            &c,
            Method::POST,
            "/api/v1/namespaces/doomed/configmaps",
            json_ct,
            br#"{"metadata":{"name":"y"}}"#.to_vec(),
        )
        .await,
        403,
        "Forbidden",
        r#"configmaps "y" is forbidden: unable to create new content in namespace doomed because it is being terminated"#,
    );
    expect(
        call(
            &c,
            Method::POST,
            "/api/v1/namespaces/ghost/configmaps",
            json_ct,
            br#"{"metadata":{"name":"y"}}"#.to_vec(),
        )
        .await,
        404,
        "NotFound",
        r#"namespaces "ghost" not found"#,
    );
}
