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

/// A client certificate for the test's own clients, signed by the cluster's operator-managed CA
/// (Secret `<cluster>-ca`) and valid for an hour: the operators' own expires with the short
/// lifetime the renewal scenario runs with.
fn test_client_tls(ca: &Secret, server_name: &str) -> etcd_client::TlsOptions {
    let ca_pem = text(ca, "tls.crt");
    client_tls_from(&ca_pem, &text(ca, "tls.key"), &ca_pem, server_name)
}

/// A client certificate signed by the CA `issuer_pem`/`issuer_key`, trusting `trust_pem`.
fn client_tls_from(
    issuer_pem: &str,
    issuer_key: &str,
    trust_pem: &str,
    server_name: &str,
) -> etcd_client::TlsOptions {
    let ca_pem = trust_pem.to_owned();
    let issuer =
        rcgen::Issuer::from_ca_cert_pem(issuer_pem, rcgen::KeyPair::from_pem(issuer_key).unwrap())
            .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "e2e-client");
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::hours(1);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).unwrap();
    etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(ca_pem))
        .identity(etcd_client::Identity::from_pem(
            cert.pem(),
            key.serialize_pem(),
        ))
        .domain_name(server_name)
}

/// notAfter (Unix seconds) of a PEM certificate.
fn not_after(pem: &str) -> i64 {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    pem.parse_x509().unwrap().validity().not_after.timestamp()
}

