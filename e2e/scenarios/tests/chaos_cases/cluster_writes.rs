//! The cluster operator's writes beyond membership, crashed before and after each (part of the
//! fault suite, chaos.rs, which arms, crashes, restarts and prints the table):
//!
//! - `cluster.secret_create`: the operator-managed TLS Secrets (CA, operators' client, one per
//!   member) written when a running plaintext cluster is switched to TLS ([`Trigger::TlsSwitch`],
//!   chaos.rs). Converged as any switch, plus every member's certificate valid
//!   ([`member_certificates_valid`]).
//! - `cluster.secret_replace`: a renewal ([`Trigger::RenewCertificate`]): a TLS cluster of its
//!   own, one member's certificate replaced in its Secret by a copy near its end (what the
//!   operator sees of a certificate whose time is up). Converged: re-issued with a full lifetime,
//!   that member rolled onto it, every certificate valid.
//! - `cluster.certificate_create`: a new cluster whose certificates cert-manager issues
//!   ([`Trigger::CertManagerCluster`]; cert-manager's real Certificate CRD, the stand-in of
//!   `common::certs` filling the Secrets). Converged: Available over TLS, its seven Certificates
//!   owned by it, every member's certificate valid.
//! - `cluster.network_policy_apply` / `_delete`: `spec.networkPolicy.enabled` set to true or
//!   false on [`CLUSTER`] ([`Trigger::SetNetworkPolicy`], [`Trigger::RemoveNetworkPolicy`]).
//!   Converged: the NetworkPolicy exists as built (controlled by the cluster, peer and client
//!   ports, the cluster's members selected) or is gone, and the case added or removed exactly
//!   that object in the namespace. (The node does not enforce NetworkPolicy: e2e/README.md.)
//! - `cluster.pod_annotate`: the adoption of a member Pod without its configuration hash (as an
//!   operator release before hashes built it; [`Trigger::AdoptPod`]) on [`CLUSTER`]. Converged:
//!   the same Pod (UID, restart count) records the current hash.
//! - `cluster.pvc_annotate`: the v2 snapshot before a member moves from etcd 3.5 to 3.6, which
//!   the operator records on the member's PVC ([`Trigger::UpgradeWithV2Snapshot`]; a 3.5
//!   cluster of its own upgraded to [`UPGRADE_TO`]). Converged: every member on 3.6, every PVC
//!   marked `v2-wal-clean` with no snapshot pending.
//! - `cluster.pvc_resize`: volume growth (`spec.storage.size` 1Gi -> 2Gi on a cluster of its own
//!   on a StorageClass that allows expansion, [`Trigger::GrowVolumes`]). Converged: every member
//!   PVC requests 2Gi and every member rolled onto the quota derived from it. The capacity does
//!   not grow here: upstream's host-path provisioner implements no expansion (e2e/README.md,
//!   "Known deviations"); the case prints it.
//! - `cluster.pod_mark_tls_reverted` once more, the revert completed: a switch to TLS with the
//!   member whose peer URL moved first closed to the operator on its client ports, a cut that
//!   outlives the operator's restart ([`Trigger::TlsRevertCompletes`], run by chaos.rs's switch
//!   case).
//!
//! A case on a cluster of its own deletes it afterwards (its PVCs stay: Retain). Its clients
//! write to that cluster when it exists before the crash (over TLS for a TLS cluster), else to
//! [`CLUSTER`].

use super::*;

