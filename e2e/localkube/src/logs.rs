//! `GET pods/<name>/log`: container logs as the kubelet serves them, read from the CRI-format
//! files the node agent writes (`<logs>/<ns>_<pod>_<uid>/<container>/<restartCount>.log`, the
//! layout of the kubelet's /var/log/pods). Parameters: `container`, `previous`, `follow`,
//! `tailLines`, `sinceSeconds`, `timestamps`, `limitBytes`; errors worded as kube-apiserver and
//! the kubelet word them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Response, StatusCode};
use serde_json::Value;

use crate::api::objects::{self, meta_str};
use crate::api::resources::ResourceType;
use crate::api::status::ApiError;
use crate::api::{Query, Shared};

/// Where the log of one container instance lives.
pub fn log_path(
    logs_dir: &Path,
    ns: &str,
    pod: &str,
    uid: &str,
    container: &str,
    restart: i64,
) -> PathBuf {
    logs_dir
        .join(format!("{ns}_{pod}_{uid}"))
        .join(container)
        .join(format!("{restart}.log"))
}

/// One line of a CRI log file: `<RFC 3339 nano> <stdout|stderr> <P|F> <text>`.
#[derive(Debug, PartialEq, Eq)]
pub struct CriLine<'a> {
    pub timestamp: &'a str,
    pub text: &'a str,
    /// `F`: the text ends a line (a newline follows on output); `P`: a partial line.
    pub full: bool,
}

pub fn parse_cri_line(line: &str) -> Option<CriLine<'_>> {
    let mut parts = line.splitn(4, ' ');
    let timestamp = parts.next()?;
    let _stream = parts.next()?;
    let tag = parts.next()?;
    let text = parts.next().unwrap_or("");
    Some(CriLine {
        timestamp,
        text,
        full: tag != "P",
    })
}

#[derive(Debug, Default, Clone)]
pub struct LogOptions {
    pub tail_lines: Option<usize>,
    pub since: Option<jiff::Timestamp>,
    pub timestamps: bool,
    pub limit_bytes: Option<usize>,
}

/// Render CRI file content as the client sees it, applying since/tail/timestamps.
pub fn render(content: &str, opts: &LogOptions) -> String {
    let mut lines: Vec<CriLine<'_>> = content
        .lines()
        .filter_map(parse_cri_line)
        .filter(|l| match opts.since {
            Some(since) => l
                .timestamp
                .parse::<jiff::Timestamp>()
                .is_ok_and(|t| t >= since),
            None => true,
        })
        .collect();
    if let Some(n) = opts.tail_lines {
        // Count whole lines: a run of partial lines belongs to the full line that ends it.
        let mut full_seen = 0;
        let mut cut = 0;
        for (i, l) in lines.iter().enumerate().rev() {
            if l.full {
                if full_seen == n {
                    cut = i + 1;
                    break;
                }
                full_seen += 1;
            }
        }
        lines.drain(..cut);
    }
    let mut out = String::new();
    let mut at_line_start = true;
    for l in lines {
        if opts.timestamps && at_line_start {
            out.push_str(l.timestamp);
            out.push(' ');
        }
        out.push_str(l.text);
        if l.full {
            out.push('\n');
        }
        at_line_start = l.full;
    }
    out
}

fn flag(query: &Query, name: &str) -> bool {
    query.get(name).is_some_and(|v| v == "true" || v == "1")
}

fn number(query: &Query, name: &str) -> Result<Option<i64>, ApiError> {
    query
        .get(name)
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("invalid value for {name}: {v:?} is not a number"))
            })
        })
        .transpose()
}

fn container_names(pod: &Value, list: &str) -> Vec<String> {
    pod["spec"][list]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Which container the request means (kube-apiserver `podLogs` / `ResourceLocation` rules).
fn choose_container(pod: &Value, pod_name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let containers = container_names(pod, "containers");
    let inits = container_names(pod, "initContainers");
    if let Some(name) = asked.filter(|n| !n.is_empty()) {
        if containers.iter().chain(inits.iter()).any(|c| c == name) {
            return Ok(name.to_string());
        }
        return Err(ApiError::bad_request(format!(
            "container {name} is not valid for pod {pod_name}"
        )));
    }
    if let Some(default) = pod["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"]
        .as_str()
        .filter(|d| containers.iter().any(|c| c == d))
    {
        return Ok(default.to_string());
    }
    match containers.as_slice() {
        [one] => Ok(one.clone()),
        _ => {
            let mut message = format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                containers.join(" ")
            );
            if !inits.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    inits.join(" ")
                ));
            }
            Err(ApiError::bad_request(message))
        }
    }
}

fn container_status<'a>(pod: &'a Value, container: &str) -> Option<&'a Value> {
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|l| pod["status"][*l].as_array())
        .flatten()
        .find(|s| s["name"].as_str() == Some(container))
}

