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
//! then forms over TLS; when cert-manager renews a member's certificate, the members whose
//! Secrets changed roll onto it, one at a time; a renewal of every member's peer certificate
//! from a replaced CA (no overlap in the Secrets) is carried through the operator's mounted
//! copies with an overlap, quorum kept, until every member runs on the new CA alone, and a
//! certificate near its end is warned about (condition, event, gauge). Last, that cluster's NetworkPolicy is created,
//! updated and deleted as its `spec.networkPolicy` says. A second scenario renews due
//! operator-managed certificates (one member's, then all three) and rotates the CA. A third
//! switches a running plaintext cluster to TLS (`spec.tls` set) while clients write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::certs::{
    Renewals, cert_manager_stand_in, certificate_resource, install_certificate_crd, not_after,
    plant_near_expiry, secret_text as text,
};
use common::*;
use etcd_api::{BackupArtifact, BackupPhase, EtcdRestore, RestorePhase};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{DynamicObject, ListParams};

const V36: &str = "3.6.16";
const STEP: Duration = Duration::from_secs(240);

#[tokio::test]
async fn tls_cluster_with_operator_managed_certificates_refuses_plaintext() {
    let env = Env::start().await;
    let example = std::fs::read_to_string(workspace().join("examples/cluster-tls.yaml")).unwrap();
    env.apply(&example).unwrap();
    // The S3 store of the backup below starts while the cluster forms.
    start_s3(&env);
    // So does the cluster whose certificates cert-manager issues.
    let (stand_in, renewals) = start_cert_manager_cluster(&env).await;
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
    assert!(plain.contains("spec.tls cannot be removed"), "{plain}");

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
    // The event follows the status (see wait_events).
    env.wait_events("nosecret", "naming missing-serving", STEP, |events| {
        events.iter().any(|e| e.contains("missing-serving"))
    })
    .await;

    backup_and_restore_over_tls(&env, &https_url, tls).await;
    check_cert_manager_cluster(&env).await;
    cert_manager_renewals_roll_the_members(&env, &renewals).await;
    cert_manager_ca_change_completes_through_the_overlap(&env, &renewals).await;
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
    // Created with TLS: no member serves 2378, so clients are admitted on 2379 alone.
    assert_eq!(
        ingress[1]["ports"],
        serde_json::json!([{"port": 2379, "protocol": "TCP"}]),
        "{ingress}"
    );
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
async fn start_cert_manager_cluster(env: &Env) -> (tokio::task::JoinHandle<()>, Renewals) {
    install_certificate_crd(env);
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
    // The event follows the status (see wait_events).
    let peer_certificate = format!("{CM}-0-peer-tls");
    env.wait_events(
        CM,
        "WaitingForCertManager naming the first peer Certificate",
        STEP,
        |events| {
            let events = events.join("\n");
            events.contains("WaitingForCertManager") && events.contains(&peer_certificate)
        },
    )
    .await;
    let renewals = Renewals::default();
    (
        cert_manager_stand_in(env.client.clone(), renewals.clone()),
        renewals,
    )
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
    // The peer certificate through the operator's copy of it (owned by the cluster), the
    // client-port one as cert-manager fills it.
    assert_eq!(volumes, format!("{CM}-1-peer-mounted {CM}-1-client-tls"));
    let copy = Api::<Secret>::namespaced(env.client.clone(), NS)
        .get(&format!("{CM}-1-peer-mounted"))
        .await
        .unwrap();
    assert!(
        copy.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "EtcdCluster" && Some(&o.uid) == cluster.metadata.uid.as_ref()),
        "{:?}",
        copy.metadata.owner_references
    );

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

/// The DER of the first PEM block of `pem`.
fn der_of(pem: &str) -> Vec<u8> {
    x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .unwrap()
        .1
        .contents
}

/// The certificate annotation of a member Pod (`etcd.operator.rs/tls-hash`).
fn tls_hash(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()?
        .get("etcd.operator.rs/tls-hash")
        .cloned()
}

/// Watches the member Pods from outside the operator, every 250 ms: the fewest Ready at once
/// (a roll takes one member down at a time, so a 3-member cluster keeps at least 2: quorum),
/// and every Pod (UID) each member had, to count its rolls.
struct ReadyWatch {
    fewest: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pods: std::sync::Arc<std::sync::Mutex<BTreeMap<String, std::collections::BTreeSet<String>>>>,
    /// Lists completed so far.
    lists: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadyWatch {
    fn start(env: &Env, cluster: &str) -> ReadyWatch {
        let fewest = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
        let pods_seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
        let selector = format!("etcd.operator.rs/cluster={cluster}");
        let lists = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (seen, uids, listed) = (fewest.clone(), pods_seen.clone(), lists.clone());
        let task = tokio::spawn(async move {
            loop {
                if let Ok(list) = pods
                    .list(&kube::api::ListParams::default().labels(&selector))
                    .await
                {
                    let ready = list.items.iter().filter(|p| pod_is_ready(p)).count();
                    seen.fetch_min(ready, std::sync::atomic::Ordering::SeqCst);
                    let mut uids = uids.lock().unwrap();
                    for pod in &list.items {
                        if let (Some(name), Some(uid)) = (&pod.metadata.name, &pod.metadata.uid) {
                            uids.entry(name.clone())
                                .or_insert_with(std::collections::BTreeSet::new)
                                .insert(uid.clone());
                        }
                    }
                    listed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        ReadyWatch {
            fewest,
            pods: pods_seen,
            lists,
            task,
        }
    }

    /// The Pods (UIDs) seen per member since the last call; starts the next count. Waits for
    /// a list begun after the call first: the lists run on their own every 250 ms (slower
    /// under load), and the caller has just seen, by a read of its own, the Pods it will count.
    async fn take_pods(&self) -> BTreeMap<String, std::collections::BTreeSet<String>> {
        use std::sync::atomic::Ordering;
        let from = self.lists.load(Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        // The list running now may have begun before the call: the one after it did not.
        while self.lists.load(Ordering::SeqCst) < from + 2 && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        std::mem::take(&mut *self.pods.lock().unwrap())
    }

    fn stop(self) -> usize {
        self.task.abort();
        self.fewest.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Each member Pod's UID and certificate annotation.
async fn member_pods(env: &Env, members: &[String]) -> BTreeMap<String, (String, Option<String>)> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let mut found = BTreeMap::new();
    for member in members {
        let pod = pods.get(member).await.unwrap();
        found.insert(
            member.clone(),
            (pod.metadata.uid.clone().unwrap(), tls_hash(&pod)),
        );
    }
    found
}

/// Whether `member`'s Pod is another than `before` (UID), Ready, and records another
/// certificate annotation than `before` did.
async fn rolled_since(env: &Env, member: &str, before: &(String, Option<String>)) -> bool {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    pods.get_opt(member).await.unwrap().is_some_and(|p| {
        p.metadata.uid.as_ref() != Some(&before.0)
            && pod_is_ready(&p)
            && tls_hash(&p).is_some()
            && tls_hash(&p) != before.1
    })
}

/// Checks the Pods `watch` saw since `before` was taken: the members of `rolled` had exactly
/// one new Pod each (rolled once), the others none.
async fn assert_rolled_once(
    watch: &ReadyWatch,
    before: &BTreeMap<String, (String, Option<String>)>,
    rolled: &[String],
) {
    let seen = watch.take_pods().await;
    for (member, (uid, _)) in before {
        let mut uids = seen.get(member).cloned().unwrap_or_default();
        uids.insert(uid.clone());
        let expected = if rolled.contains(member) { 2 } else { 1 };
        assert_eq!(
            uids.len(),
            expected,
            "{member} had the Pods {uids:?} while {rolled:?} were to roll once each"
        );
    }
}

/// The certificate `member` of main-tls serves on its client port at `ip`, from a fresh TLS
/// handshake (DER), as a client with a certificate of the cluster's CA sees it.
async fn served_certificate(ip: String, member: &str, ca: &Secret) -> Vec<u8> {
    let (ca_pem, ca_key) = (text(ca, "tls.crt"), text(ca, "tls.key"));
    let host = format!("{member}.main-tls.{NS}.svc");
    tokio::task::spawn_blocking(move || {
        let issuer =
            rcgen::Issuer::from_ca_cert_pem(&ca_pem, rcgen::KeyPair::from_pem(&ca_key).unwrap())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "e2e-handshake");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &issuer).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der_of(&ca_pem).into()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
        let mut tls = rustls::ClientConnection::new(
            std::sync::Arc::new(config),
            rustls::pki_types::ServerName::try_from(host).unwrap(),
        )
        .unwrap();
        let address: std::net::SocketAddr = format!("{ip}:2379").parse().unwrap();
        let mut socket =
            std::net::TcpStream::connect_timeout(&address, Duration::from_secs(5)).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        while tls.is_handshaking() {
            tls.complete_io(&mut socket).unwrap();
        }
        tls.peer_certificates().unwrap()[0].to_vec()
    })
    .await
    .unwrap()
}

const TLS_MEMBERS: [&str; 3] = ["main-tls-0", "main-tls-1", "main-tls-2"];

/// Issue 19, renewal, with the lifetimes the operator really uses (so its margin does not
/// depend on how fast a loaded machine rolls): the certificates of `due` are replaced in their
/// Secrets by ones signed by the cluster's CA but near their end ([`plant_near_expiry`]). The
/// operator must re-issue each with its full lifetime and roll exactly those members, each
/// once, one at a time (the caller's `watch` checks the fewest Ready at the end); each then
/// serves its new certificate on a fresh handshake. The other members are not restarted.
async fn due_certificates_are_renewed(env: &Env, watch: &ReadyWatch, due: &[&str]) {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ca = secrets.get("main-tls-ca").await.unwrap();
    let members: Vec<String> = TLS_MEMBERS.iter().map(|m| (*m).to_owned()).collect();
    let before = member_pods(env, &members).await;
    watch.take_pods().await;
    let mut planted = BTreeMap::new();
    for member in due {
        let name = format!("{member}-tls");
        let cert = plant_near_expiry(&secrets, &name, &ca).await;
        planted.insert((*member).to_owned(), cert);
    }
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut pending = Vec::new();
        for member in due {
            let cert = text(
                &secrets.get(&format!("{member}-tls")).await.unwrap(),
                "tls.crt",
            );
            if cert == planted[*member] {
                pending.push(format!("{member}: certificate not re-issued"));
                continue;
            }
            let left = not_after(&cert) - time::OffsetDateTime::now_utc().unix_timestamp();
            assert!(
                left > 2 * 365 * 86_400,
                "{member}'s re-issued certificate ends in {left} s: not a full lifetime"
            );
            if !rolled_since(env, member, &before[*member]).await {
                pending.push(format!("{member}: Pod not rolled onto it"));
            }
        }
        if pending.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "due certificates not renewed and rolled after {STEP:?}: {pending:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    env.wait_available("main-tls", 3, V36, STEP).await;
    let due_names: Vec<String> = due.iter().map(|m| (*m).to_owned()).collect();
    assert_rolled_once(watch, &before, &due_names).await;
    for member in due {
        let cert = text(
            &secrets.get(&format!("{member}-tls")).await.unwrap(),
            "tls.crt",
        );
        let ip = pods
            .get(member)
            .await
            .unwrap()
            .status
            .unwrap()
            .pod_ip
            .unwrap();
        assert!(
            served_certificate(ip, member, &ca).await == der_of(&cert),
            "{member} does not serve its renewed certificate"
        );
    }
}

/// Issue 19, cert-manager as the source: when cert-manager renews the certificate in a
/// member's Secret, the member rolls onto it (its Pod records the digest of the Secrets it
/// mounts, as with operator-managed certificates), only the members whose Secrets changed,
/// each once, one at a time. Renewed here: member 1's peer certificate and member 2's
/// client-port certificate.
async fn cert_manager_renewals_roll_the_members(env: &Env, renewals: &Renewals) {
    let clock = tokio::time::Instant::now();
    let members: Vec<String> = (0..3).map(|i| format!("{CM}-{i}")).collect();
    let before = member_pods(env, &members).await;
    for (member, (_, hash)) in &before {
        assert!(
            hash.is_some(),
            "Pod {member} records no certificate digest (etcd.operator.rs/tls-hash): a \
             renewal by cert-manager would never roll it"
        );
    }
    let watch = ReadyWatch::start(env, CM);
    renewals
        .lock()
        .unwrap()
        .renew
        .extend([format!("{CM}-1-peer-tls"), format!("{CM}-2-client-tls")]);
    let rolled = [format!("{CM}-1"), format!("{CM}-2")];
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut pending = Vec::new();
        for member in &rolled {
            if !rolled_since(env, member, &before[member]).await {
                pending.push(member.clone());
            }
        }
        if pending.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not rolled onto cert-manager's renewed certificates after {STEP:?}: {pending:?} \
             (renewals not yet written: {:?})\n{}",
            renewals.lock().unwrap().renew,
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    env.wait_available(CM, 3, V36, STEP).await;
    assert_rolled_once(&watch, &before, &rolled).await;
    let fewest_ready = watch.stop();
    assert!(
        fewest_ready >= 2,
        "only {fewest_ready} member Pods were Ready at one point: quorum was at risk"
    );
    eprintln!("cert-manager renewals rolled in {:?}", clock.elapsed());
}

/// Issue 19, a CA change under cert-manager: the issuer's CA is replaced (A by B) and
/// cert-manager renews every member's peer certificate from B in one step (`ca.crt` B alone,
/// as a CA issuer writes it). A member mounting such a Secret directly would present a
/// certificate its peers do not trust (at its next start, or once the kubelet refreshes the
/// volume) and be cut off. The members mount the operator's copies instead
/// (`<member>-peer-mounted`), and the operator carries the change through them with an
/// overlap: the copies trust A and B, then take the certificates of B, then drop A, members
/// rolling one at a time after each step. Checked while clients write: never fewer than 2 of
/// the 3 member Pods Ready, no refusal on the way, at most three rolls per member, a
/// `PeerCAOverlap` event, and at the end every member's Pod started on a certificate of B
/// trusting B alone (its `etcd.operator.rs/peer-trust` record) with every copy holding its
/// source's certificate and `ca.crt` (A dropped); the clients' history linearizable with no
/// acknowledged write lost. Then cert-manager renews member 1's certificate from B, near its
/// end: a renewal by the same CA, which member 1 rolls onto once (the others not at all),
/// and the near-expiry warning is raised (condition `CertificatesNearExpiry`, event
/// `CertificateNearExpiry`, gauge `etcd_operator_cluster_certificate_near_expiry` at 1 for
/// that Secret).
async fn cert_manager_ca_change_completes_through_the_overlap(env: &Env, renewals: &Renewals) {
    let clock = tokio::time::Instant::now();
    let members: Vec<String> = (0..3).map(|i| format!("{CM}-{i}")).collect();
    let sources: Vec<String> = members.iter().map(|m| format!("{m}-peer-tls")).collect();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
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
    let clients = Workload::start_tls(url, Some(tls));
    wait_acknowledged(&clients, 10).await;
    let before = member_pods(env, &members).await;
    // The CA every member runs on now (A), from its Pod's record.
    let old_ca = peer_record(&pods.get(&members[0]).await.unwrap())
        .expect("a member Pod without its peer-trust record")
        .0;
    let watch = ReadyWatch::start(env, CM);

    {
        let mut orders = renewals.lock().unwrap();
        orders.second_ca = true;
        orders.renew.extend(sources.iter().cloned());
    }
    // Done when every member's Pod runs on a certificate of another CA trusting it alone, and
    // every copy is its source (certificate and ca.crt: A is dropped). Generous: three rolls of
    // each member on a loaded machine.
    let deadline = tokio::time::Instant::now() + 4 * STEP;
    loop {
        let cluster = env.clusters().get(CM).await.unwrap();
        let refusal = cluster.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Degraded" && c.status == "True" && c.reason == "InvalidSpec")
                .map(|c| c.message.clone())
        });
        // (Degraded for a member restarting in a roll is expected; a refusal is not.)
        assert!(
            refusal.is_none(),
            "refused during the CA change (the overlap should pass the trust check): {refusal:?}"
        );
        let mut pending = Vec::new();
        for (member, source) in members.iter().zip(&sources) {
            let pod = pods.get_opt(member).await.unwrap();
            let on_new = pod.as_ref().is_some_and(|p| {
                pod_is_ready(p)
                    && peer_record(p).is_some_and(|(issuer, trusts)| {
                        issuer != old_ca && trusts == [issuer.clone()]
                    })
            });
            let copy = secrets
                .get_opt(&format!("{member}-peer-mounted"))
                .await
                .unwrap();
            let source = secrets.get_opt(source).await.unwrap();
            let copied = match (&copy, &source) {
                (Some(copy), Some(source)) => ["tls.crt", "ca.crt"]
                    .iter()
                    .all(|key| text(copy, key).trim() == text(source, key).trim()),
                _ => false,
            };
            if !(on_new && copied) {
                pending.push(format!(
                    "{member} (Pod record {:?}, copy is its source: {copied})",
                    pod.as_ref().and_then(peer_record)
                ));
            }
        }
        if pending.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CA change did not complete after {:?}: {pending:?} (renewals not yet \
             written: {:?})\n{}",
            4 * STEP,
            renewals.lock().unwrap().renew,
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    env.wait_available(CM, 3, V36, STEP).await;
    // The event follows the status (see wait_events).
    env.wait_events(CM, "PeerCAOverlap", STEP, |events| {
        events.iter().any(|e| e.starts_with("PeerCAOverlap:"))
    })
    .await;
    let seen = watch.take_pods().await;
    let mut rolls = Vec::new();
    for (member, (uid, _)) in &before {
        let mut uids = seen.get(member).cloned().unwrap_or_default();
        uids.insert(uid.clone());
        rolls.push(format!("{member} {}", uids.len() - 1));
        // Its Pod before, and one per step at most (trust both, present B, trust B alone).
        assert!(
            (2..=4).contains(&uids.len()),
            "{member} had the Pods {uids:?}: rolled {} times, expected 1 to 3",
            uids.len() - 1
        );
    }
    let acknowledged = clients.acknowledged();
    wait_acknowledged(&clients, acknowledged + 20).await;
    eprintln!(
        "cert-manager CA change carried through the overlap in {:?} (rolls: {})",
        clock.elapsed(),
        rolls.join(", ")
    );

    // A renewal by the new CA, near its end: taken at once, member 1 rolls once.
    let before = member_pods(env, &members).await;
    let secret = sources[1].clone();
    {
        let mut orders = renewals.lock().unwrap();
        orders.near_end = true;
        orders.renew.insert(secret.clone());
    }
    let member = members[1].clone();
    let deadline = tokio::time::Instant::now() + STEP;
    while !rolled_since(env, &member, &before[&member]).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{member} not rolled onto its renewed certificate after {STEP:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    env.wait_available(CM, 3, V36, STEP).await;
    env.wait_status(CM, "CertificatesNearExpiry", STEP, |c| {
        c.status.as_ref().is_some_and(|s| {
            let degraded = s
                .conditions
                .iter()
                .any(|c| c.type_ == "Degraded" && c.status == "True");
            !degraded
                && s.conditions.iter().any(|c| {
                    c.type_ == "CertificatesNearExpiry"
                        && c.status == "True"
                        && c.reason == "CertificateNearExpiry"
                        && c.message.contains(&format!("Secret {NS}/{secret} ends at"))
                })
        })
    })
    .await;
    // The event follows the status (see wait_events).
    env.wait_events(CM, "CertificateNearExpiry for the Secret", STEP, |events| {
        events
            .iter()
            .any(|e| e.starts_with("CertificateNearExpiry:") && e.contains(&secret))
    })
    .await;
    let series = format!(
        "etcd_operator_cluster_certificate_near_expiry{{namespace=\"{NS}\",name=\"{CM}\",secret=\"{secret}\"}} 1"
    );
    let metrics = cluster_operator_metrics(env).await;
    assert!(
        metrics.lines().any(|l| l == series),
        "{series} not in the cluster operator's metrics:\n{}",
        metrics
            .lines()
            .filter(|l| l.contains("certificate"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_rolled_once(&watch, &before, &[member]).await;
    let fewest_ready = watch.stop();
    assert!(
        fewest_ready >= 2,
        "only {fewest_ready} member Pods were Ready at one point: quorum was at risk"
    );
    renewals.lock().unwrap().near_end = false;
    clients.stop().await;
    eprintln!(
        "cert-manager CA change and a renewal by the new CA in {:?}",
        clock.elapsed()
    );
}

/// A member Pod's peer-trust record (`etcd.operator.rs/peer-trust`: `issuer=<fp>
/// trusts=<fp>,<fp>`): the CA of the certificate it started on and the CAs it trusts.
fn peer_record(pod: &Pod) -> Option<(String, Vec<String>)> {
    let value = pod
        .metadata
        .annotations
        .as_ref()?
        .get("etcd.operator.rs/peer-trust")?;
    let mut issuer = None;
    let mut trusts = Vec::new();
    for part in value.split_whitespace() {
        match part.split_once('=')? {
            ("issuer", fp) => issuer = Some(fp.to_owned()),
            ("trusts", fps) => trusts = fps.split(',').map(str::to_owned).collect(),
            _ => return None,
        }
    }
    Some((issuer?, trusts))
}

/// The cluster operator's `/metrics` (OpenMetrics text), from its Pod (the host reaches Pod
/// IPs), as Prometheus scrapes it.
async fn cluster_operator_metrics(env: &Env) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ip = env.kubectl(&[
        "get",
        "pods",
        "-n",
        OPERATOR_NAMESPACE,
        "-l",
        "app.kubernetes.io/component=cluster-operator",
        "-o",
        "jsonpath={.items[0].status.podIP}",
    ]);
    let mut stream = tokio::net::TcpStream::connect((ip.trim(), 8080))
        .await
        .unwrap_or_else(|e| panic!("the cluster operator's probe port at {ip}:8080: {e}"));
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: operator\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or(response)
}

/// Waits until `clients` had `writes` writes acknowledged (at most 60 s).
async fn wait_acknowledged(clients: &Workload, writes: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while clients.acknowledged() < writes {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {writes} writes acknowledged in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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

/// Issue 19: operator-managed certificates are renewed when due, then the operator-managed CA
/// is rotated, while clients write. Renewal ([`due_certificates_are_renewed`]): first one
/// member's certificate is due, then all three at once. Rotation, on request (annotation
/// `etcd.operator.rs/rotate-ca`) with an overlap period: the new CA is trusted next to the old
/// one, members are re-issued by it, then the old one is dropped; each step rolls the members
/// one at a time. Clients with client certificates must move to the new CA while every member
/// trusts both (as a real client would): the first clients (a certificate of the old CA) run
/// until the members are re-issued, the second (of the new CA, trusting both) from then to the
/// end. The renewal has clients of its own. Every history is linearizable, no acknowledged
/// write is lost, no more than one member Pod is ever not Ready.
#[tokio::test]
async fn operator_managed_certificates_are_renewed_and_the_ca_rotated_without_losing_quorum() {
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
    let watch = ReadyWatch::start(&env, "main-tls");
    // A history of its own for the renewal, so each checked history stays short.
    let renewal_clients = Workload::start_prefixed(
        https_url.clone(),
        Some(test_client_tls(&old_ca, &server_name)),
        "history-renewal/k",
    );
    wait_acknowledged(&renewal_clients, 20).await;

    // Renewal: one member's certificate due, then every member's at once.
    let renewal_started = tokio::time::Instant::now();
    due_certificates_are_renewed(&env, &watch, &["main-tls-1"]).await;
    let one_renewed = renewal_started.elapsed();
    due_certificates_are_renewed(&env, &watch, &TLS_MEMBERS).await;
    let renewed = renewal_started.elapsed();
    let events = env.events_for("main-tls").await.join("\n");
    assert!(events.contains("CertificateRenewed"), "{events}");
    let renewal_report = renewal_clients.stop().await;

    let rotation_started = tokio::time::Instant::now();
    let first = Workload::start_prefixed(
        https_url.clone(),
        Some(test_client_tls(&old_ca, &server_name)),
        "history-old-ca/k",
    );
    wait_acknowledged(&first, 20).await;

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
        for member in TLS_MEMBERS {
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
        "formed in {formed:?}; one due certificate renewed and rolled in {one_renewed:?}, all \
         three in {:?}; rotated in {:?}; fewest Ready {fewest_ready}; clients during the \
         renewal: {renewal_report}; old CA clients: {first_report}; new CA clients: \
         {second_report}",
        renewed - one_renewed,
        rotation_started.elapsed()
    );
}

/// Issue 19: `spec.tls` set on a running plaintext cluster of three (operator-managed CA) while
/// clients write through the client Service over plain HTTP, which the switch keeps serving
/// (no `etcd.operator.rs/drop-plaintext-clients` annotation). Each member rolls onto both
/// schemes, its peer URL moves to `https://…:2382`, then each rolls onto TLS-only peers, one
/// member at a time: at the end every member serves peers over TLS only and clients over both
/// (`https://` on 2378, which a client with the cluster's CA reaches through the Service); the
/// history is linearizable, no acknowledged write is lost, and at least 2 Pods are Ready
/// throughout. Then `etcd.operator.rs/drop-plaintext-clients` is set while TLS clients write
/// through the Service on 2378: every member rolls once more onto `https://` alone (2379, and
/// 2378 kept so those clients never move), plaintext clients are refused, TLS on 2379 serves
/// the same keys, and the TLS clients' history is linearizable with no acknowledged write lost.
#[tokio::test]
async fn a_running_plaintext_cluster_is_switched_to_tls_without_losing_quorum_or_a_write() {
    let env = Env::start().await;
    env.apply(&cluster_yaml("plain", 3, V36)).unwrap();
    env.wait_available("plain", 3, V36, STEP).await;
    let url = env.client_url("plain").await;
    let watch = ReadyWatch::start(&env, "plain");
    let clients = Workload::start_prefixed(url.clone(), None, "history-switch/k");
    wait_acknowledged(&clients, 20).await;

    let started = tokio::time::Instant::now();
    env.kubectl(&[
        "patch",
        "etcdcluster",
        "plain",
        "-n",
        NS,
        "--type=merge",
        "-p",
        r#"{"spec":{"tls":{"peer":{},"client":{}}}}"#,
    ]);
    let members: Vec<String> = (0..3).map(|i| format!("plain-{i}")).collect();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    wait_until_every_member(
        &env,
        &pods,
        &members,
        2 * STEP,
        "not switched to TLS",
        |pod| {
            let (peer, client) = listen_schemes(pod);
            peer == ["https"] && client == ["http", "https"]
        },
    )
    .await;
    let switched = started.elapsed();
    env.wait_available("plain", 3, V36, STEP).await;
    // Two rolls per member (onto both schemes, then onto TLS-only peers), no more.
    for (member, uids) in watch.take_pods().await {
        assert_eq!(uids.len(), 3, "{member}: Pods {uids:?}");
    }
    // etcd's member list, through the plaintext client port: every peer URL is https://…:2382.
    let mut plain = etcd_client::Client::connect([url.clone()], None)
        .await
        .unwrap();
    let listed = plain.member_list().await.unwrap();
    let peer_urls: Vec<String> = listed
        .members()
        .iter()
        .flat_map(|m| m.peer_urls().to_vec())
        .collect();
    assert_eq!(peer_urls.len(), 3, "{peer_urls:?}");
    for peer_url in &peer_urls {
        assert!(
            peer_url.starts_with("https://") && peer_url.ends_with(":2382"),
            "{peer_urls:?}"
        );
    }
    // A client with the cluster's CA reads the workload's keys over TLS on 2378.
    let ca = Api::<Secret>::namespaced(env.client.clone(), NS)
        .get("plain-ca")
        .await
        .unwrap();
    let https_url = url
        .replacen("http://", "https://", 1)
        .replace(":2379", ":2378");
    let tls = test_client_tls(&ca, &format!("plain-client.{NS}.svc"));
    let keys = count_over_tls(&https_url, tls.clone(), "history-switch/").await;
    assert!(keys > 0, "no key read over TLS");

    let checked = clients.check().await;
    assert!(checked >= 20, "only {checked} writes acknowledged");
    let report = clients.stop().await;
    let events = env.events_for("plain").await.join("\n");
    assert!(events.contains("PeerURLUpdated"), "{events}");

    // The drop: clients that moved to TLS on 2378 during the switch write on through the Service
    // while every member rolls once more, onto https:// alone (2379, and 2378 kept).
    let tls_clients =
        Workload::start_prefixed(https_url.clone(), Some(tls.clone()), "history-drop/k");
    wait_acknowledged(&tls_clients, 20).await;
    let before = member_pods(&env, &members).await;
    watch.take_pods().await;
    let drop_started = tokio::time::Instant::now();
    env.kubectl(&[
        "annotate",
        "etcdcluster",
        "plain",
        "-n",
        NS,
        "etcd.operator.rs/drop-plaintext-clients=true",
    ]);
    wait_until_every_member(
        &env,
        &pods,
        &members,
        STEP,
        "plaintext clients not dropped",
        |pod| {
            let (peer, client) = listen_schemes(pod);
            let keeps_2378 = pod.spec.as_ref().unwrap().containers[0]
                .args
                .iter()
                .flatten()
                .any(|a| a.starts_with("--listen-client-urls=") && a.contains(":2378"));
            peer == ["https"] && client == ["https", "https"] && keeps_2378
        },
    )
    .await;
    let dropped = drop_started.elapsed();
    env.wait_available("plain", 3, V36, STEP).await;
    assert_rolled_once(&watch, &before, &members).await;
    // Plaintext clients are refused from now on.
    let refused = tokio::time::timeout(Duration::from_secs(10), async {
        let mut plain = etcd_client::Client::connect([url.clone()], None).await?;
        plain.get("history-drop/", None).await
    })
    .await;
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "a plaintext client was served after the drop"
    );
    // TLS on 2379 through the Service serves what the clients on 2378 wrote.
    let on_2379 = url.replacen("http://", "https://", 1);
    let keys = count_over_tls(&on_2379, tls, "history-drop/").await;
    assert!(keys > 0, "no key read over TLS on 2379");
    // The client Service keeps publishing 2378, where the members still serve.
    let service = Api::<k8s_openapi::api::core::v1::Service>::namespaced(env.client.clone(), NS)
        .get("plain-client")
        .await
        .unwrap();
    let ports: Vec<i32> = service
        .spec
        .and_then(|s| s.ports)
        .unwrap_or_default()
        .iter()
        .map(|p| p.port)
        .collect();
    assert_eq!(ports, [2379, 2378]);
    let checked = tls_clients.check().await;
    assert!(checked >= 20, "only {checked} TLS writes acknowledged");
    let tls_report = tls_clients.stop().await;

    let fewest_ready = watch.stop();
    assert!(
        fewest_ready >= 2,
        "only {fewest_ready} member Pods were Ready at one point: quorum was at risk"
    );
    eprintln!(
        "switched to TLS in {switched:?}, plaintext dropped in {dropped:?} (whole scenario \
         {:?}); fewest Ready {fewest_ready}; plaintext clients: {report}; TLS clients on 2378 \
         through the drop: {tls_report}",
        started.elapsed()
    );
}

/// How many keys under `prefix` a client with `tls` reads through `url`.
async fn count_over_tls(url: &str, tls: etcd_client::TlsOptions, prefix: &str) -> i64 {
    let mut client = etcd_client::Client::connect(
        [url],
        Some(etcd_client::ConnectOptions::new().with_tls(tls)),
    )
    .await
    .unwrap();
    let options = etcd_client::GetOptions::new()
        .with_prefix()
        .with_count_only();
    client.get(prefix, Some(options)).await.unwrap().count()
}

/// Waits until every one of `members` has a Ready Pod for which `done` holds; fails after
/// `within` with `what`, each pending member's listeners and the diagnostics.
async fn wait_until_every_member(
    env: &Env,
    pods: &Api<Pod>,
    members: &[String],
    within: Duration,
    what: &str,
    done: impl Fn(&Pod) -> bool,
) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut pending = vec![];
        for member in members {
            match pods.get_opt(member).await.unwrap() {
                Some(pod) if pod_is_ready(&pod) => {
                    if !done(&pod) {
                        let (peer, client) = listen_schemes(&pod);
                        pending.push(format!("{member}: peers {peer:?}, clients {client:?}"));
                    }
                }
                _ => pending.push(format!("{member}: no Ready Pod")),
            }
        }
        if pending.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} after {within:?}: {pending:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
