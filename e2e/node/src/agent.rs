//! The pod watch and the per-pod workers: one task per pod uid gets every new version of its
//! Pod; the pod's containers live and die with that task.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::worker::{PodWorker, WorkerMessage};
use crate::{Error, NodeOptions};

struct WorkerHandle {
    tx: mpsc::UnboundedSender<WorkerMessage>,
    task: JoinHandle<()>,
}

/// Run the pods bound to `options.node_name` until `shutdown` turns true; then stop every
/// container (SIGTERM, SIGKILL after the pod's grace period, capped) and tear down every
/// sandbox before returning.
pub async fn run(
    client: Client,
    options: NodeOptions,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Error> {
    let options = Arc::new(options);
    let pods: Api<Pod> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", options.node_name));
    let mut stream = watcher::watcher(pods, config).boxed();
    let mut workers: HashMap<String, WorkerHandle> = HashMap::new();
    let mut seen_in_relist: Option<Vec<String>> = None;
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            event = stream.next() => {
                let Some(event) = event else { return Err(Error::Watch("the pod watch ended".into())) };
                match event {
                    Ok(Event::Apply(pod) | Event::InitApply(pod)) => {
                        if let Some(seen) = seen_in_relist.as_mut() {
                            seen.push(uid_of(&pod));
                        }
                        deliver(&client, &options, &mut workers, pod);
                    }
                    Ok(Event::Delete(pod)) => {
                        if let Some(w) = workers.get(&uid_of(&pod)) {
                            let _ = w.tx.send(WorkerMessage::Gone);
                        }
                    }
                    Ok(Event::Init) => seen_in_relist = Some(Vec::new()),
                    Ok(Event::InitDone) => {
                        // Pods that vanished while the watch was down.
                        if let Some(seen) = seen_in_relist.take() {
                            for (uid, w) in &workers {
                                if !seen.contains(uid) {
                                    let _ = w.tx.send(WorkerMessage::Gone);
                                }
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "pod watch error; kube-runtime retries"),
                }
                workers.retain(|_, w| !w.task.is_finished());
            }
        }
    }
    tracing::info!(pods = workers.len(), "node agent stopping its pods");
    for w in workers.values() {
        let _ = w.tx.send(WorkerMessage::Shutdown);
    }
    for (_, w) in workers {
        let _ = w.task.await;
    }
    Ok(())
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn deliver(
    client: &Client,
    options: &Arc<NodeOptions>,
    workers: &mut HashMap<String, WorkerHandle>,
    pod: Pod,
) {
    let uid = uid_of(&pod);
    if uid.is_empty() {
        return;
    }
    if let Some(w) = workers.get(&uid)
        && !w.task.is_finished()
    {
        let _ = w.tx.send(WorkerMessage::Update(Box::new(pod)));
        return;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let worker = PodWorker::new(client.clone(), options.clone(), pod);
    let task = tokio::spawn(worker.run(rx));
    workers.insert(uid, WorkerHandle { tx, task });
}
