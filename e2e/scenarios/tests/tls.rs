//! TLS clusters end to end: members speaking https to each other and to clients with
//! operator-managed certificates, the operator observing and growing them through its own client
//! certificate, concurrent clients over TLS (their history linearizable, no acknowledged write
//! lost), plaintext and certificate-less clients refused by the members; and a cluster naming a
//! Secret that does not exist refused before any member starts. Then backup and restore over
//! TLS: EtcdBackups by cluster name and of `endpoints` with `tlsSecretRef` to S3, quorum loss,
//! an EtcdRestore, the restored cluster serving the backed-up keys over TLS to clients whose
//! history stays linearizable. Alongside, a cluster whose certificates cert-manager issues
//! (examples/cluster-cert-manager.yaml, cert-manager's real Certificate CRD, a stand-in for its
//! controller that fills the Secrets): it waits for them, saying so, before any member starts,
//! then forms over TLS. Last, that cluster's NetworkPolicy is created, updated and deleted as
//! its `spec.networkPolicy` says.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use etcd_api::{BackupArtifact, BackupPhase, EtcdRestore, RestorePhase};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};

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
    // The S3 store of the backup below starts while the cluster forms.
    start_s3(&env);
    // So does the cluster whose certificates cert-manager issues.
    let stand_in = start_cert_manager_cluster(&env).await;
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
    let clients = Workload::start_tls(https_url.clone(), Some(tls.clone()));
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

    backup_and_restore_over_tls(&env, &https_url, tls).await;
    check_cert_manager_cluster(&env).await;
    stand_in.abort();
    network_policy_follows_the_spec(&env, CM).await;
}

/// The NetworkPolicy of a TLS cluster (the chart's default `clusterOperator.networkPolicy:
/// tls`): created and owned by the cluster, updated with `spec.networkPolicy.clients`, deleted
/// with `enabled: false`. Its content is the unit tests' (network_policy.rs); the node agent
/// does not enforce NetworkPolicy (e2e/README.md), so traffic is not checked here.
async fn network_policy_follows_the_spec(env: &Env, cluster: &str) {
    let policies: Api<NetworkPolicy> = Api::namespaced(env.client.clone(), NS);
    let uid = env.clusters().get(cluster).await.unwrap().metadata.uid;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let rules =
        |p: &NetworkPolicy| serde_json::to_value(&p.spec.as_ref().unwrap().ingress).unwrap();
    let policy = loop {
        if let Some(p) = policies.get_opt(cluster).await.unwrap() {
            break p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no NetworkPolicy {cluster}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let owners = policy.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "EtcdCluster" && Some(&o.uid) == uid.as_ref()),
        "{owners:?}"
    );
    let ingress = rules(&policy);
    let ports: Vec<&serde_json::Value> = ingress
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["ports"][0]["port"])
        .collect();
    assert_eq!(ports, [2380, 2379, 2381], "{ingress}");
    let client_from = ingress[1]["from"].to_string();
    assert!(
        client_from.contains(&format!("\"etcd.operator.rs/client-of\":\"{cluster}\""))
            && client_from.contains(&format!(
                "\"kubernetes.io/metadata.name\":\"{OPERATOR_NAMESPACE}\""
            )),
        "{client_from}"
    );

    // Another namespace's clients admitted: the policy follows.
    env.kubectl(&[
        "patch",
        "etcdcluster",
        cluster,
        "-n",
        NS,
        "--type=merge",
        "-p",
        r#"{"spec":{"networkPolicy":{"clients":[{"namespaceSelector":{"matchLabels":{"team":"apps"}}}]}}}"#,
    ]);
    loop {
        let policy = policies.get(cluster).await.unwrap();
        let from = rules(&policy)[1]["from"].as_array().unwrap().clone();
        if from.len() == 4 && from[3].to_string().contains("\"team\":\"apps\"") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "NetworkPolicy {cluster} not updated: {from:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Turned off: deleted.
    env.kubectl(&[
        "patch",
        "etcdcluster",
        cluster,
        "-n",
        NS,
        "--type=merge",
        "-p",
        r#"{"spec":{"networkPolicy":{"enabled":false}}}"#,
    ]);
    while policies.get_opt(cluster).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "NetworkPolicy {cluster} still there with enabled: false"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The cluster of examples/cluster-cert-manager.yaml.
const CM: &str = "main-cm";

/// cert-manager's Certificate CRD (from its Go module, fixtures/README.md), then the cluster of
/// examples/cluster-cert-manager.yaml: the operator creates the first member's Certificates and
/// waits, saying so and naming the Certificate, with no member Pod, until the Secrets are
/// filled. Then the stand-in for cert-manager's controller starts filling them.
async fn start_cert_manager_cluster(env: &Env) -> tokio::task::JoinHandle<()> {
    let crd = workspace()
        .join("e2e/scenarios/tests/fixtures/cert-manager/cert-manager.io_certificates.yaml");
    env.kubectl(&["apply", "-f", crd.to_str().unwrap()]);
    env.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/certificates.cert-manager.io",
    ]);
    let example =
        std::fs::read_to_string(workspace().join("examples/cluster-cert-manager.yaml")).unwrap();
    env.apply(&example).unwrap();
    let waiting = env
        .wait_status(CM, "waiting for cert-manager", STEP, |c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.reason == "WaitingForCertManager"
                        && c.message
                            .contains(&format!("Certificate {NS}/{CM}-0-peer-tls"))
                })
            })
        })
        .await;
    let pods = env.kubectl(&["get", "pods", "-n", NS, "-o", "name"]);
    assert!(
        !pods.contains(&format!("pod/{CM}-")),
        "a member Pod before its certificates: {pods}\n{:?}",
        waiting.status
    );
    let events = env.events_for(CM).await.join("\n");
    assert!(
        events.contains("WaitingForCertManager") && events.contains(&format!("{CM}-0-peer-tls")),
        "{events}"
    );
    cert_manager_stand_in(env.client.clone())
}

