//! Server-side `meta.k8s.io/v1 Table` output (spec §a9), which `kubectl get` asks for: custom
//! resources get `Name`, their `additionalPrinterColumns` and `Age`; built-ins the columns
//! kubectl users know; anything else `Name` and `Created At`.

use serde_json::{Value, json};

use crate::api::Query;
use crate::api::resources::ResourceType;

fn column(name: &str, kind: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({ "name": name, "type": kind, "format": format, "description": description, "priority": priority })
}

/// A tiny JSONPath subset for printer columns: `.a.b`, `.a[0].b`, `.a[*].b` (joined by commas)
/// and filters on a field's value, `.a[?(@.type=="Ready")].status`, as kube-apiserver evaluates
/// them for `additionalPrinterColumns`.
pub fn json_path(obj: &Value, path: &str) -> Vec<Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut current = vec![obj.clone()];
    for raw in segments(path) {
        let (field, index) = match raw.split_once('[') {
            Some((f, rest)) => (f, Some(rest.strip_suffix(']').unwrap_or(rest))),
            None => (raw, None),
        };
        let mut next = Vec::new();
        for v in current {
            let v = if field.is_empty() {
                v
            } else {
                v.get(field).cloned().unwrap_or(Value::Null)
            };
            match index {
                None => next.push(v),
                Some("*") => next.extend(v.as_array().cloned().unwrap_or_default()),
                Some(filter) if filter.starts_with("?(") => {
                    let items = v.as_array().cloned().unwrap_or_default();
                    next.extend(
                        items
                            .into_iter()
                            .filter(|item| matches_filter(item, filter)),
                    );
                }
                Some(i) => {
                    if let Ok(i) = i.parse::<usize>() {
                        next.push(v.get(i).cloned().unwrap_or(Value::Null));
                    }
                }
            }
        }
        current = next;
    }
    current.into_iter().filter(|v| !v.is_null()).collect()
}

