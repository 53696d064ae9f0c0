//! The Deployment controller (`deployment-controller`): one ReplicaSet per pod template, named
//! `<deployment>-<pod-template-hash>`, scaled by RollingUpdate (within maxSurge/maxUnavailable)
//! or Recreate; revision and replica annotations; status and conditions as upstream writes
//! them, which is what `kubectl rollout status`, `kubectl wait --for=condition=Available` and
//! `helm --wait` read.

mod rollout;
mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};

use crate::error::{Error, is_already_exists};
use crate::hash::{POD_TEMPLATE_HASH, pod_template_hash};
use crate::runner::{Context, drive, object_reference};
use crate::{io, labels, pods};
use rollout::{RsState, desired_replicas, spec_replicas};
use status::NewRs;

pub(crate) const CONTROLLER: &str = "deployment-controller";
pub(crate) const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations not copied onto its ReplicaSets (`skipCopyAnnotation`).
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];
/// How often a Recreate rollout looks again while old pods are still terminating (their
/// disappearance changes no ReplicaSet, so no watch event would wake it).
const RECREATE_POLL: Duration = Duration::from_secs(1);

/// Run the Deployment controller until dropped.
pub async fn run_deployments(client: Client) {
    let controller = Controller::new(
        Api::<Deployment>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    let controller = controller.watches(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
        move |rs| owners_of(&store, &rs),
    );
    let ctx = Context::new(client, CONTROLLER, ());
    drive("deployment", controller, ctx, reconcile).await;
}

fn owners_of(store: &Store<Deployment>, rs: &ReplicaSet) -> Vec<ObjectRef<Deployment>> {
    let namespace = rs.namespace().unwrap_or_default();
    if let Some(owner) = pods::controller_ref(&rs.metadata) {
        if owner.kind == "Deployment" && owner.api_version == "apps/v1" {
            return vec![ObjectRef::new(&owner.name).within(&namespace)];
        }
        return Vec::new();
    }
    let Some(rs_labels) = rs.metadata.labels.as_ref() else {
        return Vec::new();
    };
    store
        .state()
        .iter()
        .filter(|d| d.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|d| {
            d.spec
                .as_ref()
                .is_some_and(|s| labels::matches(&s.selector, rs_labels))
        })
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// Templates equal once both lose their `pod-template-hash` label (`EqualIgnoreHash`), which is
/// also how helm's `GetNewReplicaSet` finds the ReplicaSet of a Deployment.
pub(crate) fn templates_equal(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(meta) = t.metadata.as_mut() {
            if let Some(labels) = meta.labels.as_mut() {
                labels.remove(POD_TEMPLATE_HASH);
            }
            if meta.labels.as_ref().is_some_and(|l| l.is_empty()) {
                meta.labels = None;
            }
        }
        serde_json::to_value(t).unwrap_or_default()
    };
    strip(a) == strip(b)
}

/// The annotations a Deployment's new ReplicaSet should carry (`SetNewReplicaSetAnnotations`):
/// the Deployment's own (minus `NOT_COPIED`), the revision raised to `revision` if lower, and on
/// creation the replica annotations.
fn new_rs_annotations(
    d: &Deployment,
    current: &BTreeMap<String, String>,
    revision: i64,
    replicas: Option<(i32, i32)>,
) -> BTreeMap<String, String> {
    let mut out = current.clone();
    for (k, v) in d.annotations() {
        if !NOT_COPIED.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    let old: i64 = out.get(REVISION).and_then(|v| v.parse().ok()).unwrap_or(0);
    if old < revision || !out.contains_key(REVISION) {
        out.insert(REVISION.into(), revision.to_string());
    }
    if let Some((desired, max)) = replicas {
        out.insert(DESIRED_REPLICAS.into(), desired.to_string());
        out.insert(MAX_REPLICAS.into(), max.to_string());
    }
    out
}

/// The ReplicaSet a Deployment creates for its current template.
fn new_replicaset(
    d: &Deployment,
    hash: &str,
    replicas: i32,
    annotations: BTreeMap<String, String>,
) -> Option<ReplicaSet> {
    let spec = d.spec.as_ref()?;
    let mut template = spec.template.clone();
    let meta = template.metadata.get_or_insert_with(Default::default);
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.into(), hash.into());
    let mut selector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.into(), hash.into());
    Some(ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", d.name_any())),
            namespace: d.namespace(),
            labels: meta.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![pods::new_controller_ref(d)?]),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    })
}

/// Everything one sync works with.
struct Sync<'a> {
    ctx: &'a Context<()>,
    d: &'a Deployment,
    rs_api: Api<ReplicaSet>,
    reference: k8s_openapi::api::core::v1::ObjectReference,
    surge: i32,
}