/// The cert-manager cluster at the end: 3 members over TLS, each mounting the Secrets of its
/// own Certificates, every Certificate owned by the EtcdCluster, and a client presenting the
/// operators' cert-manager client certificate writes through the client Service.
async fn check_cert_manager_cluster(env: &Env) {
    env.wait_available(CM, 3, V36, STEP).await;
    let cluster = env.clusters().get(CM).await.unwrap();
    let certificates: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), NS, &certificate_resource());
    let mut names: Vec<String> = certificates
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| {
            c.metadata.owner_references.as_ref().is_some_and(|o| {
                o.iter().any(|o| {
                    o.kind == "EtcdCluster" && o.uid == cluster.metadata.uid.clone().unwrap()
                })
            })
        })
        .map(|c| c.metadata.name.unwrap())
        .collect();
    names.sort();
    let mut expected: Vec<String> = (0..3)
        .flat_map(|i| [format!("{CM}-{i}-client-tls"), format!("{CM}-{i}-peer-tls")])
        .collect();
    expected.push(format!("{CM}-operator-client-tls"));
    expected.sort();
    assert_eq!(names, expected, "the Certificates owned by {CM}");
    let volumes = env.kubectl(&[
        "get",
        "pod",
        &format!("{CM}-1"),
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.volumes[*].secret.secretName}",
    ]);
    assert_eq!(volumes, format!("{CM}-1-peer-tls {CM}-1-client-tls"));

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let client_secret = secrets
        .get(&format!("{CM}-operator-client-tls"))
        .await
        .unwrap();
    let tls = etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(text(
            &client_secret,
            "ca.crt",
        )))
        .identity(etcd_client::Identity::from_pem(
            text(&client_secret, "tls.crt"),
            text(&client_secret, "tls.key"),
        ))
        .domain_name(format!("{CM}-client.{NS}.svc"));
    let url = env.client_url(CM).await.replacen("http://", "https://", 1);
    let keys = (0..5).map(|i| (format!("cm/{i}"), format!("value-{i}")));
    let written = write_keys_at(env, &url, Some(tls), keys).await;
    assert_eq!(written.keys.len(), 5);
}

fn certificate_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "cert-manager.io",
        "v1",
        "Certificate",
    ))
}