use crate::common::certs::{
    cert_manager_stand_in, certificate_resource, install_certificate_crd, not_after,
    plant_near_expiry, secret_text,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::DynamicObject;

/// Every case of this part, in table order: the ones on [`CLUSTER`] first.
pub(super) fn cases() -> Vec<Case> {
    use Trigger::*;
    both_sides(&[
        // Set, then removed: the cases after these run without the NetworkPolicy again.
        ("cluster.network_policy_apply", SetNetworkPolicy),
        ("cluster.network_policy_delete", RemoveNetworkPolicy),
        ("cluster.pod_annotate", AdoptPod),
        ("cluster.secret_create", TlsSwitch),
        ("cluster.secret_replace", RenewCertificate),
        ("cluster.certificate_create", CertManagerCluster),
        ("cluster.pvc_annotate", UpgradeWithV2Snapshot),
        ("cluster.pvc_resize", GrowVolumes),
        ("cluster.pod_mark_tls_reverted", TlsRevertCompletes),
    ])
}

/// Where the concurrent clients of a case write.
pub(super) struct Clients {
    pub url: String,
    pub tls: Option<etcd_client::TlsOptions>,
}

/// A cluster a case makes for itself (preparation, not timed), and what runs beside it.
pub(super) struct Own {
    pub cluster: Cluster,
    /// `None`: the cluster does not exist before the crash (the clients write to [`CLUSTER`]).
    pub clients: Option<Clients>,
    /// The stand-in for cert-manager's controller, for the case's duration.
    stand_in: Option<tokio::task::JoinHandle<()>>,
}

/// The StorageClass of [`Trigger::GrowVolumes`]: upstream's host-path provisioner, and
/// `allowVolumeExpansion` so that the API server accepts a larger request.
const EXPANDABLE_CLASS: &str = "chaos-expandable";

/// The cluster the case needs of its own, made and Available (not timed); `None` for the cases
/// on [`CLUSTER`] and those of chaos.rs. The name is leaked: a few per run.
pub(super) async fn own_cluster(env: &Env, case: &Case, index: usize) -> Option<Own> {
    let named = |kind: &str| -> &'static str {
        Box::leak(format!("chaos-{kind}-{index}").into_boxed_str())
    };
    let plain = |name: &'static str, version: &'static str| Cluster {
        name,
        size: 3,
        delete_pvcs: false,
        version,
        backup_schedule: false,
        no_space_quota: false,
        network_policy: None,
    };
    let (cluster, spec) = match case.trigger {
        Trigger::RenewCertificate => (
            plain(named("certs"), UPGRADE_TO),
            "  tls: {peer: {}, client: {}}\n".to_owned(),
        ),
        Trigger::CertManagerCluster => {
            install_certificate_crd(env);
            let stand_in = cert_manager_stand_in(env.client.clone(), Default::default());
            // Created by the case, armed.
            return Some(Own {
                cluster: plain(named("cm"), UPGRADE_TO),
                clients: None,
                stand_in: Some(stand_in),
            });
        }
        Trigger::UpgradeWithV2Snapshot => (plain(named("v2"), VERSION), String::new()),
        Trigger::GrowVolumes => {
            env.apply(&format!(
                "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {EXPANDABLE_CLASS}}}\n\
                 provisioner: kubernetes.io/host-path\nvolumeBindingMode: Immediate\n\
                 allowVolumeExpansion: true\n"
            ))
            .unwrap();
            (
                plain(named("vol"), VERSION),
                format!("  storage: {{size: 1Gi, storageClassName: {EXPANDABLE_CLASS}}}\n"),
            )
        }
        _ => return None,
    };
    env.apply(&own_yaml(&cluster, &spec)).unwrap();
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    let tls = if case.trigger == Trigger::RenewCertificate {
        Some(operator_client_tls(env, cluster.name).await)
    } else {
        None
    };
    let clients = Clients {
        url: client_url(env, cluster.name, tls.is_some()).await,
        tls,
    };
    Some(Own {
        cluster,
        clients: Some(clients),
        stand_in: None,
    })
}

/// The manifest of a cluster of its own: the size and version of `cluster`, then `spec` (YAML
/// lines of the spec, indented by two; the storage line replaces the default one).
fn own_yaml(cluster: &Cluster, spec: &str) -> String {
    let storage = if spec.contains("  storage:") {
        ""
    } else {
        "  storage: {size: 1Gi}\n"
    };
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdCluster\nmetadata: {{name: {}}}\nspec:\n  size: {}\n  version: \"{}\"\n{storage}{spec}",
        cluster.name, cluster.size, cluster.version
    )
}

/// The manifest of [`Trigger::CertManagerCluster`]'s cluster (as examples/cluster-cert-manager.yaml;
/// the stand-in ignores the issuer).
fn cert_manager_yaml(cluster: &Cluster) -> String {
    own_yaml(
        cluster,
        "  tls:\n    peer: {certManager: {issuerRef: {name: etcd-ca, kind: Issuer}}}\n    \
         client: {clientCertAuth: true, certManager: {issuerRef: {name: etcd-ca, kind: Issuer}}}\n",
    )
}

