//! `localkube up` stopped and started again on the same state directory: the objects come back,
//! their pods run again with their PVC data, and after the final stop nothing it started is
//! left on the machine (processes, network interfaces, mounts).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

fn network_field(lk: &LocalKube, field: &str) -> String {
    let net: serde_json::Value = serde_json::from_str(&lk.network().unwrap()).unwrap();
    net[field]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| net[field].to_string())
}

fn links() -> String {
    let out = std::process::Command::new("ip")
        .args(["-br", "link"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Processes whose command line mentions `needle` (the instance's state directory).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

#[tokio::test]
async fn restart_keeps_objects_and_data_and_stop_leaves_nothing() {
    let mut lk = start_full().await;
    // The container's shell carries this in its command line, so the test can find it.
    let marker = format!("counter-marker-{}", std::process::id());
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(
        &lk,
        &kc,
        "default",
        &r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: counter}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: counter}
spec:
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'echo run >> /data/runs; echo "runs=$(wc -l < /data/runs)"; while true; do sleep 1; done', MARKER]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: counter}}]
"#
        .replace("MARKER", &marker),
    );
    wait_pod_ready(&client, "default", "counter", Duration::from_secs(60)).await;
    assert_eq!(processes_mentioning(&marker).len(), 1, "the container runs");
    let bridge = network_field(&lk, "bridge");
    assert!(links().contains(&bridge), "{bridge} exists while running");

    lk.restart().await.unwrap();
    let client = common::client(&lk).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    wait_until(
        "counter runs again with its data",
        Duration::from_secs(90),
        || async {
            let logs = lk
                .kubectl(&kc, &["logs", "counter"])
                .map_err(|e| e.to_string())?;
            let p = pods.get("counter").await.map_err(|e| e.to_string())?;
            if logs.contains("runs=2") && pod_condition(&p, "Ready").as_deref() == Some("True") {
                Ok(())
            } else {
                Err(logs)
            }
        },
    )
    .await;

    let state = lk.state_dir().to_string_lossy().into_owned();
    let pid = lk.pid();
    lk.stop().await.unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "localkube exited"
    );
    let mut left = processes_mentioning(&state);
    left.extend(processes_mentioning(&marker));
    assert!(left.is_empty(), "processes left behind: {left:#?}");
    let links = links();
    assert!(!links.contains(&bridge), "bridge left behind:\n{links}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&state), "mounts left behind:\n{mounts}");
}