/// A stand-in for cert-manager's controller (issue 19 allows one): every Certificate in the
/// namespace whose Secret is missing gets it, issued by a CA of the stand-in's own from the
/// Certificate's `commonName`, `dnsNames`, `ipAddresses` and `usages`, with `tls.crt`,
/// `tls.key`, `ca.crt` and the `secretTemplate` labels, as cert-manager's CA issuer writes it.
fn cert_manager_stand_in(client: kube::Client) -> tokio::task::JoinHandle<()> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, SanType,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "stand-in cert-manager CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca_params, ca_key);
    tokio::spawn(async move {
        let certificates: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), NS, &certificate_resource());
        let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
        loop {
            for certificate in certificates
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                let spec = &certificate.data["spec"];
                let strings = |key: &str| -> Vec<String> {
                    spec[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                };
                let secret_name = spec["secretName"].as_str().unwrap().to_owned();
                if secrets.get_opt(&secret_name).await.ok().flatten().is_some() {
                    continue;
                }
                let mut params = CertificateParams::new(strings("dnsNames")).unwrap();
                if let Some(cn) = spec["commonName"].as_str() {
                    params.distinguished_name.push(DnType::CommonName, cn);
                }
                for ip in strings("ipAddresses") {
                    params
                        .subject_alt_names
                        .push(SanType::IpAddress(ip.parse().unwrap()));
                }
                let usages = strings("usages");
                params.key_usages = vec![
                    KeyUsagePurpose::DigitalSignature,
                    KeyUsagePurpose::KeyEncipherment,
                ];
                params.extended_key_usages = usages
                    .iter()
                    .filter_map(|u| match u.as_str() {
                        "server auth" => Some(ExtendedKeyUsagePurpose::ServerAuth),
                        "client auth" => Some(ExtendedKeyUsagePurpose::ClientAuth),
                        _ => None,
                    })
                    .collect();
                let key = KeyPair::generate().unwrap();
                let cert = params.signed_by(&key, &issuer).unwrap();
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(spec["secretTemplate"]["labels"].clone())
                        .unwrap_or_default();
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(secret_name),
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    },
                    type_: Some("kubernetes.io/tls".into()),
                    string_data: Some(BTreeMap::from([
                        ("tls.crt".to_owned(), cert.pem()),
                        ("tls.key".to_owned(), key.serialize_pem()),
                        ("ca.crt".to_owned(), ca_pem.clone()),
                    ])),
                    ..Secret::default()
                };
                let _ = secrets.create(&PostParams::default(), &secret).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// Backup and restore of the TLS cluster: an EtcdBackup by cluster name (the backup operator
