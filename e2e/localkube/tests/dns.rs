//! Cluster DNS and Service networking with real etcd members (spec §g item 7): three etcd pods
//! bootstrap each other through DNS peer URLs of a headless Service that publishes not-ready
//! addresses — and fail to, as on Kubernetes, when it does not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;

fn etcd_members(publish_not_ready: bool) -> String {
    let mut out = format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: etcd}}
spec:
  clusterIP: None
  publishNotReadyAddresses: {publish_not_ready}
  selector: {{app: etcd}}
  ports: [{{name: peer, port: 2380}}, {{name: client, port: 2379}}]
---
apiVersion: v1
kind: Service
metadata: {{name: etcd-client}}
spec:
  selector: {{app: etcd}}
  ports: [{{name: client, port: 2379}}]
"#
    );
    let cluster = (0..3)
        .map(|i| format!("etcd-{i}=http://etcd-{i}.etcd.default.svc:2380"))
        .collect::<Vec<_>>()
        .join(",");
    for i in 0..3 {
        out.push_str(&format!(
            r#"---
apiVersion: v1
kind: Pod
metadata: {{name: etcd-{i}, labels: {{app: etcd}}}}
spec:
  hostname: etcd-{i}
  subdomain: etcd
  containers:
  - name: etcd
    image: gcr.io/etcd-development/etcd:v3.5.1
    command:
    - etcd
    - --name=etcd-{i}
    - --data-dir=/var/lib/etcd
    - --listen-peer-urls=http://0.0.0.0:2380
    - --listen-client-urls=http://0.0.0.0:2379
    - --initial-advertise-peer-urls=http://etcd-{i}.etcd.default.svc:2380
    - --advertise-client-urls=http://etcd-{i}.etcd.default.svc:2379
    - --initial-cluster={cluster}
    - --initial-cluster-state=new
    - --initial-cluster-token=dns-test
    readinessProbe: {{httpGet: {{path: /health, port: 2379}}, periodSeconds: 2}}
    volumeMounts: [{{name: data, mountPath: /var/lib/etcd}}]
  volumes: [{{name: data, emptyDir: {{}}}}]
"#
        ));
    }
    out
}

#[tokio::test]
async fn etcd_members_find_each_other_through_cluster_dns() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(&lk, &kc, "default", &etcd_members(true));
    for i in 0..3 {
        wait_pod_ready(
            &client,
            "default",
            &format!("etcd-{i}"),
            Duration::from_secs(90),
        )
        .await;
    }
    // The members really form one cluster: ask through the ClusterIP Service, from the host.
    let svc: Service = Api::default_namespaced(client.clone())
        .get("etcd-client")
        .await
        .unwrap();
    let cluster_ip = svc.spec.unwrap().cluster_ip.unwrap();
    // Pods turn Ready before the EndpointSlice controller has published them, and until then the
    // proxy has no backend (kube-proxy rejects such connections too): retry within a deadline.
    let members = wait_until(
        "member list through the ClusterIP",
        Duration::from_secs(30),
        || {
            let url = format!("http://{cluster_ip}:2379");
            async move {
                let mut etcd = etcd_client::Client::connect([url], None)
                    .await
                    .map_err(|e| e.to_string())?;
                etcd.member_list().await.map_err(|e| e.to_string())
            }
        },
    )
    .await;
    let mut names: Vec<_> = members
        .members()
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["etcd-0", "etcd-1", "etcd-2"]);

    // Inside a pod, glibc resolves the FQDN and the short name through the search list.
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: resolver}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'getent hosts etcd-0.etcd.default.svc.cluster.local; getent hosts etcd-1.etcd; getent hosts etcd-client; cat /etc/resolv.conf']
"#,
    );
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    wait_until("resolver done", Duration::from_secs(60), || async {
        let p = pods.get("resolver").await.map_err(|e| e.to_string())?;
        match p.status.and_then(|s| s.phase).as_deref() {
            Some("Succeeded") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let log = lk.kubectl(&kc, &["logs", "resolver"]).unwrap();
    let ip_of = |name: &str| {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            pods.get(&name)
                .await
                .unwrap()
                .status
                .unwrap()
                .pod_ip
                .unwrap()
        }
    };
    let ip0 = ip_of("etcd-0").await;
    let ip1 = ip_of("etcd-1").await;
    assert!(
        log.contains(&ip0) && log.contains("etcd-0.etcd.default.svc.cluster.local"),
        "{log}"
    );
    assert!(log.contains(&ip1), "short name via the search list: {log}");
    assert!(log.contains(&cluster_ip), "ClusterIP Service name: {log}");
    assert!(
        log.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{log}"
    );
    assert!(log.contains("options ndots:5"), "{log}");

    // `localkube run` gives a host process the same view (an operator under `cargo run`).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_localkube"))
        .args(["run", "--state-dir"])
        .arg(lk.state_dir())
        .args(["--", "getent", "hosts", "etcd-2.etcd.default.svc"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    let ip2 = ip_of("etcd-2").await;
    assert!(
        out.status.success() && printed.contains(&ip2),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn without_publish_not_ready_addresses_members_cannot_bootstrap() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(&lk, &kc, "default", &etcd_members(false));
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    // Not ready → no DNS record → etcd cannot resolve its peers' advertise URLs: it exits
    // (etcd 3.5.1) or keeps retrying (3.5.35), as with CoreDNS on a real cluster; either way no
    // member becomes Ready while we watch.
    let watch_until = tokio::time::Instant::now() + Duration::from_secs(45);
    while tokio::time::Instant::now() < watch_until {
        for i in 0..3 {
            if let Ok(p) = pods.get(&format!("etcd-{i}")).await {
                assert_ne!(
                    pod_condition(&p, "Ready").as_deref(),
                    Some("True"),
                    "etcd-{i} became ready without publishNotReadyAddresses"
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for i in 0..3 {
        let p = pods.get(&format!("etcd-{i}")).await.unwrap();
        assert_ne!(
            pod_condition(&p, "Ready").as_deref(),
            Some("True"),
            "etcd-{i} must not become ready"
        );
    }
}
