//! Watching a member that is starting, so the step that waits for it follows the moment it is
//! ready instead of at the next look (issue 24: "promotion driven by watching the learner
//! instead of polling"). Nothing in the Kubernetes API changes when a seed starts serving, a
//! learner's raft catches up or a joining voter publishes itself: before, only the half-second
//! look found it, on average about 0.4 s late per starting member (the cluster and restore
//! benches), while by hand `member promote` is retried every 100 ms.
//!
//! While a pass waits on one member ([`watch_target`]), one task per cluster asks that member
//! directly: a status request (an etcd that is still starting accepts the connection and
//! answers once it serves, so one request waits for exactly that; a refused connection is
//! asked again every [`POLL`]) and, while raft has not caught it up, its metrics every
//! [`POLL`]. The first change from what the pass saw triggers a reconcile of the cluster and
//! ends the task. The watch only hastens a reconcile: it decides nothing, and the looks go on
//! as before, so a watch that fails or ends changes nothing but timing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use etcd_api::EtcdCluster;
use etcd_member::plan::{Action, WaitReason};
use etcd_member::state::{Membership, Observed};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::AbortHandle;

/// How often a member that refused the connection, or whose raft has not caught it up, is
/// asked again: as often as the by-hand baselines retry.
pub const POLL: Duration = Duration::from_millis(100);

/// A watch ends after this (the looks go on regardless): longer than a learner copying a
/// large database takes to turn ready would only keep a task around.
pub const WATCH_FOR: Duration = Duration::from_secs(120);

/// The member one cluster's pass waits on, and what that pass saw of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchTarget {
    /// Member name.
    pub member: String,
    /// Its client URL as the pass asked it, which gave no answer.
    pub client_url: String,
    /// Its metrics URL, etcd member ID and whether the member list has it as a learner, when
    /// the pass read its raft progress there and found it not caught up (etcd's publish
    /// window: `Observed::joining`). The watch counts it caught up exactly as the pass does
    /// (`record_raft_progress`), so its trigger never finds the pass seeing it otherwise.
    pub metrics: Option<Metrics>,
}

/// Where and as whom a member's raft progress is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metrics {
    /// `http://<member>:2381`.
    pub url: String,
    /// The etcd member ID it must report.
    pub id: u64,
    /// The member list has it as a learner.
    pub learner: bool,
}

/// The member `action` waits on, if the pass found it silent (a member that answers but is not
/// healthy yet is left to the looks: an answer would trigger at once, again and again).
/// `unanswered`: the client URLs that gave no status answer in the pass.
pub fn watch_target(
    action: &Action,
    observed: &Observed,
    unanswered: &[String],
) -> Option<WatchTarget> {
    let member = match action {
        Action::Wait(WaitReason::SeedStarting) => observed.cluster.member_name(0),
        Action::Wait(
            WaitReason::LearnerCatchingUp { member } | WaitReason::MemberJoining { member },
        ) => member.clone(),
        _ => return None,
    };
    // The URL as the pass asked it (its scheme and port follow the cluster's TLS).
    let host = format!("://{}:", observed.cluster.member_host(&member));
    let client_url = unanswered.iter().find(|url| url.contains(&host))?.clone();
    let pod = observed.pods.get(&member)?;
    if pod.terminating {
        return None;
    }
    // Raft progress is worth watching only where the pass read it (a member within etcd's
    // publish window) and found it behind: then catching up is what the planner acts on.
    let listed = match &observed.membership {
        Membership::Known(members) => members
            .iter()
            .find(|m| m.member_name(&observed.cluster).as_deref() == Some(member.as_str()))
            .map(|m| (m.id, m.learner)),
        Membership::Unknown => None,
    };
    let metrics = listed
        .filter(|_| observed.within_publish_window(pod) && !pod.raft_caught_up)
        .map(|(id, learner)| Metrics {
            url: observed.cluster.metrics_url(&member),
            id,
            learner,
        });
    Some(WatchTarget {
        member,
        client_url,
        metrics,
    })
}

/// One watch task per cluster (by UID), and where their triggers go.
#[derive(Clone, Default)]
pub struct MemberWatches {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    trigger: Option<UnboundedSender<ObjectRef<EtcdCluster>>>,
    running: HashMap<String, (WatchTarget, AbortHandle)>,
}

