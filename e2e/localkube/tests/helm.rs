//! helm (4.3 and 3.17) against localkube, spec §g item 4 (objects only; pods run in part 2):
//! install of a chart with CRDs, RBAC, a Deployment, a Service and a custom resource (release
//! Secrets go through the protobuf path; helm 4 installs with server-side apply), then
//! upgrade, rollback, history, uninstall and a reinstall that skips the existing CRD.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn lifecycle(pair: KubePair) {
    let lk = start().await;
    let k = clients(pair);
    let chart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chart");
    let chart = chart.to_str().unwrap();

    lk.helm(&k, &["install", "probe", chart, "--namespace", "default"])
        .unwrap();
    let widget = json(
        &lk.kubectl(&k, &["get", "widget", "probe", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(widget["spec"]["size"], 1);
    let svc = json(
        &lk.kubectl(&k, &["get", "service", "probe", "-o", "json"])
            .unwrap(),
    );
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .unwrap()
            .starts_with("10.96."),
        "{svc}"
    );
    let releases = lk
        .kubectl(
            &k,
            &[
                "get",
                "secrets",
                "-l",
                "owner=helm,name=probe",
                "-o",
                "name",
            ],
        )
        .unwrap();
    assert_eq!(releases.trim(), "secret/sh.helm.release.v1.probe.v1");

    lk.helm(
        &k,
        &[
            "upgrade",
            "probe",
            chart,
            "--set",
            "replicas=2",
            "--set",
            "greeting=hi",
        ],
    )
    .unwrap();
    let deploy = json(
        &lk.kubectl(&k, &["get", "deployment", "probe", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(deploy["metadata"]["generation"], 2);
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
        "hi"
    );
    let widget = json(
        &lk.kubectl(&k, &["get", "widget", "probe", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(widget["spec"]["size"], 2);

    lk.helm(&k, &["rollback", "probe", "1"]).unwrap();
    let deploy = json(
        &lk.kubectl(&k, &["get", "deployment", "probe", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(deploy["spec"]["replicas"], 1);
    let history = lk.helm(&k, &["history", "probe", "-o", "json"]).unwrap();
    assert_eq!(json(&history).as_array().unwrap().len(), 3, "{history}");
    let status = lk.helm(&k, &["status", "probe"]).unwrap();
    assert!(status.contains("STATUS: deployed"), "{status}");

    lk.helm(&k, &["uninstall", "probe"]).unwrap();
    let left = lk
        .kubectl(
            &k,
            &[
                "get",
                "deployments,services,configmaps,widgets",
                "-o",
                "name",
            ],
        )
        .unwrap();
    assert!(
        !left.contains("probe"),
        "uninstall removed the release's objects:\n{left}"
    );
    // CRDs in crds/ are never deleted by helm; a reinstall skips the existing one.
    lk.kubectl(&k, &["get", "crd", "widgets.probe.example.com"])
        .unwrap();
    lk.helm(&k, &["install", "probe", chart]).unwrap();
    let list = lk.helm(&k, &["list", "-o", "json"]).unwrap();
    assert_eq!(json(&list)[0]["status"], "deployed", "{list}");
}

#[tokio::test]
async fn helm_current_install_upgrade_rollback_uninstall() {
    lifecycle(KubePair::Current).await;
}

#[tokio::test]
async fn helm_previous_install_upgrade_rollback_uninstall() {
    lifecycle(KubePair::Previous).await;
}
