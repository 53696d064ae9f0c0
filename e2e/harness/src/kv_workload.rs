//! Concurrent etcd clients whose every operation is recorded in a [`History`] (I/O: this is the
//! driver; the checks are pure, in [`crate::history`] and [`crate::linearizability`]).
//!
//! [`KvWorkload::start`] runs a few clients, each its own task and connection, doing puts, gets
//! and compare-and-swap transactions on a handful of keys so that they conflict. Each client
//! pauses between operations (at most 25 a second; fewer with the requests' latency) to keep the load light next to a control plane.
//! [`KvWorkload::finish`] stops them, reads every key (recorded too), checks the history for
//! linearizability and every acknowledged write against the final values, and returns a
//! [`WorkloadReport`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, TlsOptions, Txn, TxnOp};

use crate::history::{
    ClientId, Counts, History, LostWrite, Outcome, Recorder, Request, Response, lost_writes,
};
use crate::linearizability::{self, Verdict};

/// How the clients behave.
#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    pub clients: u32,
    /// Keys under this prefix: `<prefix>0` .. `<prefix><keys - 1>`.
    pub key_prefix: String,
    pub keys: u32,
    /// Pause between one client's operations.
    pub pause: Duration,
    /// Per-request timeout; a request past it has an unknown outcome.
    pub request_timeout: Duration,
    /// Budget of the linearizability search.
    pub check_budget: Duration,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            clients: 3,
            key_prefix: "history/k".into(),
            keys: 4,
            // ~25 ops/s per client when requests are fast.
            pause: Duration::from_millis(40),
            request_timeout: Duration::from_secs(5),
            check_budget: Duration::from_secs(120),
        }
    }
}

/// The reader of [`KvWorkload::read_all`] and of the final reads.
pub const READER: ClientId = 0;

/// Clients running against an etcd cluster.
pub struct KvWorkload {
    config: WorkloadConfig,
    endpoints: Vec<String>,
    tls: Option<TlsOptions>,
    recorder: Recorder,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl KvWorkload {
    /// Starts the clients on `endpoints` (with `tls` for `https://` ones). The keys must be
    /// absent: the checker's register starts empty.
    pub fn start(
        endpoints: Vec<String>,
        tls: Option<TlsOptions>,
        config: WorkloadConfig,
    ) -> KvWorkload {
        let recorder = Recorder::new();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let tasks = (1..=config.clients)
            .map(|id| {
                let client = Worker {
                    id,
                    endpoints: endpoints.clone(),
                    tls: tls.clone(),
                    config: config.clone(),
                    recorder: recorder.clone(),
                };
                tokio::spawn(client.run(stopped.clone()))
            })
            .collect();
        KvWorkload {
            config,
            endpoints,
            tls,
            recorder,
            stop,
            tasks,
        }
    }

    /// Counts of the operations recorded so far.
    pub fn counts(&self) -> Counts {
        self.recorder.counts()
    }

    /// Reads every key once (recorded, so the final check covers these reads too), retrying a
    /// key whose read failed for up to `patience`. Returns the counts so far; panics if a key
    /// could not be read in time.
    pub async fn read_all(&self, patience: Duration) -> Counts {
        self.read_keys(patience).await;
        self.counts()
    }

    /// Stops the clients, reads every key, and checks the whole history.
    pub async fn finish(mut self, patience: Duration) -> WorkloadReport {
        let _ = self.stop.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
        let finals = self.read_keys(patience).await;
        let history = self.recorder.history();
        let checked = linearizability::check(&history, self.config.check_budget);
        let lost = lost_writes(&history, &finals);
        WorkloadReport {
            counts: history.counts(),
            checked,
            lost,
            history,
        }
    }

    /// One successful linearizable read of each key.
    async fn read_keys(&self, patience: Duration) -> BTreeMap<String, Option<String>> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut finals = BTreeMap::new();
        let mut client: Option<Client> = None;
        for key in keys(&self.config) {
            loop {
                let pending = self
                    .recorder
                    .invoke(READER, Request::Get { key: key.clone() });
                if client.is_none() {
                    client = connect(&self.endpoints, &self.tls, &self.config).await.ok();
                }
                let outcome = match &mut client {
                    Some(c) => get(c, &key, self.config.request_timeout).await,
                    None => Outcome::Failed("not connected".into()),
                };
                let read = match &outcome {
                    Outcome::Ok(Response::Get(v)) => Some(v.clone()),
                    _ => None,
                };
                pending.finish(outcome);
                if let Some(value) = read {
                    finals.insert(key.clone(), value);
                    break;
                }
                client = None;
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no successful read of {key} within {patience:?}: {}",
                    self.recorder
                        .history()
                        .ops
                        .last()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        finals
    }
}

fn keys(config: &WorkloadConfig) -> Vec<String> {
    (0..config.keys)
        .map(|k| format!("{}{k}", config.key_prefix))
        .collect()
}

async fn connect(
    endpoints: &[String],
    tls: &Option<TlsOptions>,
    config: &WorkloadConfig,
) -> Result<Client, etcd_client::Error> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(config.request_timeout);
    if let Some(tls) = tls {
        options = options.with_tls(tls.clone());
    }
    Client::connect(endpoints, Some(options)).await
}

async fn get(client: &mut Client, key: &str, timeout: Duration) -> Outcome {
    match tokio::time::timeout(timeout, client.get(key, None)).await {
        Ok(Ok(response)) => {
            let value = response
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
            Outcome::Ok(Response::Get(value))
        }
        // A read that failed changed nothing: left out of the check either way.
        Ok(Err(e)) => Outcome::Failed(e.to_string()),
        Err(_) => Outcome::Failed("timeout".into()),
    }
}

struct Worker {
    id: ClientId,
    endpoints: Vec<String>,
    tls: Option<TlsOptions>,
    config: WorkloadConfig,
    recorder: Recorder,
}

impl Worker {
    async fn run(self, mut stopped: tokio::sync::watch::Receiver<bool>) {
        let keys = keys(&self.config);
        let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(self.id).wrapping_mul(0x1234_5678_9ABC);
        let mut next = move |bound: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % bound
        };
        // The last value this client saw per key: what its compare-and-swaps expect.
        let mut seen: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut client: Option<Client> = None;
        let mut n = 0u64;
        while !*stopped.borrow() {
            n += 1;
            let key = keys[next(keys.len() as u64) as usize].clone();
            // Unique: a value read names its write.
            let value = format!("c{}-{n}", self.id);
            let request = match next(10) {
                0..=3 => Request::Put { key, value },
                4..=6 => Request::Get { key },
                _ => Request::Cas {
                    expected: seen.get(&key).cloned().flatten(),
                    key,
                    new: value,
                },
            };
            let pending = self.recorder.invoke(self.id, request.clone());
            if client.is_none() {
                client = connect(&self.endpoints, &self.tls, &self.config).await.ok();
            }
            let outcome = match &mut client {
                Some(c) => self.send(c, &request).await,
                // Not sent: this operation is definitely not applied.
                None => Outcome::Failed("not connected".into()),
            };
            match (&request, &outcome) {
                (Request::Get { key }, Outcome::Ok(Response::Get(v))) => {
                    seen.insert(key.clone(), v.clone());
                }
                (Request::Put { key, value }, Outcome::Ok(_))
                | (
                    Request::Cas {
                        key, new: value, ..
                    },
                    Outcome::Ok(Response::Cas(true)),
                ) => {
                    seen.insert(key.clone(), Some(value.clone()));
                }
                (_, Outcome::Ok(_)) => {}
                // A fresh connection after any error (the member behind it may be gone).
                _ => client = None,
            }
            pending.finish(outcome);
            tokio::select! {
                _ = tokio::time::sleep(self.config.pause) => {}
                _ = stopped.changed() => {}
            }
        }
    }