impl MemberWatches {
    /// The stream of clusters to reconcile now (for `Controller::reconcile_on`); the watches
    /// trigger nothing until it is taken.
    pub fn triggers(&self) -> UnboundedReceiver<ObjectRef<EtcdCluster>> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        self.lock().trigger = Some(sender);
        receiver
    }

    /// After a pass of `cluster`: watch `target` (keeping a running watch of the same target
    /// as it is), or stop watching when there is none.
    pub fn set(
        &self,
        cluster: &EtcdCluster,
        target: Option<WatchTarget>,
        tls: Option<&etcd_admin::ClientTls>,
    ) {
        let uid = cluster.uid().unwrap_or_default();
        let mut inner = self.lock();
        inner.running.retain(|_, (_, task)| !task.is_finished());
        if let Some((running, task)) = inner.running.get(&uid) {
            if Some(running) == target.as_ref() {
                return;
            }
            task.abort();
            inner.running.remove(&uid);
        }
        let (Some(target), Some(trigger)) = (target, inner.trigger.clone()) else {
            return;
        };
        tracing::debug!(member = %target.member, url = %target.client_url,
            metrics = target.metrics.is_some(), "watching a starting member");
        let reference = ObjectRef::from_obj(cluster);
        let task = tokio::spawn(watch(target.clone(), tls.cloned(), trigger, reference));
        inner.running.insert(uid, (target, task.abort_handle()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Waits until `target` answers a status request or raft reports it caught up, then triggers
/// a reconcile of its cluster; gives up after [`WATCH_FOR`].
async fn watch(
    target: WatchTarget,
    tls: Option<etcd_admin::ClientTls>,
    trigger: UnboundedSender<ObjectRef<EtcdCluster>>,
    cluster: ObjectRef<EtcdCluster>,
) {
    let deadline = tokio::time::Instant::now() + WATCH_FOR;
    let answers = async {
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if etcd_admin::member_status_tls(&target.client_url, left, tls.as_ref())
                .await
                .is_ok()
            {
                return "answered";
            }
            tokio::time::sleep(POLL).await;
        }
    };
    let caught_up = async {
        let Some(metrics) = &target.metrics else {
            return std::future::pending().await;
        };
        let urls = std::slice::from_ref(&metrics.url);
        loop {
            tokio::time::sleep(POLL).await;
            let read = etcd_admin::raft_progress_each(urls, POLL * 5).await;
            // As the pass counts it (`record_raft_progress`).
            if read.first().is_some_and(|progress| {
                progress.as_ref().is_ok_and(|p| {
                    crate::observe::own_raft_caught_up(p, metrics.id, metrics.learner)
                })
            }) {
                return "caught up in raft";
            }
        }
    };
    let changed = tokio::select! {
        signal = answers => signal,
        signal = caught_up => signal,
        () = tokio::time::sleep_until(deadline) => return,
    };
    tracing::debug!(member = %target.member, changed, "starting member changed: reconcile now");
    let _ = trigger.send(cluster);
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_member::fixtures::{Build, cluster, healthy, learner, main, name};

    const NOW: i64 = 1_800_000_000;

    fn url(ordinal: u32) -> String {
        main().client_url(&name(ordinal))
    }

    /// A seed and a learner, the learner silent and its etcd started `ago` seconds before.
    fn catching_up(ago: i64) -> Observed {
        let mut observed = cluster(3, "3.6.0")
            .members(vec![healthy(0, "3.6.0", true), learner(1, false)])
            .pods(&[0, 1]);
        observed.wall_clock = Some(NOW);
        observed.pods.get_mut(&name(1)).unwrap().etcd_started_at = Some(NOW - ago);
        observed
    }

    /// Issue 24: a learner found silent is watched on its status and, while raft has not
    /// caught it up within etcd's publish window, on its metrics too.
    #[test]
    fn a_silent_learner_is_watched_on_its_status_and_its_raft_progress() {
        let wait = Action::Wait(WaitReason::LearnerCatchingUp { member: name(1) });
        assert_eq!(
            watch_target(&wait, &catching_up(2), &[url(1)]),
            Some(WatchTarget {
                member: name(1),
                client_url: url(1),
                metrics: Some(Metrics {
                    url: main().metrics_url(&name(1)),
                    id: 0xa1,
                    learner: true,
                }),
            })
        );
        // Past the window (the planner no longer reads its metrics), or already caught up in
        // raft (waiting for it to serve): its status only.
        let late = watch_target(&wait, &catching_up(60), &[url(1)]).unwrap();
        assert_eq!(late.metrics, None);
        let mut caught_up = catching_up(2);
        caught_up.pods.get_mut(&name(1)).unwrap().raft_caught_up = true;
        assert_eq!(
            watch_target(&wait, &caught_up, &[url(1)]).unwrap().metrics,
            None
        );
        // It answered in the pass (not healthy yet): left to the looks, or an answer would
        // trigger again at once. Its Pod going: nothing to wait for.
        assert_eq!(watch_target(&wait, &catching_up(2), &[url(0)]), None);
        let mut going = catching_up(2);
        going.pods.get_mut(&name(1)).unwrap().terminating = true;
        assert_eq!(watch_target(&wait, &going, &[url(1)]), None);
    }

    /// The URL watched is the one the pass asked (a TLS cluster's is https://).
    #[test]
    fn the_url_watched_is_the_one_asked() {
        let wait = Action::Wait(WaitReason::MemberJoining { member: name(1) });
        let asked = url(1).replace("http://", "https://");
        assert_eq!(
            watch_target(&wait, &catching_up(2), std::slice::from_ref(&asked))
                .unwrap()
                .client_url,
            asked
        );
    }

    /// The seed while it starts is watched; any other action ends the watch.
    #[test]
    fn only_waits_on_a_starting_member_are_watched() {
        let seed = cluster(3, "3.6.0").pods(&[0]);
        assert_eq!(
            watch_target(&Action::Wait(WaitReason::SeedStarting), &seed, &[url(0)])
                .map(|t| t.member),
            Some(name(0))
        );
        let observed = catching_up(2);
        for other in [
            Action::Converged,
            Action::Wait(WaitReason::PodNotReady { member: name(1) }),
            Action::PromoteLearner {
                member: name(1),
                id: 0xa1,
            },
        ] {
            assert_eq!(
                watch_target(&other, &observed, &[url(1)]),
                None,
                "{other:?}"
            );
        }
    }
}