/// Deletes the case's own cluster (its PVCs stay: Retain) and stops the stand-in.
pub(super) fn clean_up(env: &Env, own: Own) {
    if let Some(stand_in) = own.stand_in {
        stand_in.abort();
    }
    env.kubectl(&[
        "delete",
        "etcdcluster",
        own.cluster.name,
        "-n",
        NS,
        "--wait=false",
        "--ignore-not-found",
    ]);
}

/// The state [`CLUSTER`] must be in before the case (chaos.rs `prepare` applies it); whether it
/// changed.
pub(super) fn prepare(cluster: &mut Cluster, case: &Case) -> bool {
    let wanted = match case.trigger {
        Trigger::SetNetworkPolicy => Some(false),
        Trigger::RemoveNetworkPolicy => Some(true),
        _ => return false,
    };
    let changed = cluster.network_policy.unwrap_or(false) != wanted.unwrap_or(false);
    if changed {
        cluster.network_policy = wanted;
    }
    changed
}

/// Runs the case: armed, the change, the crash, the restart without the failpoint, then waits
/// for the converged state and checks it. Timed from the crash to converged.
pub(super) async fn run(armed: &Armed<'_>, cluster: &mut Cluster, own: Option<&Own>) -> CaseResult {
    let case = armed.case;
    match case.trigger {
        Trigger::SetNetworkPolicy | Trigger::RemoveNetworkPolicy => {
            network_policy_case(armed, cluster, case).await
        }
        Trigger::AdoptPod => adopt_pod_case(armed, cluster, case).await,
        Trigger::RenewCertificate => renew_case(armed, own.unwrap(), case).await,
        Trigger::CertManagerCluster => cert_manager_case(armed, own.unwrap(), case).await,
        Trigger::UpgradeWithV2Snapshot => v2_snapshot_case(armed, own.unwrap(), case).await,
        Trigger::GrowVolumes => grow_volumes_case(armed, own.unwrap(), case).await,
        _ => unreachable!("not a case of cluster_writes"),
    }
}