    async fn send(&self, client: &mut Client, request: &Request) -> Outcome {
        let timeout = self.config.request_timeout;
        let unknown = |e: String| Outcome::Unknown(e);
        match request {
            Request::Get { key } => get(client, key, timeout).await,
            Request::Put { key, value } => {
                match tokio::time::timeout(timeout, client.put(key.as_str(), value.as_str(), None))
                    .await
                {
                    Ok(Ok(_)) => Outcome::Ok(Response::Put),
                    Ok(Err(e)) => write_error(e.to_string()),
                    Err(_) => unknown("timeout".into()),
                }
            }
            Request::Cas { key, expected, new } => {
                let compare = match expected {
                    Some(v) => Compare::value(key.as_str(), CompareOp::Equal, v.as_str()),
                    // Absent: never created.
                    None => Compare::create_revision(key.as_str(), CompareOp::Equal, 0),
                };
                let txn = Txn::new().when([compare]).and_then([TxnOp::put(
                    key.as_str(),
                    new.as_str(),
                    None,
                )]);
                match tokio::time::timeout(timeout, client.txn(txn)).await {
                    Ok(Ok(response)) => Outcome::Ok(Response::Cas(response.succeeded())),
                    Ok(Err(e)) => write_error(e.to_string()),
                    Err(_) => unknown("timeout".into()),
                }
            }
        }
    }
}

/// The outcome of a put or compare-and-swap that etcd answered with `error`: unknown, whatever
/// the error. Sent or maybe sent, etcd may have applied it; NOSPACE included
/// ([`refused_for_no_space`]). Kept cheap for the checker: an unknown write nobody read is
/// left out first (linearizability.rs).
fn write_error(error: String) -> Outcome {
    Outcome::Unknown(error)
}

