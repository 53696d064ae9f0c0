//! A client history of a key-value store: every operation concurrent clients invoked, with its
//! invocation and response times and its outcome. Pure data plus a thread-safe [`Recorder`]; no
//! I/O. [`crate::linearizability`] checks a history against a register per key, and
//! [`lost_writes`] checks the values read at the end against every acknowledged write.
//!
//! The workload this models writes unique values (so a value read names the write that made
//! it), never deletes, and starts on keys that are absent.
//!
//! An operation ends in one of three outcomes, as in etcd's robustness tests:
//! - [`Outcome::Ok`]: the store answered; a compare-and-swap that did not match is `Ok` with
//!   result `false`.
//! - [`Outcome::Failed`]: definitely not applied (refused before it was sent: no connection).
//! - [`Outcome::Unknown`]: sent, but no answer (timeout, connection dropped): it may have been
//!   applied at any moment after its invocation, even after the client gave up, or never.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Which client invoked an operation.
pub type ClientId = u32;

/// What a client asked.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Request {
    Put {
        key: String,
        value: String,
    },
    Get {
        key: String,
    },
    /// Writes `new` if the key holds `expected` (`None`: the key is absent), in one transaction.
    Cas {
        key: String,
        expected: Option<String>,
        new: String,
    },
}

impl Request {
    pub fn key(&self) -> &str {
        match self {
            Request::Put { key, .. } | Request::Get { key } | Request::Cas { key, .. } => key,
        }
    }

    /// The value this request writes, if it writes.
    pub fn written(&self) -> Option<&str> {
        match self {
            Request::Put { value, .. } => Some(value),
            Request::Cas { new, .. } => Some(new),
            Request::Get { .. } => None,
        }
    }
}

/// What the store answered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Response {
    Put,
    /// The value read (`None`: the key is absent).
    Get(Option<String>),
    /// Whether the comparison matched (and so the value was written).
    Cas(bool),
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    Ok(Response),
    /// Definitely not applied; the reason.
    Failed(String),
    /// May or may not have been applied; the error the client saw.
    Unknown(String),
}

/// One operation of one client.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Operation {
    pub client: ClientId,
    pub request: Request,
    /// Monotonic time since the history began, when the client sent the request.
    pub invoked: Duration,
    /// When the client got the answer or gave up. For an [`Outcome::Unknown`] the checker
    /// ignores it: the request may still take effect later.
    pub returned: Duration,
    pub outcome: Outcome,
}

impl Operation {
    /// A put, or a compare-and-swap that matched, acknowledged by the store.
    pub fn is_acknowledged_write(&self) -> bool {
        match (&self.request, &self.outcome) {
            (Request::Put { .. }, Outcome::Ok(_)) => true,
            (Request::Cas { .. }, Outcome::Ok(Response::Cas(matched))) => *matched,
            _ => false,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(
            f,
            "[{:>10.1} ms .. {:>10.1} ms] client {} ",
            ms(self.invoked),
            ms(self.returned),
            self.client
        )?;
        match &self.request {
            Request::Put { key, value } => write!(f, "put {key} = {value}")?,
            Request::Get { key } => write!(f, "get {key}")?,
            Request::Cas { key, expected, new } => {
                write!(f, "cas {key}: {} -> {new}", show(expected.as_deref()))?
            }
        }
        match &self.outcome {
            Outcome::Ok(Response::Put) => write!(f, " => ok"),
            Outcome::Ok(Response::Get(v)) => write!(f, " => {}", show(v.as_deref())),
            Outcome::Ok(Response::Cas(matched)) => write!(f, " => {matched}"),
            Outcome::Failed(why) => write!(f, " => failed ({why})"),
            Outcome::Unknown(why) => write!(f, " => unknown ({why})"),
        }
    }
}

fn show(value: Option<&str>) -> &str {
    value.unwrap_or("<absent>")
}

/// Counts of a history's operations by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub ops: usize,
    pub ok: usize,
    pub failed: usize,
    pub unknown: usize,
    pub acknowledged_writes: usize,
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ops ({} ok, {} failed, {} unknown; {} acknowledged writes)",
            self.ops, self.ok, self.failed, self.unknown, self.acknowledged_writes
        )
    }
}

/// Everything recorded, in the order the operations finished.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct History {
    pub ops: Vec<Operation>,
}

impl History {
    /// Writes the history as JSON to a new file in the system's temporary directory (kept for
    /// a failure's post-mortem: `serde_json::from_str::<History>` reads it back) and returns its
    /// path, or why it could not.
    pub fn save(&self) -> Result<std::path::PathBuf, String> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let path = std::env::temp_dir().join(format!(
            "etcd-operator-history-{}-{stamp}.json",
            std::process::id()
        ));
        let json = serde_json::to_string(self).map_err(|e| e.to_string())?;
        std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    pub fn new(ops: Vec<Operation>) -> History {
        History { ops }
    }