impl Sync<'_> {
    /// Resize `rs` to `to`, with the replica annotations, and record `ScalingReplicaSet`.
    async fn scale(&self, rs: &mut ReplicaSet, to: i32) -> Result<(), Error> {
        let from = spec_replicas(rs);
        if from == to {
            return Ok(());
        }
        let desired = desired_replicas(self.d);
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": rs.metadata.resource_version,
                "annotations": {
                    DESIRED_REPLICAS: desired.to_string(),
                    MAX_REPLICAS: (desired + self.surge).to_string(),
                },
            },
            "spec": {"replicas": to},
        });
        *rs = self
            .rs_api
            .patch(
                &rs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
        let direction = if to > from { "up" } else { "down" };
        let note = format!(
            "Scaled {direction} replica set {} from {from} to {to}",
            rs.name_any()
        );
        self.ctx
            .event(
                &self.reference,
                EventType::Normal,
                "ScalingReplicaSet",
                "Scale",
                note,
            )
            .await;
        Ok(())
    }

    /// Find or create the ReplicaSet of the current template and bring its revision,
    /// annotations and minReadySeconds up to date (`getNewReplicaSet`).
    async fn ensure_new(
        &self,
        new: Option<ReplicaSet>,
        old: &[ReplicaSet],
        replicas_if_created: i32,
    ) -> Result<(ReplicaSet, NewRs), Error> {
        let revision = old.iter().map(rollout::revision).max().unwrap_or(0) + 1;
        let spec = self
            .d
            .spec
            .as_ref()
            .ok_or_else(|| Error::invalid("Deployment", &self.d.name_any(), "no spec"))?;
        if let Some(rs) = new {
            let annotations = new_rs_annotations(self.d, rs.annotations(), revision, None);
            let min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds);
            if &annotations == rs.annotations() && min_ready == spec.min_ready_seconds {
                let name = rs.name_any();
                return Ok((rs, NewRs::Found(name)));
            }
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": rs.metadata.resource_version, "annotations": annotations},
                "spec": {"minReadySeconds": spec.min_ready_seconds},
            });
            let rs = self
                .rs_api
                .patch(
                    &rs.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await?;
            let name = rs.name_any();
            return Ok((rs, NewRs::Found(name)));
        }
        let collision_count = self.d.status.as_ref().and_then(|s| s.collision_count);
        let hash = pod_template_hash(&spec.template, collision_count);
        let desired = desired_replicas(self.d);
        let annotations = new_rs_annotations(
            self.d,
            &BTreeMap::new(),
            revision,
            Some((desired, desired + self.surge)),
        );
        let rs = new_replicaset(self.d, &hash, replicas_if_created, annotations)
            .ok_or_else(|| Error::invalid("Deployment", &self.d.name_any(), "no name or uid"))?;
        match self.rs_api.create(&PostParams::default(), &rs).await {
            Ok(created) => {
                if replicas_if_created > 0 {
                    let note = format!(
                        "Scaled up replica set {} from 0 to {replicas_if_created}",
                        created.name_any()
                    );
                    self.ctx
                        .event(
                            &self.reference,
                            EventType::Normal,
                            "ScalingReplicaSet",
                            "Scale",
                            note,
                        )
                        .await;
                }
                let name = created.name_any();
                Ok((created, NewRs::Created(name)))
            }
            Err(err) if is_already_exists(&err) => {
                let existing = self.rs_api.get(&rs.name_any()).await?;
                let ours = pods::controller_ref(&existing.metadata).map(|r| r.uid.as_str())
                    == self.d.metadata.uid.as_deref();
                let same = existing
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| templates_equal(t, &spec.template));
                if ours && same {
                    let name = existing.name_any();
                    return Ok((existing, NewRs::Found(name)));
                }
                // A hash collision: bump collisionCount so the next sync tries another name.
                let mut d = self.d.clone();
                let status = d.status.get_or_insert_with(Default::default);
                status.collision_count = Some(collision_count.unwrap_or(0) + 1);
                Api::<Deployment>::namespaced(
                    self.ctx.client.clone(),
                    &self.d.namespace().unwrap_or_default(),
                )
                .replace_status(&self.d.name_any(), &PostParams::default(), &d)
                .await?;
                Err(Error::invalid(
                    "Deployment",
                    &self.d.name_any(),
                    format!("hash collision on ReplicaSet {}", rs.name_any()),
                ))
            }
            Err(err) => Err(err.into()),
        }
    }
}