pub async fn get(
    server: &Shared,
    pods: &ResourceType,
    ns: &str,
    name: &str,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    let Some(logs_dir) = server.logs_dir.clone() else {
        return Err(ApiError::bad_request(
            "no node agent runs in this localkube (--api-only): there are no container logs",
        ));
    };
    let pod = server
        .store
        .get(&pods.key(Some(ns), name))
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(&pods.group_resource(), name))?
        .object;
    let container = choose_container(&pod, name, query.get("container").map(String::as_str))?;
    let previous = flag(query, "previous");
    let status = container_status(&pod, &container);
    let restarts = status.and_then(|s| s["restartCount"].as_i64()).unwrap_or(0);
    let started = status.is_some_and(|s| s["state"].get("waiting").is_none() || restarts > 0);
    if previous && restarts == 0 {
        return Err(ApiError::bad_request(format!(
            "previous terminated container \"{container}\" in pod \"{name}\" not found"
        )));
    }
    let instance = if previous { restarts - 1 } else { restarts };
    let uid = meta_str(&pod, "uid").unwrap_or("").to_string();
    let path = log_path(&logs_dir, ns, name, &uid, &container, instance);
    if !started || (!previous && !path.exists()) {
        let reason = status
            .and_then(|s| s["state"]["waiting"]["reason"].as_str())
            .unwrap_or("ContainerCreating");
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: {reason}"
        )));
    }
    let opts = LogOptions {
        tail_lines: number(query, "tailLines")?.map(|n| n.max(0) as usize),
        since: number(query, "sinceSeconds")?
            .map(|s| jiff::Timestamp::now() - jiff::SignedDuration::from_secs(s.max(0))),
        timestamps: flag(query, "timestamps"),
        limit_bytes: number(query, "limitBytes")?.map(|n| n.max(0) as usize),
    };
    let content = tokio::fs::read(&path).await.unwrap_or_default();
    let consumed = content.len();
    let mut first = render(&String::from_utf8_lossy(&content), &opts);
    if let Some(limit) = opts.limit_bytes {
        first.truncate(floor_char_boundary(&first, limit));
    }
    let follow = flag(query, "follow") && !previous;
    let response = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/plain");
    if !follow {
        return response.body(Body::from(first)).map_err(ApiError::internal);
    }
    let stream = follow_stream(
        server.clone(),
        pods.key(Some(ns), name),
        uid,
        container,
        instance,
        path,
        consumed,
        opts,
        first,
    );
    response
        .body(Body::from_stream(stream))
        .map_err(ApiError::internal)
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// After the existing content, new lines as they are written, until this container instance
/// ends (the pod shows a later instance or a terminated state) or the pod goes away.
#[allow(clippy::too_many_arguments)]
fn follow_stream(
    server: Shared,
    key: String,
    uid: String,
    container: String,
    instance: i64,
    path: PathBuf,
    mut offset: usize,
    opts: LogOptions,
    first: String,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    let live = LogOptions {
        tail_lines: None,
        since: None,
        ..opts
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(first.into())).await.is_err() {
            return;
        }
        let mut pending = String::new();
        loop {
            let finished = instance_finished(&server, &key, &uid, &container, instance).await;
            if let Ok(bytes) = tokio::fs::read(&path).await
                && bytes.len() > offset
            {
                pending.push_str(&String::from_utf8_lossy(&bytes[offset..]));
                offset = bytes.len();
                // Only whole file lines; the rest waits for its newline.
                if let Some(end) = pending.rfind('\n') {
                    let ready: String = pending.drain(..=end).collect();
                    let out = render(&ready, &live);
                    if !out.is_empty() && tx.send(Ok(out.into())).await.is_err() {
                        return;
                    }
                }
            }
            if finished {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

async fn instance_finished(
    server: &Shared,
    key: &str,
    uid: &str,
    container: &str,
    instance: i64,
) -> bool {
    let Ok(Some(stored)) = server.store.get(key).await else {
        return true;
    };
    let pod = stored.object;
    if meta_str(&pod, "uid") != Some(uid) {
        return true;
    }
    match container_status(&pod, container) {
        Some(s) => {
            s["restartCount"].as_i64().unwrap_or(0) != instance
                || s["state"].get("terminated").is_some()
        }
        None => objects::is_deleting(&pod),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = "2026-11-22T10:00:00.000000001Z stdout F one\n\
2026-11-22T10:00:01.000000000Z stderr P tw\n\
2026-11-22T10:00:01.000000001Z stderr F o\n\
2026-11-22T10:00:02.000000000Z stdout F three\n";

    #[test]
    fn cri_lines_render_with_partials_joined() {
        assert_eq!(render(FILE, &LogOptions::default()), "one\ntwo\nthree\n");
        let tail = LogOptions {
            tail_lines: Some(2),
            ..Default::default()
        };
        assert_eq!(render(FILE, &tail), "two\nthree\n");
        let ts = LogOptions {
            timestamps: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        assert_eq!(render(FILE, &ts), "2026-11-22T10:00:02.000000000Z three\n");
        let since = LogOptions {
            since: Some("2026-11-22T10:00:01.000000001Z".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(render(FILE, &since), "o\nthree\n");
    }

    #[test]
    fn container_choice_follows_kube_apiserver() {
        let pod = json!({"metadata": {"annotations": {}}, "spec": {
            "containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}});
        assert_eq!(
            choose_container(&pod, "p", None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        assert_eq!(choose_container(&pod, "p", Some("i")).unwrap(), "i");
        assert_eq!(
            choose_container(&pod, "p", Some("x")).unwrap_err().message,
            "container x is not valid for pod p"
        );
        let mut annotated = pod.clone();
        annotated["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] =
            json!("b");
        assert_eq!(choose_container(&annotated, "p", None).unwrap(), "b");
    }
}
