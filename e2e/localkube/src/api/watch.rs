//! Watches as etcd watches (spec §a6, §0.3): one etcd watch per client watch on the list prefix,
//! from `resourceVersion + 1`, with `prev_kv` (for DELETED objects and selector transitions) and
//! progress notifications (for bookmarks). A compacted start revision is an `ERROR` event with a
//! 410 Status inside a 200 stream, never an HTTP 410: kube-runtime relists only on that event.
//! Every event is one JSON document followed by `\n` (kube-rs reads lines).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode};
use bytes::Bytes;
use etcd_client::{EventType, WatchOptions};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::handlers::{Filter, parse_rv, read_list};
use super::resources::ResourceType;
use super::status::ApiError;
use super::{Query, Shared};
use crate::store::{decode, prefix_end};

/// kube-apiserver's default and maximum watch duration when the client sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

fn line(event_type: &str, object: &Value) -> Bytes {
    let mut bytes =
        serde_json::to_vec(&json!({ "type": event_type, "object": object })).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn bookmark(rt: &ResourceType, revision: i64) -> Value {
    json!({ "kind": rt.kind, "apiVersion": rt.api_version(), "metadata": { "resourceVersion": revision.to_string() } })
}

pub async fn watch(
    server: &Shared,
    rt: Arc<ResourceType>,
    ns: Option<&str>,
    name: Option<&str>,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    if query.get("sendInitialEvents").is_some_and(|v| v == "true") {
        // Streaming lists are not served; clients fall back to list+watch on this refusal.
        return Err(ApiError::invalid(
            "ListOptions.meta.k8s.io",
            "meta.k8s.io",
            "ListOptions",
            "",
            &[super::status::Cause {
                reason: "FieldValueForbidden".into(),
                field: "sendInitialEvents".into(),
                message: "sendInitialEvents: Forbidden: sendInitialEvents is not supported by this server".into(),
            }],
        ));
    }
    let mut filter_query = query.clone();
    if let Some(n) = name {
        // A watch on one object (`.../pods/p?watch=1`) is a field selector on its name.
        let extra = format!("metadata.name={n}");
        let fs = match query.get("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => format!("{s},{extra}"),
            None => extra,
        };
        filter_query.insert("fieldSelector".into(), fs);
    }
    let filter = Filter::from_query(&rt, &filter_query)?;
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true");
    let prefix = rt.list_prefix(ns);

    let (tx, rx) = mpsc::channel::<Result<Bytes, std::convert::Infallible>>(64);
    let rv = query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let start_revision;
    if rv.is_empty() || rv == "0" {
        // The current state as synthetic ADDED events, then changes after it.
        let mut list_query = Query::new();
        list_query.insert("resourceVersion".into(), String::new());
        let listed = read_list(server, &rt, ns, &list_query, &filter).await?;
        for item in &listed.items {
            if tx.send(Ok(line("ADDED", item))).await.is_err() {
                break;
            }
        }
        start_revision = listed.revision + 1;
    } else {
        start_revision = parse_rv(rv)? + 1;
    }

    let server = server.clone();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let options = WatchOptions::new()
            .with_range(prefix_end(&prefix))
            .with_start_revision(start_revision)
            .with_prev_key()
            .with_progress_notify();
        let mut client = server.store.client();
        let mut stream = match client.watch(prefix.as_str(), Some(options)).await {
            Ok(s) => s,
            Err(e) => {
                let _ = tx
                    .send(Ok(line("ERROR", &ApiError::internal(e).to_status())))
                    .await;
                return;
            }
        };
        let mut last_revision = start_revision - 1;
        let mut last_bookmark = tokio::time::Instant::now();
        loop {
            let next = tokio::select! {
                m = stream.message() => m,
                _ = tokio::time::sleep_until(deadline) => {
                    if bookmarks && last_revision > 0 {
                        let _ = tx.send(Ok(line("BOOKMARK", &bookmark(&rt, last_revision)))).await;
                    }
                    return;
                }
                _ = tx.closed() => return,
            };
            let resp = match next {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => {
                    let _ = tx
                        .send(Ok(line("ERROR", &ApiError::internal(e).to_status())))
                        .await;
                    return;
                }
            };
            if resp.compact_revision() > 0
                || (resp.canceled() && resp.cancel_reason().contains("compacted"))
            {
                let err = ApiError::expired(format!(
                    "too old resource version: {} ({})",
                    start_revision - 1,
                    resp.compact_revision()
                ));
                let _ = tx.send(Ok(line("ERROR", &err.to_status()))).await;
                return;
            }
            if resp.canceled() {
                let _ = tx
                    .send(Ok(line(
                        "ERROR",
                        &ApiError::internal(resp.cancel_reason()).to_status(),
                    )))
                    .await;
                return;
            }
            let header_revision = resp.header().map(|h| h.revision()).unwrap_or(0);
            if resp.events().is_empty() {
                // A progress notification: everything up to this revision has been sent.
                if header_revision > last_revision {
                    last_revision = header_revision;
                }
                if bookmarks && last_bookmark.elapsed() >= BOOKMARK_EVERY {
                    last_bookmark = tokio::time::Instant::now();
                    if tx
                        .send(Ok(line("BOOKMARK", &bookmark(&rt, last_revision))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                continue;
            }
            for event in resp.events() {
                let Some(out) = translate(&server, &rt, &filter, event) else {
                    continue;
                };
                if tx.send(Ok(out)).await.is_err() {
                    return;
                }
            }
            last_revision = last_revision.max(
                resp.events()
                    .iter()
                    .filter_map(|e| e.kv().map(|kv| kv.mod_revision()))
                    .max()
                    .unwrap_or(0),
            );
        }
    });

    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}

/// One etcd event as a watch event, honouring selector transitions.
fn translate(
    server: &Shared,
    rt: &ResourceType,
    filter: &Filter,
    event: &etcd_client::Event,
) -> Option<Bytes> {
    let kv = event.kv()?;
    let revision = kv.mod_revision();
    let old = event
        .prev_kv()
        .and_then(|p| decode(p.key(), p.value(), revision).ok())
        .map(|o| server.present(rt, o));
    match event.event_type() {
        EventType::Put => {
            let new = server.present(rt, decode(kv.key(), kv.value(), revision).ok()?);
            let new_matches = filter.matches(&new);
            let old_matches = old.as_ref().is_some_and(|o| filter.matches(o));
            match (
                old.is_some() && kv.create_revision() != kv.mod_revision(),
                new_matches,
                old_matches,
            ) {
                (false, true, _) => Some(line("ADDED", &new)),
                (true, true, true) => Some(line("MODIFIED", &new)),
                (true, true, false) => Some(line("ADDED", &new)),
                (true, false, true) => Some(line("DELETED", old.as_ref()?)),
                _ => None,
            }
        }
        EventType::Delete => {
            let old = old?;
            filter.matches(&old).then(|| line("DELETED", &old))
        }
    }
}