/// presents the cluster's operator client certificate) and one of `endpoints` with
/// `tlsSecretRef` (as for an etcd the operator does not manage) both reach the members over
/// TLS; after quorum loss an EtcdRestore rebuilds the cluster from the first (the seed's
/// certificate issued by the cluster's CA), it serves exactly the backed-up keys over TLS, and
/// clients running through the restore and the growth back to 3 keep a linearizable history
/// with no acknowledged write lost.
async fn backup_and_restore_over_tls(env: &Env, https_url: &str, tls: etcd_client::TlsOptions) {
    let clock = tokio::time::Instant::now();
    let _s3 = s3_from_host(env).await;
    let keys = (0..20).map(|i| (format!("tls/before-{i:03}"), format!("value-{i}")));
    let written = write_keys_at(env, https_url, Some(tls.clone()), keys).await;

    env.apply(&on_demand_backup(
        "main-tls-backup",
        "main-tls",
        "tls/",
        S3_SECRET,
    ))
    .unwrap();
    let artifact = succeeded_backup(env, "main-tls-backup").await;
    assert!(
        artifact.revision >= written.revision,
        "the backup's revision {} is below the last acknowledged write's {}",
        artifact.revision,
        written.revision
    );
    let endpoints: Vec<String> = ["main-tls-0", "main-tls-1", "main-tls-2"]
        .iter()
        .map(|m| format!("\"https://{m}.main-tls.{NS}.svc:2379\""))
        .collect();
    env.apply(&format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdBackup\nmetadata: {{name: main-tls-external}}\n\
         spec:\n  endpoints: [{}]\n  tlsSecretRef: {{name: main-tls-operator-client-tls}}\n  \
         s3:\n    bucket: {BUCKET}\n    prefix: tls-external/\n    endpoint: {S3_ENDPOINT}\n    \
         region: us-east-1\n    forcePathStyle: true\n    credentialsSecretRef: {{name: {S3_SECRET}}}\n  \
         timeoutSeconds: 120\n",
        endpoints.join(", ")
    ))
    .unwrap();
    let external = succeeded_backup(env, "main-tls-external").await;
    assert!(
        external.revision >= written.revision && external.cluster_id == artifact.cluster_id,
        "{external:?} vs {artifact:?}"
    );
    eprintln!(
        "[{:?}] backups over TLS at revisions {} (clusterName) and {} (endpoints + tlsSecretRef)",
        clock.elapsed(),
        artifact.revision,
        external.revision
    );

    // Quorum loss: two members go with their data, in one request (see restore.rs).
    env.kubectl(&[
        "delete",
        "-n",
        NS,
        "pvc/main-tls-1",
        "pvc/main-tls-2",
        "pod/main-tls-1",
        "pod/main-tls-2",
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    env.wait_status(
        "main-tls",
        "quorum loss reported",
        STEP,
        quorum_loss_reported,
    )
    .await;
    wait_pvcs_gone(env, &["main-tls-1", "main-tls-2"]).await;
    eprintln!("[{:?}] quorum loss reported", clock.elapsed());

    env.apply(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdRestore\nmetadata: {name: main-tls-restore}\n\
         spec:\n  clusterName: main-tls\n  source:\n    backupRef: {name: main-tls-backup}\n",
    )
    .unwrap();
    // Once the seed serves the backup's keys (a linearizable read: the old member without
    // quorum cannot answer it), clients on keys the backup does not hold run through the growth
    // back to 3: every write they get acknowledged must survive it. (Started earlier, their
    // requests to the old member time out by the dozen, and the linearizability search over so
    // many unknown outcomes runs out of time.)
    let seeded = read_keys_tls(env, https_url, &tls, "tls/before-").await;
    assert_eq!(seeded, written.keys, "the seed's keys");
    let clients = Workload::start_prefixed(https_url.to_owned(), Some(tls.clone()), "restored/k");
    wait_restore_succeeded(env, "main-tls-restore").await;
    env.wait_available("main-tls", 3, V36, STEP).await;
    eprintln!(
        "[{:?}] restored and Available with 3 members",
        clock.elapsed()
    );

    let cluster = env.clusters().get("main-tls").await.unwrap();
    let members = cluster.status.unwrap().members;
    assert!(
        members.iter().all(|m| m
            .client_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"))
            && m.peer_url
                .as_deref()
                .is_some_and(|u| u.starts_with("https://"))),
        "{members:?}"
    );
    let read = read_keys_tls(env, https_url, &tls, "tls/before-").await;
    assert_eq!(read, written.keys, "the restored cluster's keys");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while clients.acknowledged() < 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the TLS clients got no 20 writes acknowledged by the restored cluster in 60 s\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    clients.stop().await;
    eprintln!("[{:?}] backup and restore over TLS done", clock.elapsed());
}

/// Waits until the EtcdRestore finished, failing unless it Succeeded.
async fn wait_restore_succeeded(env: &Env, name: &str) {
    const RESTORE_TIMEOUT: Duration = Duration::from_secs(300);
    let restores: Api<EtcdRestore> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + RESTORE_TIMEOUT;
    loop {
        let status = restores.get(name).await.ok().and_then(|r| r.status);
        match status.as_ref().and_then(|s| s.phase) {
            Some(RestorePhase::Succeeded) => return,
            Some(RestorePhase::Failed) => {
                fail(env, &format!("EtcdRestore {name} failed: {status:?}"))
            }
            _ => {}
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!("EtcdRestore {name} not Succeeded within {RESTORE_TIMEOUT:?}: {status:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every key under `prefix`, read linearizably over TLS; retries (up to 3 min: a restore's
/// seed starting) while the Service settles.
async fn read_keys_tls(
    env: &Env,
    url: &str,
    tls: &etcd_client::TlsOptions,
    prefix: &str,
) -> BTreeMap<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let read = async {
            let options = etcd_client::ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(2))
                .with_timeout(Duration::from_secs(5))
                .with_tls(tls.clone());
            let mut client = etcd_client::Client::connect([url], Some(options)).await?;
            client
                .get(prefix, Some(etcd_client::GetOptions::new().with_prefix()))
                .await
        };
        match read.await {
            Ok(response) => {
                return response
                    .kvs()
                    .iter()
                    .map(|kv| {
                        (
                            kv.key_str().unwrap().to_owned(),
                            kv.value_str().unwrap().to_owned(),
                        )
                    })
                    .collect();
            }
            Err(e) if tokio::time::Instant::now() > deadline => {
                fail(env, &format!("reading {prefix} over TLS from {url}: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Waits for the EtcdBackup and returns its artifact, failing unless it Succeeded.
async fn succeeded_backup(env: &Env, name: &str) -> BackupArtifact {
    let backup = wait_backup_finished(env, name).await;
    let status = backup.status.unwrap_or_default();
    match (status.phase, status.artifact.clone()) {
        (Some(BackupPhase::Succeeded), Some(artifact)) => artifact,
        _ => fail(
            env,
            &format!("EtcdBackup {name} did not succeed: {status:?}"),
        ),
    }
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
    let first = Workload::start_prefixed(
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
    let second = Workload::start_prefixed(
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
