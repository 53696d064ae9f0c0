//! The garbage collector (kube-controller-manager `garbagecollector`): a graph of every object of
//! every served kind that can be listed, watched and deleted (custom resources included; the
//! kinds are re-discovered periodically and whenever a CRD changes), indexed by ownerReference
//! uid. Objects whose owners are all gone are deleted (Background); owners deleted in the
//! foreground wait for their blocking dependents; orphaning strips ownerReferences. Decisions
//! are in [`decide`]; an owner missing from the graph is verified with a live read before a
//! dependent is deleted, as upstream does, because the graph may lag.

pub mod decide;
pub mod graph;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::{Notify, mpsc};
use tokio::task::AbortHandle;

use crate::discovery::{Served, served};
use crate::error::{is_conflict, is_not_found};
use crate::retry::Backoff;
use crate::{Error, finalizers};
use decide::{DependentAction, FOREGROUND, ORPHAN, OwnerAction, OwnerState, Propagation};
use graph::{Graph, Node};

/// How often the served kinds are re-discovered without a CRD event, and the full resync period.
const RESYNC: Duration = Duration::from_secs(30);

/// Kinds the collector never watches: Events are many, short-lived and own nothing (upstream
/// ignores them too).
fn ignored(s: &Served) -> bool {
    s.ar.plural == "events" && (s.ar.group.is_empty() || s.ar.group == "events.k8s.io")
}

fn watchable(s: &Served) -> bool {
    !ignored(s) && s.supports("list") && s.supports("watch") && s.supports("delete")
}

fn resource_key(s: &Served) -> String {
    format!("{}/{}", s.ar.group, s.ar.plural)
}

#[derive(Default)]
struct State {
    graph: Graph,
    queued: HashSet<String>,
    /// Every served kind by (group, kind), to resolve ownerReferences.
    kinds: HashMap<(String, String), Arc<Served>>,
    watchers: HashMap<String, (Arc<Served>, AbortHandle)>,
    /// Watched kinds whose initial list has not arrived yet.
    unsynced: HashSet<String>,
}

struct Gc {
    client: Client,
    state: Mutex<State>,
    queue: mpsc::UnboundedSender<String>,
    rediscover: Notify,
    backoff: Backoff,
}

impl Gc {
    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn enqueue(&self, uids: impl IntoIterator<Item = String>) {
        let mut state = self.lock();
        for uid in uids {
            if state.queued.insert(uid.clone()) {
                let _ = self.queue.send(uid);
            }
        }
    }

    fn api(&self, resource: &Served, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace.filter(|_| resource.namespaced) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource.ar),
            None => Api::all_with(self.client.clone(), &resource.ar),
        }
    }
}

/// Run the garbage collector until the process ends.
pub async fn run_gc(client: Client) -> Result<(), Error> {
    let (tx, rx) = mpsc::unbounded_channel();
    let gc = Arc::new(Gc {
        client,
        state: Mutex::new(State::default()),
        queue: tx,
        rediscover: Notify::new(),
        backoff: Backoff::default(),
    });
    tokio::join!(
        discover(gc.clone()),
        watch_crds(gc.clone()),
        work(gc.clone(), rx),
        resync(gc)
    );
    Ok(())
}

/// Keep one watcher per watchable kind: start new kinds, stop vanished ones.
async fn discover(gc: Arc<Gc>) {
    loop {
        match served(&gc.client).await {
            Ok(list) => apply_discovery(&gc, list),
            Err(e) => tracing::warn!(error = %e, "garbage collector discovery"),
        }
        tokio::select! {
            _ = tokio::time::sleep(RESYNC) => {}
            _ = gc.rediscover.notified() => {}
        }
    }
}

fn apply_discovery(gc: &Arc<Gc>, list: Vec<Served>) {
    let mut touched = Vec::new();
    {
        let mut state = gc.lock();
        state.kinds = list
            .iter()
            .map(|s| ((s.ar.group.clone(), s.ar.kind.clone()), Arc::new(s.clone())))
            .collect();
        let wanted: HashMap<String, Served> = list
            .into_iter()
            .filter(watchable)
            .map(|s| (resource_key(&s), s))
            .collect();
        let gone: Vec<String> = state
            .watchers
            .iter()
            .filter(|(k, (s, _))| wanted.get(*k) != Some(s.as_ref()))
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            if let Some((served, handle)) = state.watchers.remove(&key) {
                handle.abort();
                state.unsynced.remove(&key);
                for uid in state.graph.uids_of(&served) {
                    touched.extend(state.graph.remove(&uid));
                }
            }
        }
        for (key, s) in wanted {
            if state.watchers.contains_key(&key) {
                continue;
            }
            let served = Arc::new(s);
            let handle = tokio::spawn(watch_kind(gc.clone(), served.clone())).abort_handle();
            state.unsynced.insert(key.clone());
            state.watchers.insert(key, (served, handle));
        }
    }
    gc.enqueue(touched);
}