/// Polls `check` every 500 ms until it passes or `timeout` ends; its last error then.
async fn wait_for<F>(timeout: Duration, mut check: impl FnMut() -> F) -> Result<(), String>
where
    F: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(format!("after {timeout:?}: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn network_policy_case(
    armed: &Armed<'_>,
    cluster: &mut Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let env = armed.env;
    let wanted = case.trigger == Trigger::SetNetworkPolicy;
    // The state before, settled (preparation may just have applied it).
    if let Err(e) = wait_for(STEP, || {
        network_policy_as_wanted(env, cluster.name, !wanted)
    })
    .await
    {
        return (Err(format!("before the case: {e}")), Duration::ZERO);
    }
    let before = Snapshot::take(env, cluster).await;
    let objects_before = objects_with_policies(env);
    let restarted = armed
        .crash_and_restart(STEP, async || {
            cluster.network_policy = Some(wanted);
            env.apply(&cluster.yaml()).unwrap();
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let converged = wait_for(STEP, || network_policy_as_wanted(env, cluster.name, wanted)).await;
    let elapsed = restarted.elapsed();
    let after = Snapshot::once_available(env, cluster).await;
    let outcome = converged
        .and_then(|()| check(&before, &after, cluster, case))
        .and_then(|()| {
            let policy = format!("networkpolicy.networking.k8s.io/{}", cluster.name);
            let objects_after = objects_with_policies(env);
            let (changed, what): (BTreeSet<&String>, _) = if wanted {
                (objects_after.difference(&objects_before).collect(), "added")
            } else {
                (
                    objects_before.difference(&objects_after).collect(),
                    "removed",
                )
            };
            if changed.len() == 1 && changed.contains(&policy) {
                Ok(())
            } else {
                Err(format!(
                    "{} {what} {changed:?}, not {policy} alone",
                    case.failpoint
                ))
            }
        });
    (outcome, elapsed)
}

/// [`namespace_objects`] and the namespace's NetworkPolicies.
/// Leaves out the objects of the clusters cases make of their own: the last one may still be
/// going (deleted without waiting) while this case runs.
fn objects_with_policies(env: &Env) -> BTreeSet<String> {
    let kinds = format!("{NAMESPACE_KINDS},networkpolicies");
    let of_a_cluster_of_its_own = |object: &str| {
        let name = object.rsplit('/').next().unwrap_or_default();
        [
            "chaos-tls-",
            "chaos-certs-",
            "chaos-cm-",
            "chaos-v2-",
            "chaos-vol-",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
    };
    env.kubectl(&["get", &kinds, "-n", NS, "-o", "name"])
        .lines()
        .filter(|object| !of_a_cluster_of_its_own(object))
        .map(str::to_owned)
        .collect()
}

/// `wanted`: the cluster's NetworkPolicy exists, not being deleted, controlled by the
/// EtcdCluster, selecting its members and admitting the peer and client ports. Else: it does
/// not exist.
async fn network_policy_as_wanted(env: &Env, name: &str, wanted: bool) -> Result<(), String> {
    let policies: Api<NetworkPolicy> = Api::namespaced(env.client.clone(), NS);
    let policy = policies.get_opt(name).await.map_err(|e| e.to_string())?;
    let Some(policy) = policy else {
        return if wanted {
            Err(format!("no NetworkPolicy {name}"))
        } else {
            Ok(())
        };
    };
    if !wanted {
        return Err(format!("NetworkPolicy {name} still there"));
    }
    if policy.metadata.deletion_timestamp.is_some() {
        return Err(format!("NetworkPolicy {name} is being deleted"));
    }
    let uid = cluster_uid(env, name).await;
    let controlled = policy
        .owner_references()
        .iter()
        .any(|o| o.kind == "EtcdCluster" && o.uid == uid && o.controller == Some(true));
    if !controlled {
        return Err(format!(
            "NetworkPolicy {name} is not controlled by the EtcdCluster: {:?}",
            policy.metadata.owner_references
        ));
    }
    let spec = policy.spec.as_ref().ok_or("NetworkPolicy without spec")?;
    let selects = spec
        .pod_selector
        .as_ref()
        .and_then(|s| s.match_labels.as_ref())
        .and_then(|l| l.get("etcd.operator.rs/cluster"))
        .is_some_and(|c| c == name);
    let ports: BTreeSet<String> = spec
        .ingress
        .iter()
        .flatten()
        .flat_map(|rule| rule.ports.iter().flatten())
        .filter_map(|p| p.port.as_ref())
        .map(|p| match p {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => n.to_string(),
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s.clone(),
        })
        .collect();
    if !selects || !ports.contains("2379") || !ports.contains("2380") {
        return Err(format!(
            "NetworkPolicy {name} selects {:?} and admits ports {ports:?}",
            spec.pod_selector
        ));
    }
    Ok(())
}

/// One member Pod of [`CLUSTER`] loses its configuration-hash annotation (as a Pod an operator
/// release before hashes built), the operator armed: it must record the current hash on the
/// same Pod, without restarting it.
async fn adopt_pod_case(
    armed: &Armed<'_>,
    cluster: &Cluster,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let env = armed.env;
    let before = Snapshot::take(env, cluster).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let member = before.pods.iter().next().unwrap().clone();
    let pod = pods.get(&member).await.unwrap();
    let hash = pod.annotations().get(CONFIG_HASH).cloned();
    let Some(hash) = hash else {
        return (
            Err(format!("{member} has no {CONFIG_HASH} before the case")),
            Duration::ZERO,
        );
    };
    let restarted = armed
        .crash_and_restart(STEP, async || {
            env.kubectl(&[
                "annotate",
                "pod",
                "-n",
                NS,
                &member,
                &format!("{CONFIG_HASH}-"),
            ]);
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let adopted = wait_for(STEP, || async {
        let now = pods.get(&member).await.map_err(|e| e.to_string())?;
        match now.annotations().get(CONFIG_HASH) {
            Some(recorded) if *recorded == hash => Ok(()),
            other => Err(format!(
                "{member} records {CONFIG_HASH} {other:?}, not {hash}"
            )),
        }
    })
    .await;
    let elapsed = restarted.elapsed();
    let after = Snapshot::once_available(env, cluster).await;
    let now = pods.get(&member).await.unwrap();
    let outcome = adopted
        .and_then(|()| {
            if now.uid() != pod.uid() || restarts(&now) != restarts(&pod) {
                Err(format!(
                    "{member} was re-created or restarted: UID {:?} -> {:?}, restarts {} -> {}",
                    pod.uid(),
                    now.uid(),
                    restarts(&pod),
                    restarts(&now)
                ))
            } else {
                Ok(())
            }
        })
        .and_then(|()| check(&before, &after, cluster, case));
    (outcome, elapsed)
}

/// The member Pod annotation of the configuration hash (etcd-member's `ANNOTATION_CONFIG_HASH`).
const CONFIG_HASH: &str = "etcd.operator.rs/config-hash";
/// The member Pod annotation of the certificate Secrets' hash (`ANNOTATION_TLS_HASH`).
const TLS_HASH: &str = "etcd.operator.rs/tls-hash";

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map_or(0, |c| c.iter().map(|c| c.restart_count).sum())
}

/// One member's certificate replaced by a near-expiry copy, the operator armed: it re-issues it
/// (a replace of the Secret) and rolls that member onto it.
async fn renew_case(armed: &Armed<'_>, own: &Own, case: &Case) -> (Result<(), String>, Duration) {
    let env = armed.env;
    let cluster = &own.cluster;
    let tls = own.clients.as_ref().and_then(|c| c.tls.clone());
    let before = snapshot_over_tls(env, cluster, tls.clone()).await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let member = format!("{}-1", cluster.name);
    let secret_name = format!("{member}-tls");
    let pod_before = pods.get(&member).await.unwrap();
    let ca = secrets.get(&format!("{}-ca", cluster.name)).await.unwrap();
    let mut planted = None;
    let restarted = armed
        .crash_and_restart(STEP, async || {
            planted = Some(plant_near_expiry(&secrets, &secret_name, &ca).await);
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let planted = planted.unwrap();
    let renewed = wait_for(STEP, || async {
        let cert = secret_text(
            &secrets.get(&secret_name).await.map_err(|e| e.to_string())?,
            "tls.crt",
        );
        if cert == planted {
            return Err(format!(
                "{secret_name}: the near-expiry certificate is still there"
            ));
        }
        let left = not_after(&cert) - time::OffsetDateTime::now_utc().unix_timestamp();
        if left < 365 * 86_400 {
            return Err(format!("{secret_name}: re-issued, ending in {left} s"));
        }
        let pod = pods.get(&member).await.map_err(|e| e.to_string())?;
        let rolled = pod.uid() != pod_before.uid()
            && pod_is_ready(&pod)
            && pod.annotations().get(TLS_HASH).is_some()
            && pod.annotations().get(TLS_HASH) != pod_before.annotations().get(TLS_HASH);
        if rolled {
            Ok(())
        } else {
            Err(format!("{member}: not rolled onto its renewed certificate"))
        }
    })
    .await;
    let elapsed = restarted.elapsed();
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    let after = snapshot_over_tls(env, cluster, tls).await;
    let outcome = match renewed {
        Ok(()) => member_certificates_valid(env, cluster.name).await,
        Err(e) => Err(e),
    }
    .and_then(|()| check(&before, &after, cluster, case));
    (outcome, elapsed)
}

/// A cluster whose certificates cert-manager issues, created with the operator armed: it
/// creates the Certificates (the stand-in fills their Secrets) and forms over TLS.
async fn cert_manager_case(
    armed: &Armed<'_>,
    own: &Own,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let env = armed.env;
    let cluster = &own.cluster;
    let before = Snapshot {
        members: BTreeMap::new(),
        learners: 0,
        unstarted: 0,
        pods: BTreeSet::new(),
        pvcs: pvc_names(env).await,
        delete_pvcs: false,
    };
    let restarted = armed
        .crash_and_restart(STEP, async || {
            env.apply(&cert_manager_yaml(cluster)).unwrap();
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    env.wait_available(cluster.name, cluster.size, cluster.version, STEP)
        .await;
    let elapsed = restarted.elapsed();
    let tls = operator_client_tls(env, cluster.name).await;
    let after = snapshot_over_tls(env, cluster, Some(tls)).await;
    let outcome = certificates_owned(env, cluster)
        .await
        .and_then(|()| check(&before, &after, cluster, case));
    (outcome, elapsed)
}

/// The Certificates owned by `cluster` are exactly one per member and side, and the operators'
/// client certificate.
async fn certificates_owned(env: &Env, cluster: &Cluster) -> Result<(), String> {
    let uid = cluster_uid(env, cluster.name).await;
    let certificates: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), NS, &certificate_resource());
    let owned: BTreeSet<String> = certificates
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|c| c.owner_references().iter().any(|o| o.uid == uid))
        .map(|c| c.name_any())
        .collect();
    let name = cluster.name;
    let mut expected: BTreeSet<String> = (0..cluster.size)
        .flat_map(|i| {
            [
                format!("{name}-{i}-client-tls"),
                format!("{name}-{i}-peer-tls"),
            ]
        })
        .collect();
    expected.insert(format!("{name}-operator-client-tls"));
    if owned == expected {
        Ok(())
    } else {
        Err(format!(
            "Certificates owned by {name}: {owned:?}, not {expected:?}"
        ))
    }
}

/// A 3.5 cluster upgraded to [`UPGRADE_TO`], the operator armed: before each member moves, its
/// PVC records the v2 snapshot its next Pod takes on 3.5, then that it was taken.
async fn v2_snapshot_case(
    armed: &Armed<'_>,
    own: &Own,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let env = armed.env;
    let before = Snapshot::take(env, &own.cluster).await;
    let name = own.cluster.name;
    let restarted = armed
        .crash_and_restart(STEP, async || {
            patch_cluster(
                env,
                name,
                &format!(r#"{{"spec":{{"version":"{UPGRADE_TO}"}}}}"#),
            );
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let upgraded = Cluster {
        name,
        size: own.cluster.size,
        delete_pvcs: own.cluster.delete_pvcs,
        version: UPGRADE_TO,
        backup_schedule: false,
        no_space_quota: false,
        network_policy: None,
    };
    // Two restarts per member (the snapshot on 3.5, then 3.6).
    env.wait_available(name, upgraded.size, upgraded.version, 3 * STEP)
        .await;
    let elapsed = restarted.elapsed();
    let after = Snapshot::take(env, &upgraded).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let mut unmarked = Vec::new();
    for member in &after.pods {
        let pvc = pvcs.get(member).await.unwrap();
        let annotations = pvc.annotations();
        if annotations.get(V2_WAL_CLEAN).map(String::as_str) != Some("true")
            || annotations.contains_key(SNAPSHOT_BEFORE_UPGRADE)
        {
            unmarked.push(format!("{member}: {annotations:?}"));
        }
    }
    let outcome = if unmarked.is_empty() {
        check(&before, &after, &upgraded, case)
    } else {
        Err(format!("PVCs not marked v2-wal-clean: {unmarked:?}"))
    };
    (outcome, elapsed)
}

/// etcd-member's `ANNOTATION_V2_WAL_CLEAN` and `ANNOTATION_SNAPSHOT_BEFORE_UPGRADE`.
const V2_WAL_CLEAN: &str = "etcd.operator.rs/v2-wal-clean";
const SNAPSHOT_BEFORE_UPGRADE: &str = "etcd.operator.rs/snapshot-before-upgrade";

/// `spec.storage.size` 1Gi -> 2Gi, the operator armed: each member PVC's request grows, then
/// the members roll onto the quota derived from the new size.
async fn grow_volumes_case(
    armed: &Armed<'_>,
    own: &Own,
    case: &Case,
) -> (Result<(), String>, Duration) {
    let env = armed.env;
    let cluster = &own.cluster;
    let before = Snapshot::take(env, cluster).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let hashes_before: BTreeSet<String> = member_pods(env, cluster.name)
        .await
        .iter()
        .filter_map(|p| p.annotations().get(CONFIG_HASH).cloned())
        .collect();
    let restarted = armed
        .crash_and_restart(STEP, async || {
            patch_cluster(env, cluster.name, r#"{"spec":{"storage":{"size":"2Gi"}}}"#);
            Ok(())
        })
        .await;
    let restarted = match restarted {
        Ok(at) => at,
        Err(not_reached) => return not_reached,
    };
    let grown = wait_for(2 * STEP, || async {
        let mut pending = Vec::new();
        for member in &before.pods {
            let pvc = pvcs.get(member).await.map_err(|e| e.to_string())?;
            let request = pvc
                .spec
                .and_then(|s| s.resources)
                .and_then(|r| r.requests)
                .and_then(|r| r.get("storage").map(|q| q.0.clone()));
            if request.as_deref() != Some("2Gi") {
                pending.push(format!("{member} requests {request:?}"));
            }
        }
        let list = member_pods(env, cluster.name).await;
        for pod in &list {
            let hash = pod.annotations().get(CONFIG_HASH);
            if !pod_is_ready(pod) || hash.is_none_or(|h| hashes_before.contains(h)) {
                pending.push(format!("{}: not rolled onto the new quota", pod.name_any()));
            }
        }
        if list.len() != cluster.size {
            pending.push(format!("{} member Pods", list.len()));
        }
        if pending.is_empty() {
            Ok(())
        } else {
            Err(format!("{pending:?}"))
        }
    })
    .await;
    let elapsed = restarted.elapsed();
    let after = Snapshot::once_available(env, cluster).await;
    // What the volumes report (the host-path provisioner does not expand them).
    for member in &after.pods {
        if let Ok(pvc) = pvcs.get(member).await {
            let capacity = pvc
                .status
                .and_then(|s| s.capacity)
                .and_then(|c| c.get("storage").map(|q| q.0.clone()));
            eprintln!("chaos: {member}'s PVC requests 2Gi; its capacity is {capacity:?}");
        }
    }
    let outcome = grown.and_then(|()| check(&before, &after, cluster, case));
    (outcome, elapsed)
}

/// The member Pods of `cluster` (not being deleted).
async fn member_pods(env: &Env, cluster: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("etcd.operator.rs/cluster={cluster}");
    pods.list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn patch_cluster(env: &Env, name: &str, patch: &str) {
    env.kubectl(&[
        "patch",
        "etcdcluster",
        name,
        "-n",
        NS,
        "--type=merge",
        "-p",
        patch,
    ]);
}

/// The client Service's URL, `https://` for a cluster whose client port speaks TLS.
async fn client_url(env: &Env, name: &str, tls: bool) -> String {
    let url = env.client_url(name).await;
    if tls {
        url.replacen("http://", "https://", 1)
    } else {
        url
    }
}

/// A client of `cluster` over TLS with the operators' client certificate (its Secret holds the
/// CA in `ca.crt`), checking the client Service's name.
async fn operator_client_tls(env: &Env, cluster: &str) -> etcd_client::TlsOptions {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let secret = secrets
        .get(&format!("{cluster}-operator-client-tls"))
        .await
        .unwrap();
    etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(secret_text(
            &secret, "ca.crt",
        )))
        .identity(etcd_client::Identity::from_pem(
            secret_text(&secret, "tls.crt"),
            secret_text(&secret, "tls.key"),
        ))
        .domain_name(format!("{cluster}-client.{NS}.svc"))
}

/// [`Snapshot::take`] of a cluster whose client port speaks TLS.
async fn snapshot_over_tls(
    env: &Env,
    cluster: &Cluster,
    tls: Option<etcd_client::TlsOptions>,
) -> Snapshot {
    let url = client_url(env, cluster.name, tls.is_some()).await;
    Snapshot::take_at(env, cluster, &url, tls).await
}

/// Every member Pod's certificate Secret (`<member>-tls`, operator-managed) holds a certificate
/// signed by the cluster's issuing CA (`<cluster>-ca`) whose DNS names cover the member's peer
/// host and the client Service, and the Pod records the hash of the Secrets it mounts.
pub(super) async fn member_certificates_valid(env: &Env, cluster: &str) -> Result<(), String> {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let get = |name: String| {
        let secrets = secrets.clone();
        async move {
            secrets
                .get(&name)
                .await
                .map_err(|e| format!("Secret {name}: {e}"))
        }
    };
    let ca = secret_text(&get(format!("{cluster}-ca")).await?, "tls.crt");
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(ca.as_bytes()).map_err(|e| e.to_string())?;
    let ca_cert = ca_pem.parse_x509().map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    for pod in member_pods(env, cluster).await {
        let member = pod.name_any();
        let secret = get(format!("{member}-tls")).await?;
        let pem = secret_text(&secret, "tls.crt");
        let (_, parsed) =
            x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| e.to_string())?;
        let cert = parsed.parse_x509().map_err(|e| e.to_string())?;
        if cert.verify_signature(Some(ca_cert.public_key())).is_err() {
            problems.push(format!("{member}: not signed by {cluster}-ca"));
        }
        let names: BTreeSet<String> = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        for host in [
            format!("{member}.{cluster}.{NS}.svc"),
            format!("{cluster}-client.{NS}.svc"),
        ] {
            if !names.contains(&host) {
                problems.push(format!("{member}: no SAN {host} in {names:?}"));
            }
        }
        if !cert.validity().is_valid() {
            problems.push(format!("{member}: not valid now"));
        }
        if !pod.annotations().contains_key(TLS_HASH) {
            problems.push(format!("{member}: Pod without {TLS_HASH}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("member certificates: {problems:?}"))
    }
}
