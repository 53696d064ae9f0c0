//! The API reference in Markdown, generated from the CRDs (so from the Rust types and their doc
//! comments, like `kubectl explain`): one table per kind and per `spec`/`status`, one row per
//! field with its type, constraints and the first paragraph of its description. Pure.
//! `crdgen reference` prints it; `make crds` writes it to `crates/etcd-api/API.md`, and a test
//! fails when the committed file is stale.

use serde_json::Value;

use crate::crd;

/// The whole reference.
pub fn markdown() -> String {
    let mut out = String::from(
        "# API reference: `etcd.operator.rs/v1alpha1`\n\n\
         Generated from the Rust types (`crates/etcd-api`) by `make crds`; do not edit. \
         `kubectl explain <kind>.spec` shows the same text on a cluster.\n",
    );
    for crd in crd::all() {
        let kind = &crd.spec.names.kind;
        let Some(schema) = crd::openapi_schema(&crd) else {
            continue;
        };
        out.push_str(&format!("\n## {kind}\n\n"));
        if let Some(description) = schema.get("description").and_then(Value::as_str) {
            out.push_str(&format!("{}\n", first_paragraph(description)));
        }
        if let Some(short) = &crd.spec.names.short_names {
            out.push_str(&format!("\nShort names: `{}`.\n", short.join("`, `")));
        }
        for part in ["spec", "status"] {
            let Some(section) = schema.pointer(&format!("/properties/{part}")) else {
                continue;
            };
            out.push_str(&format!(
                "\n### {kind}.{part}\n\n| field | type | description |\n|---|---|---|\n"
            ));
            let mut rows = Vec::new();
            walk(section, part, &mut rows);
            for (path, kind, description) in rows {
                out.push_str(&format!("| `{path}` | {kind} | {description} |\n"));
            }
        }
    }
    out
}

/// Kubernetes' own types inside ours: one row naming the type, not its hundred fields
/// (`kubectl explain` has those).
const KUBERNETES_TYPES: [(&str, &str); 3] = [
    ("spec.pod.affinity", "core/v1 `Affinity`"),
    ("spec.pod.resources", "core/v1 `ResourceRequirements`"),
    ("spec.pod.tolerations", "core/v1 `Toleration`s"),
];

/// One row per property below `schema`, depth first, in the schema's (alphabetical) order.
fn walk(schema: &Value, path: &str, rows: &mut Vec<(String, String, String)>) {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        let child = format!("{path}.{name}");
        let mut description = property
            .get("description")
            .and_then(Value::as_str)
            .map(first_paragraph)
            .unwrap_or_default();
        let constraints = constraints(property, required.contains(&name.as_str()));
        if !constraints.is_empty() {
            if !description.is_empty() {
                description.push(' ');
            }
            description.push_str(&format!("*({constraints})*"));
        }
        if let Some((_, named)) = KUBERNETES_TYPES.iter().find(|(p, _)| *p == child) {
            rows.push((child.clone(), (*named).to_owned(), cell(&description)));
            continue;
        }
        rows.push((child.clone(), type_of(property), cell(&description)));
        match property.get("type").and_then(Value::as_str) {
            Some("array") => {
                if let Some(items) = property.get("items") {
                    walk(items, &format!("{child}[]"), rows);
                }
            }
            _ => walk(property, &child, rows),
        }
    }
}

fn type_of(property: &Value) -> String {
    let kind = property.get("type").and_then(Value::as_str);
    match kind {
        Some("array") => {
            let item = property.get("items").map(type_of).unwrap_or_default();
            format!("[]{item}")
        }
        Some(kind) => kind.to_owned(),
        None if property.get("x-kubernetes-int-or-string").is_some() => "int-or-string".into(),
        None if property
            .get("x-kubernetes-preserve-unknown-fields")
            .is_some() =>
        {
            "object".into()
        }
        None => "object".into(),
    }
}

fn constraints(property: &Value, required: bool) -> String {
    let mut parts = Vec::new();
    if required {
        parts.push("required".to_owned());
    }
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values
            .iter()
            .filter_map(Value::as_str)
            .map(|v| format!("`{v}`"))
            .collect();
        parts.push(format!("one of {}", values.join(", ")));
    }
    if let Some(default) = property.get("default") {
        parts.push(format!("default `{default}`"));
    }
    let number = |key: &str| property.get(key).and_then(Value::as_f64);
    match (number("minimum"), number("maximum")) {
        (Some(min), Some(max)) => parts.push(format!("{min}..={max}")),
        (Some(min), None) => parts.push(format!(">= {min}")),
        (None, Some(max)) => parts.push(format!("<= {max}")),
        (None, None) => {}
    }
    if let Some(max) = property.get("maxLength").and_then(Value::as_u64) {
        parts.push(format!("at most {max} characters"));
    }
    for rule in property
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(message) = rule.get("message").and_then(Value::as_str) {
            parts.push(message.to_owned());
        }
    }
    parts.join("; ")
}

fn first_paragraph(text: &str) -> String {
    text.split("\n\n")
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_kind_and_the_fixed_field_names_are_documented() {
        let reference = markdown();
        for heading in [
            "## EtcdCluster",
            "### EtcdCluster.spec",
            "### EtcdCluster.status",
            "## EtcdBackup",
            "## EtcdRestore",
        ] {
            assert!(reference.contains(heading), "{heading} missing");
        }
        for field in [
            "`spec.size` | integer",
            "`spec.storage.reclaimPolicy`",
            "`status.members[].leader`",
            "`spec.s3.credentialsSecretRef.name`",
            "`spec.source.backupRef.name`",
            "`status.restoredRevision`",
        ] {
            assert!(reference.contains(field), "{field} missing");
        }
        // Constraints come from the schema: the size range, the reclaim policy's values.
        let size = reference
            .lines()
            .find(|l| l.starts_with("| `spec.size`"))
            .unwrap();
        assert!(size.contains("1..=7"), "{size}");
        assert!(reference.contains("one of `Retain`, `Delete`"));
    }
}
