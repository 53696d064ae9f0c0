//! TLS clusters end to end: members speaking https to each other and to clients with
//! operator-managed certificates, the operator observing and growing them through its own client
//! certificate, concurrent clients over TLS (their history linearizable, no acknowledged write
//! lost), plaintext and certificate-less clients refused by the members; and a cluster naming a
//! Secret that does not exist refused before any member starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;

const V36: &str = "3.6.16";
const STEP: Duration = Duration::from_secs(240);

fn text(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

#[tokio::test]
async fn tls_cluster_with_operator_managed_certificates_refuses_plaintext() {
    let env = Env::start().await;
    let example = std::fs::read_to_string(workspace().join("examples/cluster-tls.yaml")).unwrap();
    env.apply(&example).unwrap();
    env.wait_available("main-tls", 3, V36, STEP).await;

    // The operator made the CA, one certificate per member and its own client certificate.
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    for name in [
        "main-tls-ca",
        "main-tls-operator-client-tls",
        "main-tls-0-tls",
        "main-tls-1-tls",
        "main-tls-2-tls",
    ] {
        let secret = secrets.get(name).await.unwrap();
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"), "{name}");
    }
    let cluster = env.clusters().get("main-tls").await.unwrap();
    let status = cluster.status.unwrap();
    assert!(
        status.members.iter().all(|m| m
            .peer_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"))
            && m.client_url
                .as_deref()
                .is_some_and(|u| u.starts_with("https://"))),
        "{:?}",
        status.members
    );

    // A client with a certificate of the cluster's CA writes over TLS (through the client
    // Service's ClusterIP; the name checked is the Service's).
    let client_secret = secrets.get("main-tls-operator-client-tls").await.unwrap();
    let ca = etcd_client::Certificate::from_pem(text(&client_secret, "ca.crt"));
    let identity = etcd_client::Identity::from_pem(
        text(&client_secret, "tls.crt"),
        text(&client_secret, "tls.key"),
    );
    let server_name = format!("main-tls-client.{NS}.svc");
    let tls = etcd_client::TlsOptions::new()
        .ca_certificate(ca.clone())
        .identity(identity)
        .domain_name(server_name.clone());
    let plain_url = env.client_url("main-tls").await;
    let https_url = plain_url.replacen("http://", "https://", 1);
    let clients = Workload::start_tls(https_url.clone(), Some(tls));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while clients.acknowledged() < 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the TLS clients got no 20 writes acknowledged in 60 s\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Plaintext is refused by the members.
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(3))
        .with_timeout(Duration::from_secs(3));
    let plain = async {
        let mut c =
            etcd_client::Client::connect([plain_url.as_str()], Some(options.clone())).await?;
        c.put("plaintext", "x", None).await
    };
    assert!(
        plain.await.is_err(),
        "a plaintext client wrote to a TLS member"
    );
    // So is TLS without a client certificate (clientCertAuth).
    let anonymous = async {
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(ca)
            .domain_name(server_name);
        let mut c =
            etcd_client::Client::connect([https_url.as_str()], Some(options.clone().with_tls(tls)))
                .await?;
        c.put("anonymous", "x", None).await
    };
    assert!(
        anonymous.await.is_err(),
        "a client without certificate wrote"
    );

    // A member killed is restarted and rejoins over TLS; no acknowledged write is lost.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let old_uid = pods.get("main-tls-1").await.unwrap().metadata.uid;
    env.kubectl(&["delete", "pod", "main-tls-1", "-n", NS, "--wait=false"]);
    wait_pod_replaced(&env, "main-tls-1", old_uid, STEP).await;
    env.wait_available("main-tls", 3, V36, STEP).await;
    let checked = clients.check().await;
    assert!(checked >= 20, "{checked}");
    clients.stop().await;
    let args = env.kubectl(&[
        "get",
        "pod",
        "main-tls-1",
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.containers[0].args}",
    ]);
    assert!(
        args.contains("--client-cert-auth") && args.contains("--peer-client-cert-auth"),
        "{args}"
    );

    // Switching a running cluster back to plain HTTP is refused by the API server.
    let plain = env.apply(&cluster_yaml("main-tls", 3, V36)).unwrap_err();
    assert!(plain.contains("spec.tls cannot change"), "{plain}");

    // A Secret that does not exist: refused naming the field and the Secret; no member starts.
    env.apply(
        "apiVersion: etcd.operator.rs/v1alpha1
kind: EtcdCluster
metadata:
  name: nosecret
spec:
  size: 1
  version: 3.6.16
  tls:
    client:
      secretRef:
        name: missing-serving
",
    )
    .unwrap();
    env.wait_status("nosecret", "refused for the missing Secret", STEP, |c| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Degraded"
                    && c.status == "True"
                    && c.message.contains("spec.tls.client.secretRef")
                    && c.message.contains("missing-serving")
            })
        })
    })
    .await;
    let pods = env.kubectl(&["get", "pods", "-n", NS, "-o", "name"]);
    assert!(!pods.contains("nosecret"), "{pods}");
    let events = env.events_for("nosecret").await.join("\n");
    assert!(events.contains("missing-serving"), "{events}");
}
