//! The chart's README, generated from `values.yaml` (no I/O): every value with its type, its
//! default and the `# --` comment above it (helm-docs' convention: a comment starting `# --`
//! documents the key below it; the comment lines after it continue it). `make chart-docs`
//! writes it; a test fails when the committed README is stale.

use serde_json::Value;

/// One documented or leaf value.
#[derive(Debug, PartialEq, Eq)]
pub struct ValueDoc {
    /// Dotted path, e.g. `clusterOperator.serviceAccount.name`.
    pub key: String,
    pub doc: Option<String>,
}

/// The chart's values in file order: every key with a `# --` comment, and every other leaf (a
/// key with an inline value) unless a documented key above it covers it (its default shows it).
pub fn values(values_yaml: &str) -> Vec<ValueDoc> {
    let mut out = Vec::new();
    let mut stack: Vec<(usize, String, bool)> = Vec::new();
    let mut pending: Option<String> = None;
    for line in values_yaml.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            pending = None;
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(doc) = comment.strip_prefix("--") {
                pending = Some(doc.trim().to_owned());
            } else if let Some(doc) = pending.as_mut() {
                doc.push(' ');
                doc.push_str(comment);
            }
            continue;
        }
        if trimmed.starts_with('-') {
            continue; // a block list's item: part of its key's default
        }
        let Some((key, rest)) = trimmed.split_once(':') else {
            continue;
        };
        while stack.last().is_some_and(|(i, _, _)| *i >= indent) {
            stack.pop();
        }
        let path: Vec<&str> = stack
            .iter()
            .map(|(_, k, _)| k.as_str())
            .chain([key])
            .collect();
        let doc = pending.take();
        let doc_seen = doc.is_some();
        let leaf = !rest.trim().is_empty();
        let covered = stack.iter().any(|(_, _, documented)| *documented);
        if doc.is_some() || (leaf && !covered) {
            out.push(ValueDoc {
                key: path.join("."),
                doc,
            });
        }
        stack.push((indent, key.to_owned(), doc_seen));
    }
    out
}

/// The value at a dotted `key` of the parsed values.
fn at<'a>(root: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(root, |v, k| v.get(k))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The chart README: a short introduction and one table row per value.
pub fn readme(values_yaml: &str) -> Result<String, serde_saphyr::Error> {
    let parsed: Value = serde_saphyr::from_str(values_yaml)?;
    let mut out = String::from(
        "# etcd-operator chart\n\n\
         <!-- Generated from values.yaml by `make chart-docs`; edit the `# --` comments there. -->\n\n\
         The etcd operator's CRDs, its three operators (EtcdCluster, EtcdBackup, EtcdRestore) and an\n\
         optional scheduled backup. Install, quickstart and operations: the repository's README.md.\n\n\
         ```bash\n\
         helm install etcd-operator charts/etcd-operator -n etcd-operator --create-namespace --wait\n\
         helm test etcd-operator -n etcd-operator\n\
         ```\n\n\
         `values.schema.json` refuses a wrong type, an unknown key or a value out of range, naming it.\n\n\
         ## Values\n\n\
         | Key | Type | Default | Description |\n\
         |-----|------|---------|-------------|\n",
    );
    for entry in values(values_yaml) {
        let value = at(&parsed, &entry.key).unwrap_or(&Value::Null);
        let default = serde_json::to_string(value).unwrap_or_default();
        out.push_str(&format!(
            "| `{}` | {} | `{}` | {} |\n",
            entry.key,
            type_name(value),
            cell(&default),
            cell(entry.doc.as_deref().unwrap_or_default())
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SAMPLE: &str = "\
crds:
  # -- Install the CRDs. Set
  # to false elsewhere.
  enabled: true
# A plain comment documents nothing.
plain: 1

image:
  # -- Registry | mirror.
  registry: \"\"
  pullPolicy: IfNotPresent
# -- Pull secrets.
imagePullSecrets: []
op:
  # -- Resources.
  resources:
    requests: {cpu: 50m}
  extraArgs:
    - --x
";

    #[test]
    fn keys_docs_types_and_defaults() {
        let docs = values(SAMPLE);
        let keys: Vec<&str> = docs.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "crds.enabled",
                "plain",
                "image.registry",
                "image.pullPolicy",
                "imagePullSecrets",
                "op.resources",
            ]
        );
        assert_eq!(
            docs[0].doc.as_deref(),
            Some("Install the CRDs. Set to false elsewhere.")
        );
        assert_eq!(docs[1].doc, None);
        let readme = readme(SAMPLE).unwrap();
        assert!(
            readme.contains(
                "| `crds.enabled` | bool | `true` | Install the CRDs. Set to false elsewhere. |"
            ),
            "{readme}"
        );
        assert!(readme.contains("| `image.registry` | string | `\"\"` | Registry \\| mirror. |"));
        assert!(readme.contains(
            "| `op.resources` | object | `{\"requests\":{\"cpu\":\"50m\"}}` | Resources. |"
        ));
    }
}