/// Watches the member Pods from outside the operator, every 250 ms: the fewest Ready at once.
/// A roll takes one member down at a time, so a 3-member cluster keeps at least 2 (quorum).
struct ReadyWatch {
    fewest: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadyWatch {
    fn start(env: &Env, cluster: &str) -> ReadyWatch {
        let fewest = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
        let selector = format!("etcd.operator.rs/cluster={cluster}");
        let seen = fewest.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(list) = pods
                    .list(&kube::api::ListParams::default().labels(&selector))
                    .await
                {
                    let ready = list.items.iter().filter(|p| pod_is_ready(p)).count();
                    seen.fetch_min(ready, std::sync::atomic::Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        ReadyWatch { fewest, task }
    }

    fn stop(self) -> usize {
        self.task.abort();
        self.fewest.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Issue 19: operator-managed member and client certificates are renewed before they expire,
/// and members roll onto them one at a time while clients write. The operator runs with
/// 120-second certificates (renewed with 40 s left); the scenario waits until each member's
/// certificate was renewed and its Pod re-created since, then until the first certificates
/// expired, and connects afresh to every member: each serves a valid (renewed) certificate.
#[tokio::test]
async fn operator_managed_certificates_are_renewed_without_losing_quorum() {
    let env = Env::start_with_values(&[
        "--set",
        "clusterOperator.extraArgs={--certificate-validity-seconds=120}",
    ])
    .await;
    let started = tokio::time::Instant::now();
    let example = std::fs::read_to_string(workspace().join("examples/cluster-tls.yaml")).unwrap();
    env.apply(&example).unwrap();
    env.wait_available("main-tls", 3, V36, STEP).await;
    let formed = started.elapsed();

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ca = secrets.get("main-tls-ca").await.unwrap();
    let server_name = format!("main-tls-client.{NS}.svc");
    let https_url = env
        .client_url("main-tls")
        .await
        .replacen("http://", "https://", 1);
    let clients = Workload::start_tls(https_url.clone(), Some(test_client_tls(&ca, &server_name)));
    let watch = ReadyWatch::start(&env, "main-tls");

    let members = ["main-tls-0", "main-tls-1", "main-tls-2"];
    let mut first = Vec::new();
    for member in members {
        let cert = text(
            &secrets.get(&format!("{member}-tls")).await.unwrap(),
            "tls.crt",
        );
        let uid = pods.get(member).await.unwrap().metadata.uid.unwrap();
        first.push((member, cert, uid));
    }
    let client_cert = text(
        &secrets.get("main-tls-operator-client-tls").await.unwrap(),
        "tls.crt",
    );
    let first_expiry = first
        .iter()
        .map(|(_, cert, _)| not_after(cert))
        .chain([not_after(&client_cert)])
        .max()
        .unwrap();

    // Every member's certificate renewed, and its Pod re-created (Ready) since.
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut pending = Vec::new();
        for (member, cert, uid) in &first {
            let now = text(
                &secrets.get(&format!("{member}-tls")).await.unwrap(),
                "tls.crt",
            );
            let pod = pods.get_opt(member).await.unwrap();
            let rolled = pod.as_ref().is_some_and(|p| {
                p.metadata.uid.as_ref() != Some(uid)
                    && pod_is_ready(p)
                    && p.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key("etcd.operator.rs/tls-hash"))
            });
            if now == *cert || !rolled {
                pending.push(*member);
            }
        }
        let client_now = text(
            &secrets.get("main-tls-operator-client-tls").await.unwrap(),
            "tls.crt",
        );
        if client_now == client_cert {
            pending.push("operator client certificate");
        }
        if pending.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not renewed and rolled after {STEP:?}: {pending:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let renewed = started.elapsed();

    // The first certificates have expired: fresh connections to each member (a new TLS
    // handshake) and through the Service succeed, so every member serves a renewed one, and the
    // operator, on its renewed client certificate, still sees the cluster whole.
    let wait = first_expiry + 2 - time::OffsetDateTime::now_utc().unix_timestamp();
    if wait > 0 {
        tokio::time::sleep(Duration::from_secs(wait.unsigned_abs())).await;
    }
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(5));
    for member in members {
        let ip = pods
            .get(member)
            .await
            .unwrap()
            .status
            .unwrap()
            .pod_ip
            .unwrap();
        let tls = test_client_tls(&ca, &format!("{member}.main-tls.{NS}.svc"));
        let mut c = etcd_client::Client::connect(
            [format!("https://{ip}:2379")],
            Some(options.clone().with_tls(tls)),
        )
        .await
        .unwrap_or_else(|e| panic!("connecting to {member} after renewal: {e}"));
        c.put(format!("after-renewal-{member}"), "x", None)
            .await
            .unwrap_or_else(|e| panic!("writing through {member} after renewal: {e}"));
    }
    env.wait_available("main-tls", 3, V36, STEP).await;
    let checked = clients.check().await;
    assert!(checked >= 20, "only {checked} writes acknowledged");
    let report = clients.stop().await;
    let fewest_ready = watch.stop();
    assert!(
        fewest_ready >= 2,
        "only {fewest_ready} member Pods were Ready at one point: quorum was at risk"
    );
    let cluster = env.clusters().get("main-tls").await.unwrap();
    assert!(!quorum_loss_reported(&cluster));
    let events = env.events_for("main-tls").await.join("\n");
    assert!(events.contains("CertificateRenewed"), "{events}");
    eprintln!(
        "formed in {formed:?}, renewed and rolled by {renewed:?}, done in {:?}; fewest Ready \
         {fewest_ready}; {report}",
        started.elapsed()
    );
}

/// Waits until the cluster's CA Secret satisfies `check`; returns it.
async fn wait_ca_secret(env: &Env, what: &str, check: impl Fn(&Secret) -> bool) -> Secret {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let secret = secrets.get("main-tls-ca").await.unwrap();
        if check(&secret) {
            return secret;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "CA rotation: {what} not seen after {STEP:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn has_key(secret: &Secret, key: &str) -> bool {
    secret.data.as_ref().is_some_and(|d| d.contains_key(key))
}

/// Issue 19: the operator-managed CA is rotated on request (annotation
/// `etcd.operator.rs/rotate-ca`) with an overlap period: the new CA is trusted next to the old
/// one, members are re-issued by it, then the old one is dropped; each step rolls the members
/// one at a time while clients write. Clients with client certificates must move to the new CA
/// while every member trusts both (as a real client would): the first clients (a certificate of
/// the old CA) run until the members are re-issued, the second (of the new CA, trusting both)
/// from then to the end. Both histories are linearizable, no acknowledged write is lost, no
/// more than one member Pod is ever not Ready.
#[tokio::test]
async fn operator_managed_ca_is_rotated_without_losing_quorum() {
    let env = Env::start().await;
    let started = tokio::time::Instant::now();
    let example = std::fs::read_to_string(workspace().join("examples/cluster-tls.yaml")).unwrap();
    env.apply(&example).unwrap();
    env.wait_available("main-tls", 3, V36, STEP).await;
    let formed = started.elapsed();

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let old_ca = secrets.get("main-tls-ca").await.unwrap();
    let old_ca_pem = text(&old_ca, "tls.crt");
    let server_name = format!("main-tls-client.{NS}.svc");
    let https_url = env
        .client_url("main-tls")
        .await
        .replacen("http://", "https://", 1);
    let first = Workload::start_tls_on(
        https_url.clone(),
        Some(test_client_tls(&old_ca, &server_name)),
        "history-old-ca/k",
    );
    let watch = ReadyWatch::start(&env, "main-tls");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while first.acknowledged() < 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no 20 writes in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    env.kubectl(&[
        "annotate",
        "etcdcluster",
        "main-tls",
        "-n",
        NS,
        "etcd.operator.rs/rotate-ca=e2e-1",
    ]);
    // Trusting: a new CA next to the old one.
    let trusting = wait_ca_secret(&env, "the new CA trusted", |s| has_key(s, "next.crt")).await;
    assert_eq!(
        text(&trusting, "tls.crt"),
        old_ca_pem,
        "the old CA still issues"
    );
    let new_ca_pem = text(&trusting, "next.crt");
    let bundle = text(&trusting, "ca.crt");
    assert!(bundle.contains(old_ca_pem.trim()) && bundle.contains(new_ca_pem.trim()));
    // Issuing: every member rolled onto the bundle; the new CA issues.
    let issuing = wait_ca_secret(&env, "the new CA issuing", |s| has_key(s, "previous.crt")).await;
    assert_eq!(text(&issuing, "tls.crt"), new_ca_pem);
    // Clients move to a certificate of the new CA while every member trusts both.
    let second = Workload::start_tls_on(
        https_url.clone(),
        Some(client_tls_from(
            &new_ca_pem,
            &text(&issuing, "tls.key"),
            &bundle,
            &server_name,
        )),
        "history-new-ca/k",
    );
    let first_report = first.stop().await;
    // Done: only the new CA is trusted, everywhere.
    let done = wait_ca_secret(&env, "the old CA dropped", |s| {
        !has_key(s, "previous.crt") && !has_key(s, "next.crt") && has_key(s, "ca.crt")
    })
    .await;
    assert_eq!(text(&done, "ca.crt"), new_ca_pem);
    // Every member, asked directly, refuses a client certificate of the old CA (it trusts the
    // new CA alone: its Pod was rolled onto the last step) and accepts one of the new CA.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(3))
        .with_timeout(Duration::from_secs(3));
    let put_through = |ip: String, member: &str, issuer: (String, String)| {
        let tls = client_tls_from(
            &issuer.0,
            &issuer.1,
            &bundle,
            &format!("{member}.main-tls.{NS}.svc"),
        );
        let options = options.clone().with_tls(tls);
        async move {
            let mut c =
                etcd_client::Client::connect([format!("https://{ip}:2379")], Some(options)).await?;
            c.put("ca-probe", "x", None).await
        }
    };
    let old_issuer = (old_ca_pem.clone(), text(&old_ca, "tls.key"));
    let new_issuer = (new_ca_pem.clone(), text(&issuing, "tls.key"));
    let settled_by = tokio::time::Instant::now() + STEP;
    loop {
        let mut pending = vec![];
        for member in ["main-tls-0", "main-tls-1", "main-tls-2"] {
            let ip = pods
                .get_opt(member)
                .await
                .unwrap()
                .and_then(|p| p.status?.pod_ip);
            let Some(ip) = ip else {
                pending.push(format!("{member}: no Pod IP"));
                continue;
            };
            let old = put_through(ip.clone(), member, old_issuer.clone()).await;
            let new = put_through(ip, member, new_issuer.clone()).await;
            if old.is_ok() || new.is_err() {
                pending.push(format!(
                    "{member}: old CA client {}, new CA client {}",
                    if old.is_ok() { "accepted" } else { "refused" },
                    if new.is_ok() { "accepted" } else { "refused" }
                ));
            }
        }
        if pending.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < settled_by,
            "members not on the new CA alone after {STEP:?}: {pending:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    env.wait_available("main-tls", 3, V36, STEP).await;
    let checked = second.check().await;
    assert!(
        checked >= 20,
        "only {checked} writes by the new CA's clients"
    );
    let second_report = second.stop().await;
    let fewest_ready = watch.stop();
    assert!(
        fewest_ready >= 2,
        "only {fewest_ready} member Pods were Ready at one point: quorum was at risk"
    );
    let events = env.events_for("main-tls").await.join("\n");
    assert!(events.contains("CARotation"), "{events}");
    eprintln!(
        "formed in {formed:?}, rotated in {:?}; fewest Ready {fewest_ready}; old CA clients: \
         {first_report}; new CA clients: {second_report}",
        started.elapsed() - formed
    );
}