    pub fn counts(&self) -> Counts {
        let mut counts = Counts {
            ops: self.ops.len(),
            ..Counts::default()
        };
        for op in &self.ops {
            match op.outcome {
                Outcome::Ok(_) => counts.ok += 1,
                Outcome::Failed(_) => counts.failed += 1,
                Outcome::Unknown(_) => counts.unknown += 1,
            }
            if op.is_acknowledged_write() {
                counts.acknowledged_writes += 1;
            }
        }
        counts
    }

    /// The operations on `key`, by invocation time.
    pub fn on_key(&self, key: &str) -> Vec<&Operation> {
        let mut ops: Vec<&Operation> = self.ops.iter().filter(|o| o.request.key() == key).collect();
        ops.sort_by_key(|o| o.invoked);
        ops
    }
}

/// Records operations from many tasks against one monotonic clock.
#[derive(Clone, Debug)]
pub struct Recorder {
    start: Instant,
    ops: Arc<Mutex<Vec<Operation>>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            ops: Arc::default(),
        }
    }

    /// Marks `request` invoked now. Finish the returned operation with its outcome; one dropped
    /// unfinished (its task cancelled mid-request) is recorded as [`Outcome::Unknown`].
    pub fn invoke(&self, client: ClientId, request: Request) -> Pending {
        Pending {
            recorder: self.clone(),
            client,
            request: Some(request),
            invoked: self.start.elapsed(),
        }
    }

    pub fn history(&self) -> History {
        History::new(self.lock().clone())
    }

    pub fn counts(&self) -> Counts {
        // Cheap enough: histories are thousands of operations.
        History::new(self.lock().clone()).counts()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Operation>> {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An operation invoked and not yet answered.
#[derive(Debug)]
pub struct Pending {
    recorder: Recorder,
    client: ClientId,
    request: Option<Request>,
    invoked: Duration,
}

impl Pending {
    pub fn request(&self) -> Option<&Request> {
        self.request.as_ref()
    }

    pub fn finish(mut self, outcome: Outcome) {
        self.record(outcome);
    }

    fn record(&mut self, outcome: Outcome) {
        if let Some(request) = self.request.take() {
            let op = Operation {
                client: self.client,
                request,
                invoked: self.invoked,
                returned: self.recorder.start.elapsed(),
                outcome,
            };
            self.recorder.lock().push(op);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.record(Outcome::Unknown("cancelled before an answer".into()));
    }
}

/// An acknowledged write whose effect the final read does not explain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostWrite {
    pub write: Operation,
    /// The value read at the end.
    pub final_value: Option<String>,
    /// The write that made the final value, when one did.
    pub final_writer: Option<Operation>,
}

impl fmt::Display for LostWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, but {} holds {} at the end",
            self.write,
            self.write.request.key(),
            show(self.final_value.as_deref())
        )?;
        match &self.final_writer {
            Some(w) => write!(f, ", written by {w}"),
            None => write!(f, ", which no operation wrote"),
        }
    }
}