/// Feed one kind's objects into the graph. After every (re)list, objects of the kind that were
/// not listed are dropped: they were deleted while the watch was down.
async fn watch_kind(gc: Arc<Gc>, served: Arc<Served>) {
    let api = Api::<DynamicObject>::all_with(gc.client.clone(), &served.ar);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listed: HashSet<String> = HashSet::new();
    while let Some(event) = events.next().await {
        let touched = match event {
            Ok(Event::Apply(obj)) => gc.lock().graph.upsert(node(&served, obj)),
            Ok(Event::InitApply(obj)) => {
                let n = node(&served, obj);
                listed.insert(n.uid().to_string());
                gc.lock().graph.upsert(n)
            }
            Ok(Event::Delete(obj)) => gc
                .lock()
                .graph
                .remove(obj.metadata.uid.as_deref().unwrap_or("")),
            Ok(Event::Init) => {
                listed.clear();
                Vec::new()
            }
            Ok(Event::InitDone) => {
                let mut state = gc.lock();
                state.unsynced.remove(&resource_key(&served));
                let stale: Vec<String> = state
                    .graph
                    .uids_of(&served)
                    .into_iter()
                    .filter(|u| !listed.contains(u))
                    .collect();
                stale.iter().flat_map(|u| state.graph.remove(u)).collect()
            }
            Err(e) => {
                tracing::debug!(resource = %served.ar.plural, error = %e, "garbage collector watch");
                Vec::new()
            }
        };
        gc.enqueue(touched);
    }
}

fn node(served: &Arc<Served>, obj: DynamicObject) -> Node {
    Node {
        resource: served.clone(),
        meta: obj.metadata,
    }
}

/// A new, changed or removed CRD changes the served kinds: re-discover now.
async fn watch_crds(gc: Arc<Gc>) {
    let api = Api::<CustomResourceDefinition>::all(gc.client.clone());
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        if matches!(
            event,
            Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone)
        ) {
            gc.rediscover.notify_one();
        }
    }
}

/// Look at every owned or deleting object again now and then, as upstream's resync does.
async fn resync(gc: Arc<Gc>) {
    loop {
        tokio::time::sleep(RESYNC).await;
        let uids = gc.lock().graph.interesting();
        gc.enqueue(uids);
    }
}

/// The single worker: one object at a time, failures retried with per-object backoff.
async fn work(gc: Arc<Gc>, mut queue: mpsc::UnboundedReceiver<String>) {
    while let Some(uid) = queue.recv().await {
        gc.lock().queued.remove(&uid);
        match process(&gc, &uid).await {
            Ok(true) => gc.backoff.succeeded(&uid),
            Ok(false) => retry_later(&gc, uid),
            Err(e) => {
                tracing::warn!(uid = %uid, error = %e, "garbage collector");
                retry_later(&gc, uid);
            }
        }
    }
}

fn retry_later(gc: &Arc<Gc>, uid: String) {
    let delay = gc.backoff.failed(&uid);
    let gc = gc.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        gc.enqueue([uid]);
    });
}

