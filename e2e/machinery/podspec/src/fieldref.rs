//! The downward API: `fieldRef` and `resourceFieldRef` values, shared by env vars and
//! `downwardAPI` volume files, with kubelet's error texts.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ObjectFieldSelector, Pod, ResourceFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

use crate::PodContext;
use crate::quantity::{Amount, divide_ceil};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FieldRefError {
    #[error("unsupported pod version: {0}")]
    UnsupportedVersion(String),
    #[error("field label not supported: {0}")]
    LabelNotSupported(String),
    #[error("field label does not support subscript: {0}")]
    LabelNoSubscript(String),
    #[error("invalid key subscript in {path}: {messages}")]
    InvalidSubscript { path: String, messages: String },
    #[error("fieldPath {} does not support subscript", localkube_gofmt::quote(.0))]
    PathNoSubscript(String),
    #[error("unsupported fieldPath: {0}")]
    UnsupportedPath(String),
    #[error("unsupported container resource : {0}")]
    UnsupportedResource(String),
    #[error("container {0} not found")]
    ContainerNotFound(String),
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    BadQuantity,
    #[error("host IPs are not known yet")]
    NoHostIp,
}

/// `fieldpath.ExtractFieldPathAsString` on a pod: the metadata fields, which is all a
/// `downwardAPI` volume file may name.
pub fn metadata_field(pod: &Pod, field_path: &str) -> Result<String, FieldRefError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((path, subscript)) = split_subscript(field_path) {
        return match path {
            "metadata.annotations" => {
                check_qualified_name(field_path, &subscript.to_lowercase())?;
                Ok(annotations.get(subscript).cloned().unwrap_or_default())
            }
            "metadata.labels" => {
                check_qualified_name(field_path, subscript)?;
                Ok(labels.get(subscript).cloned().unwrap_or_default())
            }
            _ => Err(FieldRefError::PathNoSubscript(field_path.to_owned())),
        };
    }
    match field_path {
        "metadata.annotations" => Ok(format_map(annotations)),
        "metadata.labels" => Ok(format_map(labels)),
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        _ => Err(FieldRefError::UnsupportedPath(field_path.to_owned())),
    }
}

/// kubelet's `podFieldSelectorRuntimeValue` for an env var: the label is first checked against
/// the downward API's list (`ConvertDownwardAPIFieldLabel`), then spec/status fields come from
/// the pod and the node, and the rest from [`metadata_field`].
pub fn env_field(
    pod: &Pod,
    selector: &ObjectFieldSelector,
    ctx: &PodContext,
) -> Result<String, FieldRefError> {
    let version = selector.api_version.as_deref().unwrap_or("v1");
    if version != "v1" {
        return Err(FieldRefError::UnsupportedVersion(version.to_owned()));
    }
    let label = selector.field_path.as_str();
    let label = match split_subscript(label) {
        Some(("metadata.annotations" | "metadata.labels", _)) => label,
        Some(_) => return Err(FieldRefError::LabelNoSubscript(label.to_owned())),
        None => match label {
            "spec.host" => "spec.nodeName",
            "metadata.annotations"
            | "metadata.labels"
            | "metadata.name"
            | "metadata.namespace"
            | "metadata.uid"
            | "spec.nodeName"
            | "spec.restartPolicy"
            | "spec.serviceAccountName"
            | "spec.schedulerName"
            | "status.phase"
            | "status.hostIP"
            | "status.hostIPs"
            | "status.podIP"
            | "status.podIPs" => label,
            _ => return Err(FieldRefError::LabelNotSupported(label.to_owned())),
        },
    };
    let spec = pod.spec.as_ref();
    match label {
        "spec.nodeName" => Ok(spec.and_then(|s| s.node_name.clone()).unwrap_or_default()),
        "spec.serviceAccountName" => Ok(spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default()),
        "status.hostIP" => ctx.host_ips.first().cloned().ok_or(FieldRefError::NoHostIp),
        "status.hostIPs" if ctx.host_ips.is_empty() => Err(FieldRefError::NoHostIp),
        "status.hostIPs" => Ok(ctx.host_ips.join(",")),
        "status.podIP" => Ok(ctx.pod_ips.first().cloned().unwrap_or_default()),
        "status.podIPs" => Ok(ctx.pod_ips.join(",")),
        other => metadata_field(pod, other),
    }
}