/// The path split on dots outside brackets (a filter has dots of its own).
fn segments(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in path.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                if i > start {
                    out.push(&path[start..i]);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < path.len() {
        out.push(&path[start..]);
    }
    out
}

/// `?(@.key=="value")` (or single quotes, or `!=`) against one array item.
fn matches_filter(item: &Value, filter: &str) -> bool {
    let body = filter.trim_start_matches("?(").trim_end_matches(')').trim();
    let (left, right, equal) = match body.split_once("!=") {
        Some((l, r)) => (l, r, false),
        None => match body.split_once("==") {
            Some((l, r)) => (l, r, true),
            None => return false,
        },
    };
    let Some(key) = left.trim().strip_prefix("@.") else {
        return false;
    };
    let wanted = right.trim().trim_matches(|c| c == '"' || c == '\'');
    let actual = json_path(item, key);
    let found = actual.iter().any(|v| match v {
        Value::String(s) => s == wanted,
        other => serde_json::to_string(other).is_ok_and(|text| text == wanted),
    });
    found == equal
}

fn cell(values: Vec<Value>, kind: &str) -> Value {
    match values.as_slice() {
        [] => Value::Null,
        [one] => match (kind, one) {
            ("string", Value::String(_)) => one.clone(),
            ("date", Value::String(ts)) => json!(human_age(ts)),
            ("string", other) => json!(other.to_string()),
            _ => one.clone(),
        },
        many => json!(
            many.iter()
                .map(|v| v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

fn age(obj: &Value) -> Value {
    json!(human_age(
        obj["metadata"]["creationTimestamp"].as_str().unwrap_or("")
    ))
}

/// A timestamp as the time since then, the way kube-apiserver fills `date` cells
/// (`ConvertToHumanReadableDateType`).
fn human_age(timestamp: &str) -> String {
    match timestamp.parse::<jiff::Timestamp>() {
        Ok(t) => human_duration((jiff::Timestamp::now() - t).get_seconds()),
        Err(_) => "<unknown>".into(),
    }
}

/// apimachinery's `duration.HumanDuration`: two significant units, coarser with age.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn partial(obj: &Value) -> Value {
    json!({ "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"] })
}

/// The cells of one row of a built-in kind.
type RowCells = fn(&Value) -> Vec<Value>;

fn builtin_columns(rt: &ResourceType) -> Option<(Vec<Value>, RowCells)> {
    let name = column(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace.",
        0,
    );
    let age_col = column(
        "Age",
        "date",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        0,
    );
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Pod") => Some((
            vec![
                name,
                column(
                    "Ready",
                    "string",
                    "",
                    "The aggregate readiness state of this pod for accepting traffic.",
                    0,
                ),
                column(
                    "Status",
                    "string",
                    "",
                    "The aggregate status of the containers in this pod.",
                    0,
                ),
                column(
                    "Restarts",
                    "string",
                    "",
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                    0,
                ),
                age_col,
                column("IP", "string", "", "The IP address assigned to the pod", 1),
                column(
                    "Node",
                    "string",
                    "",
                    "The name of the node assigned to the pod",
                    1,
                ),
            ],
            |o| {
                let statuses = o["status"]["containerStatuses"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let total = o["spec"]["containers"]
                    .as_array()
                    .map(Vec::len)
                    .unwrap_or(0);
                let ready = statuses
                    .iter()
                    .filter(|s| s["ready"] == json!(true))
                    .count();
                let restarts: i64 = statuses
                    .iter()
                    .filter_map(|s| s["restartCount"].as_i64())
                    .sum();
                let waiting = statuses
                    .iter()
                    .find_map(|s| s["state"]["waiting"]["reason"].as_str().map(str::to_string));
                let status = if o["metadata"]["deletionTimestamp"].is_string() {
                    "Terminating".to_string()
                } else {
                    waiting.unwrap_or_else(|| {
                        o["status"]["phase"]
                            .as_str()
                            .unwrap_or("Pending")
                            .to_string()
                    })
                };
                vec![
                    o["metadata"]["name"].clone(),
                    json!(format!("{ready}/{total}")),
                    json!(status),
                    json!(restarts.to_string()),
                    age(o),
                    o["status"]["podIP"]
                        .as_str()
                        .map(|s| json!(s))
                        .unwrap_or(json!("<none>")),
                    o["spec"]["nodeName"]
                        .as_str()
                        .map(|s| json!(s))
                        .unwrap_or(json!("<none>")),
                ]
            },
        )),
        ("apps", "Deployment") => Some((
            vec![
                name,
                column(
                    "Ready",
                    "string",
                    "",
                    "Number of the pod with ready state",
                    0,
                ),
                column(
                    "Up-to-date",
                    "integer",
                    "",
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                    0,
                ),
                column(
                    "Available",
                    "integer",
                    "",
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                    0,
                ),
                age_col,
            ],
            |o| {
                let ready = o["status"]["readyReplicas"].as_i64().unwrap_or(0);
                let want = o["spec"]["replicas"].as_i64().unwrap_or(0);
                vec![
                    o["metadata"]["name"].clone(),
                    json!(format!("{ready}/{want}")),
                    json!(o["status"]["updatedReplicas"].as_i64().unwrap_or(0)),
                    json!(o["status"]["availableReplicas"].as_i64().unwrap_or(0)),
                    age(o),
                ]
            },
        )),
        ("", "Service") => Some((
            vec![
                name,
                column("Type", "string", "", "The type of service.", 0),
                column(
                    "Cluster-IP",
                    "string",
                    "",
                    "The cluster IP of the service.",
                    0,
                ),
                column(
                    "External-IP",
                    "string",
                    "",
                    "The external IP of the service.",
                    0,
                ),
                column("Port(s)", "string", "", "The ports of the service.", 0),
                age_col,
            ],
            |o| {
                let ports: Vec<String> = o["spec"]["ports"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|p| format!("{}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP")))
                    .collect();
                vec![
                    o["metadata"]["name"].clone(),
                    o["spec"]["type"].clone(),
                    o["spec"]["clusterIP"].clone(),
                    json!("<none>"),
                    json!(if ports.is_empty() {
                        "<none>".to_string()
                    } else {
                        ports.join(",")
                    }),
                    age(o),
                ]
            },
        )),
        ("", "PersistentVolumeClaim") => Some((
            vec![
                name,
                column("Status", "string", "", "", 0),
                column("Volume", "string", "", "", 0),
                column("Capacity", "string", "", "", 0),
                age_col,
            ],
            |o| {
                vec![
                    o["metadata"]["name"].clone(),
                    o["status"]["phase"].clone(),
                    o["spec"]["volumeName"].clone(),
                    o["status"]["capacity"]["storage"].clone(),
                    age(o),
                ]
            },
        )),
        ("", "Namespace") => Some((
            vec![
                name,
                column("Status", "string", "", "The status of the namespace", 0),
                age_col,
            ],
            |o| {
                vec![
                    o["metadata"]["name"].clone(),
                    o["status"]["phase"].clone(),
                    age(o),
                ]
            },
        )),
        _ => None,
    }
}