/// etcd's NOSPACE answer (`ErrGRPCNoSpace`). Not proof that the write was not applied: etcd
/// refuses before proposing when the member's database is over the quota, and once the alarm
/// is applied (a raft entry) every member refuses writes alike, but its quota applier applies a
/// write and then answers NOSPACE when the quota was exceeded, so every write applied between
/// the one that crossed it and the alarm gets this answer too
/// (server/etcdserver/apply/quota.go). Recorded as unknown (`write_error`).
pub fn refused_for_no_space(error: &str) -> bool {
    error.contains("etcdserver: mvcc: database space exceeded")
}

/// What [`KvWorkload::finish`] found.
pub struct WorkloadReport {
    pub counts: Counts,
    pub checked: linearizability::Checked,
    pub lost: Vec<LostWrite>,
    pub history: History,
}

impl WorkloadReport {
    pub fn linearizable(&self) -> bool {
        matches!(self.checked.verdict, Verdict::Linearizable)
    }

    /// Panics, with the evidence, unless the history is linearizable and no acknowledged
    /// write was lost.
    pub fn assert_ok(&self) {
        if !self.lost.is_empty() || !self.linearizable() {
            match self.history.save() {
                Ok(path) => eprintln!("the client history is saved in {}", path.display()),
                Err(e) => eprintln!("the client history could not be saved: {e}"),
            }
        }
        assert!(
            self.lost.is_empty(),
            "{} acknowledged writes lost ({self}):\n{}",
            self.lost.len(),
            self.lost
                .iter()
                .take(10)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
        match &self.checked.verdict {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable(violation) => {
                panic!("the client history is not linearizable ({self}):\n{violation}")
            }
            Verdict::TimedOut { key } => {
                panic!("the linearizability check of key {key} ran out of time ({self})")
            }
        }
    }
}

/// One line: operations by outcome, the verdict, the checker's time.
impl fmt::Display for WorkloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = match &self.checked.verdict {
            Verdict::Linearizable => "linearizable".to_owned(),
            Verdict::NotLinearizable(v) => format!("NOT linearizable on {}", v.key),
            Verdict::TimedOut { key } => format!("check timed out on {key}"),
        };
        write!(
            f,
            "history: {}; {verdict} ({} ops on {} keys checked in {:.2?}); {} acknowledged writes lost",
            self.counts,
            self.checked.operations,
            self.checked.keys,
            self.checked.elapsed,
            self.lost.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::tests::{get, op};
    use test_support::{EtcdCluster, EtcdVersion};

    /// etcd's quota applier applies a put or a transaction and then answers NOSPACE when the
    /// quota was exceeded (server/etcdserver/apply/quota.go: `ok := Available(p)`, the write
    /// applied, `if err == nil && !ok { err = ErrNoSpace }`): writes applied between the one
    /// that crossed the quota and the alarm all get that answer. A later read of such a write's
    /// value must not make the history non-linearizable (seen in the chaos table's NOSPACE
    /// case `cluster.pod_serving:after`: "NOT linearizable on history/2/k3", 0 writes lost).
    #[test]
    fn a_write_answered_nospace_may_have_been_applied() {
        let refusal =
            "status: ResourceExhausted, message: \"etcdserver: mvcc: database space exceeded\"";
        assert!(refused_for_no_space(refusal));
        let put = Request::Put {
            key: "k".into(),
            value: "c1-1".into(),
        };
        let cas = Request::Cas {
            key: "k".into(),
            expected: Some("c1-1".into()),
            new: "c2-1".into(),
        };
        let history = History::new(vec![
            op(1, put, 0, 10, write_error(refusal.to_owned())),
            get(3, "k", Some("c1-1"), 20, 30),
            op(2, cas, 40, 50, write_error(refusal.to_owned())),
            get(3, "k", Some("c2-1"), 60, 70),
        ]);
        let checked = linearizability::check(&history, Duration::from_secs(5));
        assert!(
            matches!(checked.verdict, Verdict::Linearizable),
            "{:?}",
            checked.verdict
        );
    }

    /// Against a real 3-member etcd, with one member killed and restarted mid-run: the
    /// clients record every operation and the history checks out.
    #[tokio::test]
    async fn a_history_against_real_etcd_is_linearizable() {
        let mut cluster = EtcdCluster::start(EtcdVersion::V3_5, 3).await.unwrap();
        let workload = KvWorkload::start(cluster.endpoints(), None, WorkloadConfig::default());
        tokio::time::sleep(Duration::from_secs(2)).await;
        cluster.kill_member(1).unwrap();
        let during = workload.read_all(Duration::from_secs(30)).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let report = workload.finish(Duration::from_secs(30)).await;
        eprintln!("{report}");
        report.assert_ok();
        assert!(during.acknowledged_writes > 0, "{during}");
        assert!(report.counts.ok > 50, "{report}");
        // The reader's final reads are part of the history.
        let reads = report
            .history
            .ops
            .iter()
            .filter(|o| o.client == READER)
            .count();
        assert!(reads >= 8, "{reads}");
    }
}