/// `resourceFieldRef`: a container's request or limit divided by `divisor` (default 1), rounded
/// up; CPU is computed in millicores. A limit the container does not set reads as the node's
/// allocatable amount, as kubelet's `defaultPodLimitsForDownwardAPI` arranges.
pub fn resource_field(
    selector: &ResourceFieldSelector,
    pod: &Pod,
    default_container: Option<&Container>,
    ctx: &PodContext,
) -> Result<String, FieldRefError> {
    let container = match selector.container_name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => pod
            .spec
            .iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .find(|c| c.name == name)
            .ok_or_else(|| FieldRefError::ContainerNotFound(name.to_owned()))?,
        None => default_container.ok_or_else(|| FieldRefError::ContainerNotFound(String::new()))?,
    };
    let divisor = match &selector.divisor {
        Some(q) => Amount::parse(&q.0).map_err(|_| FieldRefError::BadQuantity)?,
        None => Amount::ZERO,
    };
    let divisor = if divisor == Amount::ZERO {
        Amount::parse("1").map_err(|_| FieldRefError::BadQuantity)?
    } else {
        divisor
    };
    let (kind, resource) = selector
        .resource
        .split_once('.')
        .ok_or_else(|| FieldRefError::UnsupportedResource(selector.resource.clone()))?;
    if !matches!(kind, "limits" | "requests")
        || !matches!(resource, "cpu" | "memory" | "ephemeral-storage")
    {
        return Err(FieldRefError::UnsupportedResource(
            selector.resource.clone(),
        ));
    }
    let resources = container.resources.as_ref();
    let list = |requests: bool| {
        resources.and_then(|r| {
            if requests {
                r.requests.as_ref()
            } else {
                r.limits.as_ref()
            }
        })
    };
    let set = list(kind == "requests")
        .and_then(|l| l.get(resource))
        .map(parse)
        .transpose()?
        .filter(|a| *a != Amount::ZERO);
    let amount = match (set, kind) {
        (Some(a), _) => a,
        (None, "limits") => ctx
            .node_allocatable
            .get(resource)
            .map(parse)
            .transpose()?
            .unwrap_or(Amount::ZERO),
        (None, _) => Amount::ZERO,
    };
    let value = if resource == "cpu" {
        divide_ceil(amount.milli_value(), divisor.milli_value())
    } else {
        divide_ceil(amount.value(), divisor.value())
    };
    Ok(value.to_string())
}

fn parse(q: &Quantity) -> Result<Amount, FieldRefError> {
    Amount::parse(&q.0).map_err(|_| FieldRefError::BadQuantity)
}

/// `metadata.labels['key']` → (`metadata.labels`, `key`), as `SplitMaybeSubscriptedPath`.
fn split_subscript(field_path: &str) -> Option<(&str, &str)> {
    let inner = field_path.strip_suffix("']")?;
    let (path, subscript) = inner.split_once("['")?;
    if path.is_empty() {
        return None;
    }
    Some((path, subscript))
}