/// Every acknowledged write whose effect the values read at the end (`finals`, per key; read
/// after every client stopped) do not explain. The final value must be the last write in any
/// linearization, so an acknowledged write is lost when the key is absent at the end, holds a
/// value nobody wrote, or holds a value whose write was acknowledged before this one was even
/// invoked. This is a subset of linearizability, kept apart for its plain message.
pub fn lost_writes(history: &History, finals: &BTreeMap<String, Option<String>>) -> Vec<LostWrite> {
    // Values are unique: each names its write.
    let writers: BTreeMap<(&str, &str), &Operation> = history
        .ops
        .iter()
        .filter_map(|o| Some(((o.request.key(), o.request.written()?), o)))
        .collect();
    let mut lost = Vec::new();
    for write in history.ops.iter().filter(|o| o.is_acknowledged_write()) {
        let key = write.request.key();
        let final_value = finals.get(key).cloned().flatten();
        let final_writer = final_value
            .as_deref()
            .and_then(|v| writers.get(&(key, v)).copied());
        let explained = match final_writer {
            None => false,
            Some(w) if w == write => true,
            // The final write was under way when this one began or later, or its outcome is
            // unknown (it may have landed last).
            Some(w) => !(matches!(w.outcome, Outcome::Ok(_)) && w.returned < write.invoked),
        };
        if !explained {
            lost.push(LostWrite {
                write: write.clone(),
                final_value,
                final_writer: final_writer.cloned(),
            });
        }
    }
    lost
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    pub fn op(
        client: ClientId,
        request: Request,
        invoked: u64,
        returned: u64,
        outcome: Outcome,
    ) -> Operation {
        Operation {
            client,
            request,
            invoked: ms(invoked),
            returned: ms(returned),
            outcome,
        }
    }

    pub fn put(client: ClientId, key: &str, value: &str, invoked: u64, returned: u64) -> Operation {
        let request = Request::Put {
            key: key.into(),
            value: value.into(),
        };
        op(
            client,
            request,
            invoked,
            returned,
            Outcome::Ok(Response::Put),
        )
    }

    pub fn put_unknown(
        client: ClientId,
        key: &str,
        value: &str,
        invoked: u64,
        gave_up: u64,
    ) -> Operation {
        let request = Request::Put {
            key: key.into(),
            value: value.into(),
        };
        op(
            client,
            request,
            invoked,
            gave_up,
            Outcome::Unknown("timeout".into()),
        )
    }

    pub fn get(
        client: ClientId,
        key: &str,
        read: Option<&str>,
        invoked: u64,
        returned: u64,
    ) -> Operation {
        let request = Request::Get { key: key.into() };
        let outcome = Outcome::Ok(Response::Get(read.map(str::to_owned)));
        op(client, request, invoked, returned, outcome)
    }

    pub fn cas(
        client: ClientId,
        key: &str,
        expected: Option<&str>,
        new: &str,
        matched: bool,
        invoked: u64,
        returned: u64,
    ) -> Operation {
        let request = Request::Cas {
            key: key.into(),
            expected: expected.map(str::to_owned),
            new: new.into(),
        };
        op(
            client,
            request,
            invoked,
            returned,
            Outcome::Ok(Response::Cas(matched)),
        )
    }

    fn finals(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn a_saved_history_reads_back_the_same() {
        let mut unknown = cas(3, "k", None, "c", true, 5, 5_000);
        unknown.outcome = Outcome::Unknown("timeout".into());
        let history = History::new(vec![
            put(1, "k", "a", 0, 10),
            get(2, "k", None, 1, 2),
            unknown,
        ]);
        let path = history.save().unwrap();
        let read: History = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read, history);
    }

    #[test]
    fn the_last_acknowledged_write_explains_the_final_value() {
        let history = History::new(vec![put(1, "k", "a", 0, 10), put(2, "k", "b", 20, 30)]);
        assert!(lost_writes(&history, &finals(&[("k", Some("b"))])).is_empty());
    }

    #[test]
    fn a_final_value_older_than_an_acknowledged_write_loses_it() {
        let history = History::new(vec![put(1, "k", "a", 0, 10), put(2, "k", "b", 20, 30)]);
        let lost = lost_writes(&history, &finals(&[("k", Some("a"))]));
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].write.request.written(), Some("b"));
        assert!(
            lost[0].to_string().contains("k holds a at the end"),
            "{}",
            lost[0]
        );
    }

    #[test]
    fn concurrent_writes_may_end_in_either_order() {
        let history = History::new(vec![put(1, "k", "a", 0, 30), put(2, "k", "b", 10, 20)]);
        assert!(lost_writes(&history, &finals(&[("k", Some("a"))])).is_empty());
        assert!(lost_writes(&history, &finals(&[("k", Some("b"))])).is_empty());
    }

    #[test]
    fn an_unknown_write_may_land_last() {
        let history = History::new(vec![
            put_unknown(1, "k", "a", 0, 5),
            put(2, "k", "b", 20, 30),
        ]);
        assert!(lost_writes(&history, &finals(&[("k", Some("a"))])).is_empty());
    }

    #[test]
    fn an_absent_key_or_an_unwritten_value_loses_the_writes() {
        let history = History::new(vec![put(1, "k", "a", 0, 10)]);
        assert_eq!(lost_writes(&history, &finals(&[("k", None)])).len(), 1);
        assert_eq!(
            lost_writes(&history, &finals(&[("k", Some("zz"))])).len(),
            1
        );
        assert_eq!(lost_writes(&history, &finals(&[])).len(), 1);
    }

    #[test]
    fn a_failed_cas_is_no_write() {
        let history = History::new(vec![
            put(1, "k", "a", 0, 10),
            cas(2, "k", Some("x"), "b", false, 20, 30),
        ]);
        assert!(lost_writes(&history, &finals(&[("k", Some("a"))])).is_empty());
        assert_eq!(history.counts().acknowledged_writes, 1);
    }

    #[test]
    fn a_dropped_pending_operation_is_unknown() {
        let recorder = Recorder::new();
        let pending = recorder.invoke(
            3,
            Request::Put {
                key: "k".into(),
                value: "v".into(),
            },
        );
        recorder
            .invoke(1, Request::Get { key: "k".into() })
            .finish(Outcome::Ok(Response::Get(None)));
        drop(pending);
        let counts = recorder.counts();
        assert_eq!((counts.ops, counts.ok, counts.unknown), (2, 1, 1));
    }
}