async fn reconcile(d: Arc<Deployment>, ctx: Arc<Context<()>>) -> Result<Action, Error> {
    let now = Timestamp::now();
    let namespace = d.namespace().unwrap_or_default();
    let name = d.name_any();
    let d_api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let rs_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &namespace);
    let spec = d
        .spec
        .clone()
        .ok_or_else(|| Error::invalid("Deployment", &name, "no spec"))?;
    let reference = object_reference(d.as_ref());
    let uid = d.metadata.uid.clone().unwrap_or_default();
    let deleting = d.metadata.deletion_timestamp.is_some();

    if labels::is_empty(&spec.selector) {
        let note =
            "This deployment is selecting all pods. A non-empty selector is required.".to_string();
        ctx.event(&reference, EventType::Warning, "SelectingAll", "Sync", note)
            .await;
        return Ok(Action::await_change());
    }
    let (surge, unavailable) =
        rollout::fenceposts(&d).map_err(|e| Error::invalid("Deployment", &name, e))?;
    let max_unavailable = rollout::max_unavailable(&d, unavailable);
    let sync = Sync {
        ctx: &ctx,
        d: &d,
        rs_api: rs_api.clone(),
        reference,
        surge,
    };

    // Claim ReplicaSets: ours and matching, adopt matching orphans, release the rest of ours.
    let owner = pods::new_controller_ref(d.as_ref())
        .ok_or_else(|| Error::invalid("Deployment", &name, "no name or uid"))?;
    let mut rss: Vec<ReplicaSet> = Vec::new();
    for rs in rs_api.list(&ListParams::default()).await?.items {
        let matching = labels::matches(&spec.selector, rs.labels());
        match pods::controller_ref(&rs.metadata).map(|r| r.uid.clone()) {
            Some(owner_uid) if owner_uid == uid => {
                if matching {
                    rss.push(rs);
                } else if !deleting {
                    io::release(&rs_api, &rs, &uid).await?;
                }
            }
            None if matching && !deleting && rs.metadata.deletion_timestamp.is_none() => {
                io::adopt(&rs_api, &rs, owner.clone()).await?;
                rss.push(rs);
            }
            _ => {}
        }
    }

    // The new ReplicaSet is the oldest whose template equals ours.
    rss.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .cmp(&b.metadata.creation_timestamp)
    });
    let new_index = rss.iter().position(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| templates_equal(t, &spec.template))
    });
    let mut new_rs = new_index.map(|i| rss.remove(i));
    let mut old = rss;
    let mut how = None;
    let mut requeue = None;

    let paused = spec.paused.unwrap_or(false);
    if deleting || paused {
        // Paused or deleted: no scaling, only status (and the paused condition).
    } else if rollout::is_recreate(&d) {
        let mut scaled = false;
        for rs in old.iter_mut().filter(|rs| spec_replicas(rs) > 0) {
            sync.scale(rs, 0).await?;
            scaled = true;
        }
        if !scaled {
            if old_pods_running(&ctx, &d, new_rs.as_ref(), &old).await? {
                requeue = Some(RECREATE_POLL);
            } else {
                let (mut rs, found) = sync
                    .ensure_new(new_rs.take(), &old, desired_replicas(&d))
                    .await?;
                sync.scale(&mut rs, desired_replicas(&d)).await?;
                new_rs = Some(rs);
                how = Some(found);
            }
        }
    } else {
        let desired = desired_replicas(&d);
        let old_states: Vec<RsState> = old.iter().map(RsState::of).collect();
        let all_total: i32 = old_states.iter().map(|r| r.replicas).sum();
        let initial = rollout::new_rs_replicas(desired, surge, 0, all_total);
        let (mut rs, found) = sync.ensure_new(new_rs.take(), &old, initial).await?;
        for (target, size) in rollout::rolling_step(
            desired,
            surge,
            max_unavailable,
            &RsState::of(&rs),
            &old_states,
        ) {
            if target == rs.name_any() {
                sync.scale(&mut rs, size).await?;
            } else if let Some(o) = old.iter_mut().find(|o| o.name_any() == target) {
                sync.scale(o, size).await?;
            }
        }
        new_rs = Some(rs);
        how = Some(found);
    }

    // The Deployment carries the revision of its new ReplicaSet (`SetDeploymentRevision`).
    let mut current = (*d).clone();
    if let Some(revision) = new_rs
        .as_ref()
        .and_then(|rs| rs.annotations().get(REVISION))
        .filter(|r| d.annotations().get(REVISION) != Some(*r))
    {
        let patch = serde_json::json!({"metadata": {"annotations": {REVISION: revision}}});
        current = d_api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }

    let complete_before = d
        .status
        .as_ref()
        .is_some_and(|s| status::is_complete(&d, s));
    if complete_before && !deleting {
        let limit = spec.revision_history_limit.unwrap_or(10);
        for victim in rollout::history_to_delete(&old, limit) {
            let rs_uid = old
                .iter()
                .find(|o| o.name_any() == victim)
                .and_then(|o| o.metadata.uid.clone());
            io::delete(&rs_api, &victim, rs_uid.as_deref(), None).await?;
        }
    }

    let all: Vec<&ReplicaSet> = new_rs.iter().chain(old.iter()).collect();
    let mut new_status = if deleting || paused {
        let mut s = status::calculate(&d, &all, new_rs.as_ref(), max_unavailable, now);
        if let Some(cond) = status::paused_condition(&d, now) {
            status::set_condition(&mut s, cond);
        }
        s
    } else {
        status::rollout_status(
            &d,
            &all,
            new_rs.as_ref(),
            how.as_ref(),
            max_unavailable,
            now,
        )
    };
    if new_status.conditions.as_ref().is_some_and(Vec::is_empty) {
        new_status.conditions = None;
    }
    if d.status.as_ref() != Some(&new_status) {
        let mut updated = current;
        updated.status = Some(new_status.clone());
        d_api
            .replace_status(&name, &PostParams::default(), &updated)
            .await?;
    }
    let recheck =
        status::recheck_after(&d, &new_status, now).and_then(|a| Duration::try_from(a).ok());
    Ok(match requeue.into_iter().chain(recheck).min() {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// Are pods of the old ReplicaSets still around (`oldPodsRunning`)? Finished pods do not count;
/// terminating ones do, so Recreate never runs old and new pods side by side.
async fn old_pods_running(
    ctx: &Context<()>,
    d: &Deployment,
    new_rs: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> Result<bool, Error> {
    if old
        .iter()
        .any(|rs| rs.status.as_ref().is_some_and(|s| s.replicas > 0))
    {
        return Ok(true);
    }
    let Some(spec) = d.spec.as_ref() else {
        return Ok(false);
    };
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &d.namespace().unwrap_or_default());
    let list = pod_api
        .list(&ListParams::default().labels(&labels::to_query(&spec.selector)))
        .await?;
    let old_uids: Vec<&str> = old
        .iter()
        .filter_map(|rs| rs.metadata.uid.as_deref())
        .collect();
    let new_uid = new_rs.and_then(|rs| rs.metadata.uid.as_deref());
    Ok(list.items.iter().any(|pod| {
        let owner = pods::controller_ref(&pod.metadata).map(|r| r.uid.as_str());
        owner.is_some_and(|o| old_uids.contains(&o) && Some(o) != new_uid)
            && !pods::is_terminal(pod)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn deployment() -> Deployment {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("d-uid".into()),
                annotations: Some(
                    [
                        ("team".to_string(), "a".to_string()),
                        (
                            "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                            "{}".to_string(),
                        ),
                        (REVISION.to_string(), "7".to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(3),
                selector: LabelSelector {
                    match_labels: Some(labels.clone()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..Default::default()
                    }),
                    spec: None,
                },
                min_ready_seconds: Some(5),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn new_replicaset_copies_the_template_and_adds_the_hash() {
        let d = deployment();
        let rs = new_replicaset(&d, "abc", 2, BTreeMap::new()).unwrap();
        assert_eq!(rs.metadata.name.as_deref(), Some("web-abc"));
        let spec = rs.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(2));
        assert_eq!(spec.min_ready_seconds, Some(5));
        let hash_label = |l: &BTreeMap<String, String>| l.get(POD_TEMPLATE_HASH).cloned();
        assert_eq!(
            hash_label(spec.selector.match_labels.as_ref().unwrap()).as_deref(),
            Some("abc")
        );
        assert_eq!(
            hash_label(rs.metadata.labels.as_ref().unwrap()).as_deref(),
            Some("abc")
        );
        let template = spec.template.as_ref().unwrap();
        assert!(templates_equal(
            template,
            &d.spec.as_ref().unwrap().template
        ));
        let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("Deployment", Some(true), Some(true))
        );

        let mut changed = d.spec.as_ref().unwrap().template.clone();
        changed
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert("v".into(), "2".into());
        assert!(!templates_equal(template, &changed));
    }

    #[test]
    fn annotations_copy_the_deployment_raise_the_revision_and_set_replicas() {
        let d = deployment();
        let created = new_rs_annotations(&d, &BTreeMap::new(), 3, Some((3, 4)));
        let want: BTreeMap<String, String> = [
            ("team", "a"),
            (REVISION, "3"),
            (DESIRED_REPLICAS, "3"),
            (MAX_REPLICAS, "4"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(created, want);
        // A newer revision is kept; an older one raised.
        let mut current = created.clone();
        current.insert(REVISION.into(), "5".into());
        assert_eq!(
            new_rs_annotations(&d, &current, 3, None)
                .get(REVISION)
                .map(String::as_str),
            Some("5")
        );
        assert_eq!(
            new_rs_annotations(&d, &current, 6, None)
                .get(REVISION)
                .map(String::as_str),
            Some("6")
        );
    }
}