/// `fieldpath.FormatMap`: `key="value"` lines in key order, values quoted like Go's `%q`.
fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={}", localkube_gofmt::quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `validation.IsQualifiedName` with its messages joined by `;` as kubelet reports them.
fn check_qualified_name(field_path: &str, value: &str) -> Result<(), FieldRefError> {
    let mut errs: Vec<String> = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            name
        }
        _ => {
            errs.push(format!(
                "a qualified name {QUALIFIED_NAME_ERR} (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return Err(invalid_subscript(field_path, &errs));
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_owned());
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let well_formed = name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || "-_.".contains(c));
    if !name.is_empty() && !well_formed {
        errs.push(format!(
            "name part {QUALIFIED_NAME_ERR} (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}')"
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(invalid_subscript(field_path, &errs))
    }
}

fn invalid_subscript(field_path: &str, errs: &[String]) -> FieldRefError {
    FieldRefError::InvalidSubscript {
        path: field_path.to_owned(),
        messages: errs.join(";"),
    }
}

fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 bytes".to_owned());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && l.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if !value.split('.').all(label_ok) {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u-1",
                "labels": {"app": "etcd", "tier": "db\"x"},
                "annotations": {"example.com/Key": "v"}
            },
            "spec": {
                "nodeName": "node-1", "serviceAccountName": "sa",
                "containers": [{
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "64Mi"},
                        "limits": {"memory": "128Mi"}
                    }
                }, {"name": "other", "resources": {"limits": {"cpu": "2"}}}]
            }
        }))
        .unwrap()
    }

    fn ctx() -> PodContext {
        PodContext {
            pod_ips: vec!["10.244.0.5".into()],
            host_ips: vec!["10.244.0.1".into(), "fd00::1".into()],
            node_allocatable: [
                ("cpu".to_owned(), Quantity("4".into())),
                ("memory".to_owned(), Quantity("8Gi".into())),
            ]
            .into_iter()
            .collect(),
        }
    }

    fn sel(path: &str) -> ObjectFieldSelector {
        ObjectFieldSelector {
            api_version: Some("v1".into()),
            field_path: path.into(),
        }
    }

    #[test]
    fn env_fields() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("metadata.name", Ok("p")),
            ("metadata.namespace", Ok("ns")),
            ("metadata.uid", Ok("u-1")),
            ("metadata.labels['app']", Ok("etcd")),
            ("metadata.labels['missing']", Ok("")),
            ("metadata.annotations['example.com/Key']", Ok("v")),
            ("metadata.labels", Ok("app=\"etcd\"\ntier=\"db\\\"x\"")),
            ("spec.nodeName", Ok("node-1")),
            ("spec.host", Ok("node-1")),
            ("spec.serviceAccountName", Ok("sa")),
            ("status.podIP", Ok("10.244.0.5")),
            ("status.podIPs", Ok("10.244.0.5")),
            ("status.hostIP", Ok("10.244.0.1")),
            ("status.hostIPs", Ok("10.244.0.1,fd00::1")),
            (
                "spec.containers",
                Err("field label not supported: spec.containers"),
            ),
            (
                "spec.nodeName['x']",
                Err("field label does not support subscript: spec.nodeName['x']"),
            ),
            ("status.phase", Err("unsupported fieldPath: status.phase")),
            (
                "metadata.labels['a/b/c']",
                Err(
                    "invalid key subscript in metadata.labels['a/b/c']: a qualified name must consist of",
                ),
            ),
            (
                "metadata.labels['-x']",
                Err("invalid key subscript in metadata.labels['-x']: name part must consist"),
            ),
        ];
        for (path, expected) in cases {
            let got = env_field(&pod(), &sel(path), &ctx()).map_err(|e| e.to_string());
            match (got, expected) {
                (Ok(v), Ok(want)) => assert_eq!(v, *want, "{path}"),
                (Err(e), Err(want)) => assert!(e.starts_with(want), "{path}: {e}"),
                (got, want) => panic!("{path}: got {got:?}, want {want:?}"),
            }
        }
        let v2 = ObjectFieldSelector {
            api_version: Some("v2".into()),
            field_path: "metadata.name".into(),
        };
        assert_eq!(
            env_field(&pod(), &v2, &ctx()).unwrap_err().to_string(),
            "unsupported pod version: v2"
        );
        let no_host = PodContext::default();
        assert_eq!(
            env_field(&pod(), &sel("status.hostIP"), &no_host),
            Err(FieldRefError::NoHostIp)
        );
    }

    #[test]
    fn metadata_fields_for_volumes() {
        assert_eq!(
            metadata_field(&pod(), "metadata.annotations").unwrap(),
            "example.com/Key=\"v\""
        );
        assert_eq!(
            metadata_field(&pod(), "spec.nodeName")
                .unwrap_err()
                .to_string(),
            "unsupported fieldPath: spec.nodeName"
        );
        assert_eq!(
            metadata_field(&pod(), "spec.x['y']")
                .unwrap_err()
                .to_string(),
            "fieldPath \"spec.x['y']\" does not support subscript"
        );
    }

    #[test]
    fn resource_fields() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let rf = |resource: &str, divisor: Option<&str>, container: Option<&str>| {
            ResourceFieldSelector {
                resource: resource.into(),
                divisor: divisor.map(|d| Quantity(d.into())),
                container_name: container.map(Into::into),
            }
        };
        let cases: &[(ResourceFieldSelector, Result<&str, &str>)] = &[
            (rf("requests.cpu", None, None), Ok("1")),
            (rf("requests.cpu", Some("1m"), None), Ok("250")),
            (rf("requests.memory", None, None), Ok("67108864")),
            (rf("requests.memory", Some("1Mi"), None), Ok("64")),
            (rf("limits.memory", Some("1Mi"), None), Ok("128")),
            // unset limit reads as node allocatable
            (rf("limits.cpu", None, None), Ok("4")),
            (rf("limits.cpu", Some("1m"), Some("other")), Ok("2000")),
            (rf("requests.ephemeral-storage", None, None), Ok("0")),
            (
                rf("limits.gpu", None, None),
                Err("unsupported container resource : limits.gpu"),
            ),
            (
                rf("cpu", None, None),
                Err("unsupported container resource : cpu"),
            ),
            (
                rf("limits.cpu", None, Some("nope")),
                Err("container nope not found"),
            ),
            (
                rf("limits.cpu", Some("x"), None),
                Err("quantities must match"),
            ),
        ];
        for (selector, expected) in cases {
            let got = resource_field(selector, &p, Some(c), &ctx()).map_err(|e| e.to_string());
            match (got, expected) {
                (Ok(v), Ok(want)) => assert_eq!(v, *want, "{selector:?}"),
                (Err(e), Err(want)) => assert!(e.starts_with(want), "{selector:?}: {e}"),
                (got, want) => panic!("{selector:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
