//! kubectl (1.37 and 1.32) against localkube, spec §g items 1–3: discovery, api-resources, CRUD
//! through client-side apply (strategic merge patch for built-ins), protobuf bodies of
//! imperative commands, exact error texts, and `kubectl wait`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: c
        image: nginx:1.27
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
        - {name: C, value: "3"}
"#;

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn discovery_and_crud(pair: KubePair) {
    // The API alone: this test writes Deployment status itself (no controller competing).
    let lk = start_api_only().await;
    let k = clients(pair);
    let version = lk.kubectl(&k, &["version", "-o", "json"]).unwrap();
    assert_eq!(json(&version)["serverVersion"]["major"], "1", "{version}");

    let resources = lk.kubectl(&k, &["api-resources"]).unwrap();
    for needle in [
        "deployments",
        "poddisruptionbudgets",
        "customresourcedefinitions",
        "leases",
        "endpointslices",
    ] {
        assert!(
            resources.contains(needle),
            "api-resources lacks {needle}:\n{resources}"
        );
    }

    // Imperative creates: kubectl 1.32+ sends these as protobuf.
    lk.kubectl(&k, &["create", "namespace", "team"]).unwrap();
    lk.kubectl(
        &k,
        &[
            "-n",
            "team",
            "create",
            "secret",
            "generic",
            "s3",
            "--from-literal=AWS_ACCESS_KEY_ID=abc",
        ],
    )
    .unwrap();
    lk.kubectl(
        &k,
        &[
            "-n",
            "team",
            "create",
            "configmap",
            "cfg",
            "--from-literal=k=v",
        ],
    )
    .unwrap();
    let secret = json(
        &lk.kubectl(&k, &["-n", "team", "get", "secret", "s3", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(secret["data"]["AWS_ACCESS_KEY_ID"], "YWJj");
    assert_eq!(secret["type"], "Opaque");
    let ns = json(
        &lk.kubectl(&k, &["get", "namespace", "team", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    assert_eq!(ns["status"]["phase"], "Active");

    // Client-side apply, then a changed env re-applied: a strategic merge patch.
    lk.kubectl_stdin(&k, &["apply"], DEPLOYMENT).unwrap();
    let first = json(
        &lk.kubectl(&k, &["get", "deployment", "web", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(first["metadata"]["generation"], 1);
    assert_eq!(first["spec"]["replicas"], 1, "replicas defaulted");
    lk.kubectl_stdin(
        &k,
        &["apply"],
        &DEPLOYMENT.replace("value: \"2\"", "value: \"two\""),
    )
    .unwrap();
    let second = json(
        &lk.kubectl(&k, &["get", "deployment", "web", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(
        second["metadata"]["generation"], 2,
        "generation bumped exactly once"
    );
    let env: Vec<(String, String)> = second["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        env,
        [
            ("A".into(), "1".into()),
            ("B".into(), "two".into()),
            ("C".into(), "3".into())
        ]
    );
    // Re-applying the same manifest changes nothing.
    lk.kubectl_stdin(
        &k,
        &["apply"],
        &DEPLOYMENT.replace("value: \"2\"", "value: \"two\""),
    )
    .unwrap();
    let third = json(
        &lk.kubectl(&k, &["get", "deployment", "web", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(
        third["metadata"]["resourceVersion"],
        second["metadata"]["resourceVersion"]
    );

    // Exact error texts.
    let missing = failure(lk.kubectl(&k, &["get", "deployment", "nope"]));
    assert!(
        missing.contains(r#"Error from server (NotFound): deployments.apps "nope" not found"#),
        "{missing}"
    );
    let exists = failure(lk.kubectl(&k, &["create", "namespace", "team"]));
    assert!(
        exists.contains(r#"Error from server (AlreadyExists): namespaces "team" already exists"#),
        "{exists}"
    );
    let bad_name = failure(lk.kubectl(&k, &["create", "configmap", "Bad_Name"]));
    assert!(bad_name.contains(r#"ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#), "{bad_name}");
    let no_ns = failure(lk.kubectl(&k, &["-n", "ghost", "create", "configmap", "x"]));
    assert!(no_ns.contains(r#"namespaces "ghost" not found"#), "{no_ns}");

    // kubectl wait on a condition written through /status.
    lk.kubectl(&k, &["patch", "deployment", "web", "--subresource=status", "--type=merge", "-p", r#"{"status":{"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"ok"}]}}"#]).unwrap();
    lk.kubectl(
        &k,
        &[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "--timeout=20s",
        ],
    )
    .unwrap();
    let after_status = json(
        &lk.kubectl(&k, &["get", "deployment", "web", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(
        after_status["metadata"]["generation"], 2,
        "a status write does not bump generation"
    );

    // kubectl scale goes through the scale subresource.
    lk.kubectl(&k, &["scale", "deployment", "web", "--replicas=3"])
        .unwrap();
    let scaled = json(
        &lk.kubectl(&k, &["get", "deployment", "web", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(scaled["spec"]["replicas"], 3);
    assert_eq!(scaled["metadata"]["generation"], 3);
    let scale = json(
        &lk.kubectl(
            &k,
            &[
                "get",
                "--raw",
                "/apis/apps/v1/namespaces/default/deployments/web/scale",
            ],
        )
        .unwrap(),
    );
    assert_eq!(
        (
            scale["kind"].as_str(),
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["selector"].as_str()
        ),
        (Some("Scale"), Some(3), Some("app=web"))
    );

    // Delete and wait for it to be gone.
    lk.kubectl(
        &k,
        &[
            "delete",
            "deployment",
            "web",
            "--wait=true",
            "--timeout=20s",
        ],
    )
    .unwrap();
    let gone = failure(lk.kubectl(&k, &["get", "deployment", "web"]));
    assert!(gone.contains("not found"), "{gone}");
}

#[tokio::test]
async fn kubectl_current_discovery_and_crud() {
    discovery_and_crud(KubePair::Current).await;
}

#[tokio::test]
async fn kubectl_previous_discovery_and_crud() {
    discovery_and_crud(KubePair::Previous).await;
}
