//! etcd's cluster version: the `etcdcluster` field of `GET /version` on a client URL
//! (`{"etcdserver":"3.6.16","etcdcluster":"3.6.0"}`). I/O.
//!
//! The gRPC Status answer carries only the member's own server version. The cluster version is
//! the minor every member agreed to run, decided by the leader some seconds after the last
//! member moved; it gates the next minor upgrade. etcd serves it on the client port, over plain
//! HTTP or over TLS (`https://` client URLs), so one small request is enough: no HTTP client
//! dependency.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::AdminError;
use crate::tls::ClientTls;

/// Answers larger than this are not etcd's `/version`.
const MAX_ANSWER: u64 = 64 * 1024;

/// The cluster version `endpoint` reports (`"3.5.0"`, or `"not_decided"` right after a start),
/// bounded by `timeout`.
pub async fn cluster_version(endpoint: &str, timeout: Duration) -> Result<String, AdminError> {
    cluster_version_tls(endpoint, timeout, None).await
}

/// [`cluster_version`] of an `https://` endpoint with `tls`.
pub async fn cluster_version_tls(
    endpoint: &str,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<String, AdminError> {
    let answer = http_get(endpoint, "/version", MAX_ANSWER, timeout, tls).await?;
    parse_answer(&answer).ok_or_else(|| AdminError::Incomplete {
        op: format!("GET {endpoint}/version"),
        detail: format!(
            "no etcdcluster in {:?}",
            answer.chars().take(300).collect::<String>()
        ),
    })
}

/// The cluster version of each of `endpoints` (in `endpoints` order), all asked at once, each
/// bounded by `timeout`: a pass waits for the slowest member, not for the sum of them. Each
/// read is its own short HTTP/1.0 request (etcd answers `/version` without raft, in
/// milliseconds); the pooled gRPC clients cannot carry it (etcd serves `/version` on HTTP/1
/// only).
pub async fn cluster_versions_tls(
    endpoints: &[String],
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Vec<Result<String, AdminError>> {
    ask_each(endpoints, "/version", tls, move |endpoint, tls| async move {
        cluster_version_tls(&endpoint, timeout, tls.as_ref()).await
    })
    .await
}

/// [`v2_snapshots_saved_tls`] of each of `endpoints` (in `endpoints` order), all asked at once,
/// each bounded by `timeout`: a silent member costs one timeout, not one per member after it.
pub async fn v2_snapshots_saved_each_tls(
    endpoints: &[String],
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Vec<Result<u64, AdminError>> {
    ask_each(
        endpoints,
        "/metrics",
        tls,
        move |endpoint, tls| async move {
            v2_snapshots_saved_tls(&endpoint, timeout, tls.as_ref()).await
        },
    )
    .await
}

/// What a member's own metrics say of its raft state, read on its metrics port
/// (`--listen-metrics-urls`, plain HTTP). etcd serves that port from its start, before the
/// member has published itself to the cluster; its client port serves nothing until then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftProgress {
    /// `etcd_server_id`: which member answered (absent before etcd 3.5).
    pub member_id: Option<u64>,
    /// `etcd_server_has_leader`.
    pub has_leader: bool,
    /// `etcd_server_is_learner`.
    pub learner: bool,
    /// `etcd_server_proposals_applied_total`: the index it applied.
    pub applied: u64,
    /// `etcd_server_proposals_committed_total`: the commit index it knows of.
    pub committed: u64,
    /// `etcd_server_snapshot_apply_in_progress_total` is not 0: it is applying a snapshot.
    pub applying_snapshot: bool,
}

/// How far a member's applied index may trail the commit index it knows and still count as
/// caught up: etcd's own `maxGapBetweenApplyAndCommitIndex`, the gap past which it refuses new
/// proposals as falling behind. Not zero: a member applies what it is sent a moment after
/// learning it is committed, and the restore bench read a joining voter at `applied 8,
/// committed 9` (its own publish, committed and not yet applied), which then counted as
/// unreachable for a pass (a `MembersUnreachable` warning, the next member add held back).
pub const APPLY_GAP_CAUGHT_UP: u64 = 5000;

impl RaftProgress {
    /// It follows a leader and applies what is committed (at most [`APPLY_GAP_CAUGHT_UP`]
    /// behind), with no snapshot half applied. Not proof that it is in sync with the leader
    /// (etcd's promote checks that).
    pub fn caught_up(&self) -> bool {
        self.has_leader
            && !self.applying_snapshot
            && self.applied > 0
            && self.applied.saturating_add(APPLY_GAP_CAUGHT_UP) >= self.committed
    }
}

/// [`RaftProgress`] of each of `endpoints` (metrics URLs, `http://host:2381`; in `endpoints`
/// order), all asked at once, each bounded by `timeout`.
pub async fn raft_progress_each(
    endpoints: &[String],
    timeout: Duration,
) -> Vec<Result<RaftProgress, AdminError>> {
    ask_each(endpoints, "/metrics", None, move |endpoint, _| async move {
        let answer = http_get(&endpoint, "/metrics", MAX_METRICS_ANSWER, timeout, None).await?;
        parse_raft_progress(&answer).ok_or_else(|| AdminError::Incomplete {
            op: format!("GET {endpoint}/metrics"),
            detail: "no etcd raft gauges in the answer".to_owned(),
        })
    })
    .await
}

/// The [`RaftProgress`] of an HTTP 200 answer in Prometheus' text format; `None` when a gauge
/// it needs is missing.
fn parse_raft_progress(answer: &str) -> Option<RaftProgress> {
    let body = ok_body(answer)?;
    let mut values: BTreeMap<&str, f64> = BTreeMap::new();
    let mut member_id = None;
    for line in body.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if let Some(labels) = series.strip_prefix("etcd_server_id{") {
            member_id = labels
                .split_once("server_id=\"")
                .and_then(|(_, rest)| rest.split_once('"'))
                .and_then(|(id, _)| u64::from_str_radix(id, 16).ok());
        } else if let Ok(value) = value.trim().parse::<f64>() {
            values.insert(series, value);
        }
    }
    let value = |name: &str| values.get(name).copied();
    Some(RaftProgress {
        member_id,
        has_leader: value("etcd_server_has_leader")? == 1.0,
        learner: value("etcd_server_is_learner")? == 1.0,
        applied: value("etcd_server_proposals_applied_total")? as u64,
        committed: value("etcd_server_proposals_committed_total")? as u64,
        applying_snapshot: value("etcd_server_snapshot_apply_in_progress_total").unwrap_or(0.0)
            != 0.0,
    })
}

/// The body of an HTTP 200 answer.
fn ok_body(answer: &str) -> Option<&str> {
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.lines().next()?;
    (status.split_whitespace().nth(1) == Some("200")).then_some(body)
}

/// `ask` of every endpoint at once (each its own task); the answers in `endpoints` order. `path`
/// names the request in the error of one that did not complete.
async fn ask_each<T, F, Fut>(
    endpoints: &[String],
    path: &str,
    tls: Option<&ClientTls>,
    ask: F,
) -> Vec<Result<T, AdminError>>
where
    T: Send + 'static,
    F: Fn(String, Option<ClientTls>) -> Fut,
    Fut: std::future::Future<Output = Result<T, AdminError>> + Send + 'static,
{
    let mut asked = tokio::task::JoinSet::new();
    for (index, endpoint) in endpoints.iter().enumerate() {
        let answer = ask(endpoint.clone(), tls.cloned());
        asked.spawn(async move { (index, answer.await) });
    }
    let mut answers: Vec<Result<T, AdminError>> = endpoints
        .iter()
        .map(|endpoint| {
            Err(AdminError::Incomplete {
                op: format!("GET {endpoint}{path}"),
                detail: "the request did not complete".to_owned(),
            })
        })
        .collect();
    while let Some(joined) = asked.join_next().await {
        // A task cannot panic short of a bug; its endpoint keeps the Err above.
        if let Ok((index, answer)) = joined
            && let Some(slot) = answers.get_mut(index)
        {
            *slot = answer;
        }
    }
    answers
}

/// How many v2 snapshots the member at `endpoint` saved since it started: etcd's
/// `etcd_debugging_snap_save_total_duration_seconds_count` on `GET /metrics` (a counter that
/// starts at 0 with the process). etcd 3.6 refuses to replay v2 requests left in the WAL by etcd
/// 3.4 (`detected disallowed v2 WAL`); a v2 snapshot taken on 3.5 after the last of them is
/// what makes the upgrade safe (etcd's 3.5 → 3.6 upgrade guide).
pub async fn v2_snapshots_saved_tls(
    endpoint: &str,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<u64, AdminError> {
    let answer = http_get(endpoint, "/metrics", MAX_METRICS_ANSWER, timeout, tls).await?;
    parse_snapshot_saves(&answer).ok_or_else(|| AdminError::Incomplete {
        op: format!("GET {endpoint}/metrics"),
        detail: format!("no {SNAP_SAVE_COUNT} in the answer"),
    })
}

/// The counter [`v2_snapshots_saved_tls`] reads.
const SNAP_SAVE_COUNT: &str = "etcd_debugging_snap_save_total_duration_seconds_count";
/// etcd's `/metrics` is some 100-200 KiB.
const MAX_METRICS_ANSWER: u64 = 4 * 1024 * 1024;

/// `GET path` on an etcd client URL (plain or TLS), HTTP/1.0: the whole answer, head and body.
async fn http_get(
    endpoint: &str,
    path: &str,
    max: u64,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<String, AdminError> {
    let op = format!("GET {endpoint}{path}");
    let invalid = |message: &str| AdminError::InvalidEndpoint {
        endpoints: endpoint.to_owned(),
        message: message.to_owned(),
    };
    let (rest, tls) = match (
        endpoint.strip_prefix("http://"),
        endpoint.strip_prefix("https://"),
    ) {
        (Some(rest), _) => (rest, None),
        (None, Some(rest)) => {
            let tls = tls.ok_or_else(|| invalid("an https:// endpoint needs TLS settings"))?;
            (rest, Some(tls.rustls_config().map_err(|e| invalid(&e))?))
        }
        (None, None) => return Err(invalid("not an http:// or https:// URL")),
    };
    let host_port = rest.split('/').next().unwrap_or_default();
    if host_port.is_empty() {
        return Err(invalid("no host"));
    }
    let host = host_port
        .rsplit_once(':')
        .map_or(host_port, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let server_name = rustls_pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| invalid(&format!("server name {host}: {e}")))?;
    let get = format!("GET {path} HTTP/1.0\r\nHost: {host_port}\r\n\r\n");
    let request = async {
        let stream = TcpStream::connect(host_port).await?;
        let mut answer = Vec::new();
        match tls {
            None => exchange(stream, &get, max, &mut answer).await?,
            Some(config) => {
                let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
                let stream = connector.connect(server_name, stream).await?;
                exchange(stream, &get, max, &mut answer).await?;
            }
        }
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(timeout, request).await {
        Err(_) => Err(AdminError::Timeout {
            op,
            after: timeout,
            message: "no answer".to_owned(),
        }),
        Ok(Err(e)) => Err(AdminError::Unreachable {
            op,
            message: e.to_string(),
        }),
        Ok(Ok(answer)) => Ok(String::from_utf8_lossy(&answer).into_owned()),
    }
}

/// The value of [`SNAP_SAVE_COUNT`] in an HTTP 200 answer in Prometheus' text format.
fn parse_snapshot_saves(answer: &str) -> Option<u64> {
    ok_body(answer)?
        .lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.split_once(' ')?;
            (name == SNAP_SAVE_COUNT).then(|| value.trim().parse::<f64>().ok())?
        })
        .map(|value| value as u64)
}

/// Sends `request` and reads the answer (HTTP/1.0: the server closes after it).
async fn exchange<S>(
    mut stream: S,
    request: &str,
    max: u64,
    answer: &mut Vec<u8>,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    stream.write_all(request.as_bytes()).await?;
    match stream.take(max).read_to_end(answer).await {
        Ok(_) => Ok(()),
        // etcd closes TLS connections without close_notify; the answer is complete by then.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The `etcdcluster` value of an HTTP 200 answer.
fn parse_answer(answer: &str) -> Option<String> {
    let body = ok_body(answer)?;
    let key = "\"etcdcluster\"";
    let after = body[body.find(key)? + key.len()..].trim_start();
    let value = after.strip_prefix(':')?.trim_start().strip_prefix('"')?;
    Some(value[..value.find('"')?].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_saves_are_read_from_the_metrics() {
        let ok = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n\
                  # HELP etcd_debugging_snap_save_total_duration_seconds The total latency\n\
                  # TYPE etcd_debugging_snap_save_total_duration_seconds histogram\n\
                  etcd_debugging_snap_save_total_duration_seconds_bucket{le=\"0.001\"} 0\n\
                  etcd_debugging_snap_save_total_duration_seconds_sum 0.0123\n\
                  etcd_debugging_snap_save_total_duration_seconds_count 2\n\
                  etcd_server_is_leader 1\n";
        assert_eq!(parse_snapshot_saves(ok), Some(2));
        let none = "HTTP/1.0 200 OK\r\n\r\netcd_server_is_leader 1\n";
        assert_eq!(parse_snapshot_saves(none), None);
        let refused = "HTTP/1.0 404 Not Found\r\n\r\n\
                       etcd_debugging_snap_save_total_duration_seconds_count 2\n";
        assert_eq!(parse_snapshot_saves(refused), None);
    }

    /// Measured on etcd 3.6.16: a learner that received the leader's snapshot and lost the race
    /// to publish itself (its client port silent for 7 s) answers this on its metrics port.
    #[test]
    fn raft_progress_is_read_from_the_metrics() {
        let learner = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n\
                       # HELP etcd_server_has_leader Whether or not a leader exists.\n\
                       # TYPE etcd_server_has_leader gauge\n\
                       etcd_server_has_leader 1\n\
                       etcd_server_id{server_id=\"b25f9a6b0b72a943\"} 1\n\
                       etcd_server_is_learner 1\n\
                       etcd_server_proposals_applied_total 6\n\
                       etcd_server_proposals_committed_total 6\n\
                       etcd_server_proposals_pending 0\n\
                       etcd_server_snapshot_apply_in_progress_total 0\n";
        let progress = parse_raft_progress(learner).unwrap();
        assert_eq!(
            progress,
            RaftProgress {
                member_id: Some(0xb25f_9a6b_0b72_a943),
                has_leader: true,
                learner: true,
                applied: 6,
                committed: 6,
                applying_snapshot: false,
            }
        );
        assert!(progress.caught_up());
        // An entry committed and not applied yet (its own publish) is the normal trail.
        assert!(
            RaftProgress {
                applied: 5,
                ..progress
            }
            .caught_up()
        );
        // Still applying the snapshot, further behind its commit index than etcd lets a member
        // fall, without a leader, or nothing applied yet: not caught up.
        for not_yet in [
            RaftProgress {
                applying_snapshot: true,
                ..progress
            },
            RaftProgress {
                committed: 6 + APPLY_GAP_CAUGHT_UP + 1,
                ..progress
            },
            RaftProgress {
                has_leader: false,
                ..progress
            },
            RaftProgress {
                applied: 0,
                committed: 0,
                ..progress
            },
        ] {
            assert!(!not_yet.caught_up(), "{not_yet:?}");
        }
        // A gauge missing, or not a 200: nothing read.
        assert_eq!(
            parse_raft_progress(&learner.replace("etcd_server_is_learner 1\n", "")),
            None
        );
        assert_eq!(
            parse_raft_progress(&learner.replace("200 OK", "404 Not Found")),
            None
        );
        // etcd before 3.5 has no etcd_server_id.
        let old = learner.replace("etcd_server_id{server_id=\"b25f9a6b0b72a943\"} 1\n", "");
        assert_eq!(parse_raft_progress(&old).unwrap().member_id, None);
    }

    #[test]
    fn answers() {
        let ok = "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n\
                  {\"etcdserver\":\"3.6.16\",\"etcdcluster\":\"3.6.0\"}";
        assert_eq!(parse_answer(ok).as_deref(), Some("3.6.0"));
        let spaced = "HTTP/1.1 200 OK\r\n\r\n{\"etcdcluster\" : \"not_decided\"}";
        assert_eq!(parse_answer(spaced).as_deref(), Some("not_decided"));
        assert_eq!(
            parse_answer("HTTP/1.0 404 Not Found\r\n\r\n{\"etcdcluster\":\"3.5.0\"}"),
            None
        );
        assert_eq!(
            parse_answer("HTTP/1.0 200 OK\r\n\r\n{\"etcdserver\":\"3.5.0\"}"),
            None
        );
        assert_eq!(parse_answer("garbage"), None);
    }
}