/// Handle one object. `Ok(false)`: not decidable yet, look again later.
async fn process(gc: &Arc<Gc>, uid: &str) -> Result<bool, Error> {
    let (node, dependents, synced) = {
        let state = gc.lock();
        let Some(node) = state.graph.get(uid).cloned() else {
            return Ok(true);
        };
        let deps: Vec<Node> = state
            .graph
            .dependents_of(uid)
            .into_iter()
            .cloned()
            .collect();
        (node, deps, state.unsynced.is_empty())
    };
    if node.is_deleting() && (node.has_finalizer(ORPHAN) || node.has_finalizer(FOREGROUND)) {
        // Until every kind is listed, the graph may miss dependents.
        if !synced {
            return Ok(false);
        }
        let refs: Vec<&Node> = dependents.iter().collect();
        match decide::owner_action(&node, &refs) {
            OwnerAction::Nothing | OwnerAction::Wait => {}
            OwnerAction::Orphan(uids) => {
                for d in dependents
                    .iter()
                    .filter(|d| uids.iter().any(|u| u == d.uid()))
                {
                    remove_owner_refs(gc, d, &[uid.to_string()]).await?;
                }
            }
            OwnerAction::ProcessDependents(uids) => gc.enqueue(uids),
            OwnerAction::RemoveFinalizer(f) => {
                let api = gc.api(&node.resource, node.meta.namespace.as_deref());
                finalizers::remove_from(&api, &node.meta, f).await?;
            }
        }
        return Ok(true);
    }
    if node.owners().is_empty() {
        return Ok(true);
    }
    let mut owners = Vec::new();
    for r in node.owners() {
        owners.push((r.uid.clone(), owner_state(gc, &node, r).await?));
    }
    match decide::dependent_action(&node, &owners, !dependents.is_empty()) {
        DependentAction::Nothing => Ok(true),
        DependentAction::Retry => Ok(false),
        DependentAction::Delete(policy) => {
            delete(gc, &node, policy).await?;
            Ok(true)
        }
        DependentAction::RemoveOwnerRefs(uids) => {
            remove_owner_refs(gc, &node, &uids).await?;
            Ok(true)
        }
    }
}

/// The graph's knowledge of the owner when it has it; otherwise a live read (by name, in the
/// dependent's namespace for namespaced kinds), so that a lagging watch never gets an object
/// collected.
async fn owner_state(gc: &Gc, dependent: &Node, r: &OwnerReference) -> Result<OwnerState, Error> {
    let from = |meta: &ObjectMeta| {
        let foreground = meta.finalizers.iter().flatten().any(|f| f == FOREGROUND);
        if meta.deletion_timestamp.is_some() && foreground {
            OwnerState::WaitingForDependents
        } else {
            OwnerState::Present
        }
    };
    let group = r
        .api_version
        .rsplit_once('/')
        .map_or("", |(g, _)| g)
        .to_string();
    let kind = {
        let state = gc.lock();
        if let Some(owner) = state.graph.get(&r.uid) {
            return Ok(from(&owner.meta));
        }
        state.kinds.get(&(group, r.kind.clone())).cloned()
    };
    let Some(kind) = kind else {
        // Discovery lags the owner's kind: a CRD's event can trigger discovery before the API
        // serves the new kind, and nothing else would look again before the next resync
        // (30 s). Ask for discovery now, as the dependent is retried.
        gc.rediscover.notify_one();
        return Ok(OwnerState::Unknown);
    };
    let ns = dependent.meta.namespace.as_deref();
    if kind.namespaced && ns.is_none() {
        // A cluster-scoped object cannot be owned by a namespaced one (upstream: invalid, absent).
        return Ok(OwnerState::Absent);
    }
    match gc.api(&kind, ns).get_opt(&r.name).await? {
        None => Ok(OwnerState::Absent),
        Some(o) if o.metadata.uid.as_deref() != Some(r.uid.as_str()) => Ok(OwnerState::Absent),
        Some(o) => Ok(from(&o.metadata)),
    }
}

async fn delete(gc: &Gc, node: &Node, policy: Propagation) -> Result<(), Error> {
    let api = gc.api(&node.resource, node.meta.namespace.as_deref());
    let dp = DeleteParams {
        propagation_policy: Some(match policy {
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
            Propagation::Orphan => PropagationPolicy::Orphan,
        }),
        preconditions: Some(Preconditions {
            uid: node.meta.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let name = node.meta.name.as_deref().unwrap_or_default();
    tracing::info!(kind = %node.resource.ar.kind, namespace = ?node.meta.namespace, name, policy = policy.as_str(), "garbage collector deletes");
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        // Gone already, or replaced by a namesake (uid precondition).
        Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Drop the references to `owners` from an object, guarded by its resourceVersion.
async fn remove_owner_refs(gc: &Gc, node: &Node, owners: &[String]) -> Result<(), Error> {
    let remaining: Vec<&OwnerReference> = node
        .owners()
        .iter()
        .filter(|r| !owners.contains(&r.uid))
        .collect();
    let refs = if remaining.is_empty() {
        json!(null)
    } else {
        json!(remaining)
    };
    let patch = json!({
        "metadata": { "ownerReferences": refs, "resourceVersion": node.meta.resource_version },
    });
    let api = gc.api(&node.resource, node.meta.namespace.as_deref());
    let name = node.meta.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