pub fn table(rt: &ResourceType, items: Vec<Value>, metadata: Value, query: &Query) -> Value {
    let include_object = query.get("includeObject").map(String::as_str) == Some("Object");
    let wrap = |o: &Value| {
        if include_object {
            o.clone()
        } else {
            partial(o)
        }
    };
    let (columns, rows): (Vec<Value>, Vec<Value>) = if let Some(custom) = &rt.custom {
        let mut columns = vec![column(
            "Name",
            "string",
            "name",
            "Name must be unique within a namespace.",
            0,
        )];
        let defs = custom.printer_columns.clone();
        let has_age = defs
            .iter()
            .any(|d| d["jsonPath"] == ".metadata.creationTimestamp");
        for d in &defs {
            columns.push(column(
                d["name"].as_str().unwrap_or(""),
                d["type"].as_str().unwrap_or("string"),
                d["format"].as_str().unwrap_or(""),
                d["description"].as_str().unwrap_or(""),
                d["priority"].as_i64().unwrap_or(0),
            ));
        }
        if !has_age {
            columns.push(column("Age", "date", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0));
        }
        let rows = items
            .iter()
            .map(|o| {
                let mut cells = vec![o["metadata"]["name"].clone()];
                for d in &defs {
                    cells.push(cell(
                        json_path(o, d["jsonPath"].as_str().unwrap_or("")),
                        d["type"].as_str().unwrap_or("string"),
                    ));
                }
                if !has_age {
                    cells.push(age(o));
                }
                json!({ "cells": cells, "object": wrap(o) })
            })
            .collect();
        (columns, rows)
    } else if let Some((columns, cells)) = builtin_columns(rt) {
        let rows = items
            .iter()
            .map(|o| json!({ "cells": cells(o), "object": wrap(o) }))
            .collect();
        (columns, rows)
    } else {
        let columns = vec![
            column(
                "Name",
                "string",
                "name",
                "Name must be unique within a namespace.",
                0,
            ),
            column(
                "Created At",
                "date",
                "",
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
                0,
            ),
        ];
        let rows = items
            .iter()
            .map(|o| json!({ "cells": [o["metadata"]["name"], age(o)], "object": wrap(o) }))
            .collect();
        (columns, rows)
    };
    json!({ "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": columns, "rows": rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (40 * 86400, "40d"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn json_path_reads_printer_column_paths() {
        let o = json!({"status": {"phase": "Running", "members": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(json_path(&o, ".status.phase"), vec![json!("Running")]);
        assert_eq!(
            cell(json_path(&o, ".status.members[*].name"), "string"),
            json!("a,b")
        );
        assert_eq!(json_path(&o, ".status.members[1].name"), vec![json!("b")]);
        assert!(json_path(&o, ".spec.size").is_empty());
        let c = json!({"status": {"conditions": [
            {"type": "Progressing", "status": "True"},
            {"type": "Available", "status": "False"},
        ]}});
        assert_eq!(
            json_path(&c, r#".status.conditions[?(@.type=="Available")].status"#),
            vec![json!("False")]
        );
        assert_eq!(
            json_path(&c, ".status.conditions[?(@.type!='Available')].type"),
            vec![json!("Progressing")]
        );
        assert!(json_path(&c, r#".status.conditions[?(@.type=="Ready")].status"#).is_empty());
    }
}
