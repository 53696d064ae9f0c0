//! Which field labels each kind accepts, and where each one's value comes from.
//!
//! Two upstream layers are transcribed here, kind by kind:
//! - acceptance and renaming: the conversion funcs registered with `AddFieldLabelConversionFunc`
//!   in `k8s.io/kubernetes/pkg/apis/<group>/<version>/conversion.go`, each with its own refusal
//!   wording; a kind with none falls back to `runtime.DefaultMetaV1FieldSelectorConversion`
//!   (`metadata.name` and `metadata.namespace` only, even for cluster-scoped kinds), and custom
//!   resources to apiextensions' `crConverter.ConvertFieldLabel`;
//! - values: the registry's `ToSelectableFields` (`pkg/registry/<group>/<kind>/strategy.go`),
//!   read here from the object's JSON in the version of the group asked for.
//!
//! Checked against upstream: `apps/v1` registers no conversion, so a ReplicaSet or Deployment
//! refuses `status.replicas` (only the core ReplicationController accepts it); Node and Namespace
//! refuse `metadata.namespace`; Pod accepts `status.podIPs` but never sets it, so it matches only
//! the empty value; Job's `status.successful` reads `status.succeeded`.

use serde_json::Value;

use super::parse::FieldSelectorError;

/// How a canonical field label's value is read from an object, mimicking the Go code that
/// stringifies typed fields (absent strings are `""`, absent bools `false`, absent ints `0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A string member at a dotted path; other scalars stringified, absent as `""`.
    Path(String),
    /// `strconv.FormatBool` of a bool member, `false` when absent.
    Bool(&'static str),
    /// `strconv.Itoa` of an integer member, `0` when absent.
    Int(&'static str),
    /// The first non-empty of two string members (Event `source`: the component, falling back
    /// to the reporting controller).
    FirstNonEmpty(&'static str, &'static str),
    /// Pod `status.podIP`: the first of `status.podIPs`, else the legacy scalar.
    PodIp,
    /// Accepted by the conversion func but never set by `ToSelectableFields`: always `""`.
    Unset,
}

/// One accepted label: the name a client may send, the canonical (internal) label upstream's
/// conversion turns it into, and where its value comes from.
struct Label {
    name: &'static str,
    canonical: &'static str,
    source: Source,
}

fn path(name: &'static str) -> Label {
    Label {
        name,
        canonical: name,
        source: Source::Path(name.to_string()),
    }
}

fn at(name: &'static str, source: Source) -> Label {
    Label {
        name,
        canonical: name,
        source,
    }
}

/// An events.k8s.io label, read from its own JSON path but renamed to the core Event label.
fn renamed(name: &'static str, canonical: &'static str) -> Label {
    Label {
        name,
        canonical,
        source: Source::Path(name.to_string()),
    }
}

/// The refusal wording of a kind's conversion func.
#[derive(Clone, Copy)]
enum Refusal {
    /// `field label not supported: <f>`.
    NotSupported,
    /// batch/v1 Job: `field label "<f>" not supported for Job`.
    Job,
    /// The default conversion: `"<f>" is not a known field selector: only ...`.
    NotKnown,
}

struct KindTable {
    labels: Vec<Label>,
    refusal: Refusal,
}

fn builtin_table(group: &str, kind: &str) -> KindTable {
    let name = || path("metadata.name");
    let namespace = || path("metadata.namespace");
    let (labels, refusal) = match (group, kind) {
        ("", "Pod") => (
            vec![
                name(),
                namespace(),
                path("spec.nodeName"),
                Label {
                    name: "spec.host",
                    canonical: "spec.nodeName",
                    source: Source::Path("spec.nodeName".into()),
                },
                path("spec.restartPolicy"),
                path("spec.schedulerName"),
                path("spec.serviceAccountName"),
                at("spec.hostNetwork", Source::Bool("spec.hostNetwork")),
                path("status.phase"),
                at("status.podIP", Source::PodIp),
                at("status.podIPs", Source::Unset),
                path("status.nominatedNodeName"),
            ],
            Refusal::NotSupported,
        ),
        ("", "Node") => (
            vec![
                name(),
                at("spec.unschedulable", Source::Bool("spec.unschedulable")),
            ],
            Refusal::NotSupported,
        ),
        ("", "ReplicationController") => (
            vec![
                name(),
                namespace(),
                at("status.replicas", Source::Int("status.replicas")),
            ],
            Refusal::NotSupported,
        ),
        ("", "Event") => (
            vec![
                path("involvedObject.kind"),
                path("involvedObject.namespace"),
                path("involvedObject.name"),
                path("involvedObject.uid"),
                path("involvedObject.apiVersion"),
                path("involvedObject.resourceVersion"),
                path("involvedObject.fieldPath"),
                path("reason"),
                path("reportingComponent"),
                at(
                    "source",
                    Source::FirstNonEmpty("source.component", "reportingComponent"),
                ),
                path("type"),
                namespace(),
                name(),
            ],
            Refusal::NotSupported,
        ),
        ("", "Namespace") => (vec![path("status.phase"), name()], Refusal::NotSupported),
        ("", "Secret") => (
            vec![path("type"), namespace(), name()],
            Refusal::NotSupported,
        ),
        ("", "Service") => (
            vec![
                namespace(),
                name(),
                path("spec.clusterIP"),
                path("spec.type"),
            ],
            Refusal::NotSupported,
        ),
        ("batch", "Job") => (
            vec![
                name(),
                namespace(),
                at("status.successful", Source::Int("status.succeeded")),
            ],
            Refusal::Job,
        ),
        ("events.k8s.io", "Event") => (
            vec![
                path("reason"),
                renamed("regarding.kind", "involvedObject.kind"),
                renamed("regarding.namespace", "involvedObject.namespace"),
                renamed("regarding.name", "involvedObject.name"),
                renamed("regarding.uid", "involvedObject.uid"),
                renamed("regarding.apiVersion", "involvedObject.apiVersion"),
                renamed(
                    "regarding.resourceVersion",
                    "involvedObject.resourceVersion",
                ),
                renamed("regarding.fieldPath", "involvedObject.fieldPath"),
                renamed("reportingController", "reportingComponent"),
                at(
                    "source",
                    Source::FirstNonEmpty("deprecatedSource.component", "reportingController"),
                ),
                path("type"),
                namespace(),
                name(),
            ],
            Refusal::NotSupported,
        ),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            (vec![name(), path("spec.signerName")], Refusal::NotSupported)
        }
        _ => (vec![name(), namespace()], Refusal::NotKnown),
    };
    KindTable { labels, refusal }
}

/// The kind a field selector is resolved against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldSchema<'a> {
    /// A built-in kind by API group (`""` for core) and kind, e.g. `("", "Pod")`,
    /// `("events.k8s.io", "Event")`. Objects are matched in that group's JSON form.
    BuiltIn { group: &'a str, kind: &'a str },
    /// A custom resource: `metadata.name`, `metadata.namespace` if namespaced, and the served
    /// version's `selectableFields` given as JSON paths (`.spec.color`; the leading dot optional).
    Custom {
        namespaced: bool,
        selectable_fields: &'a [String],
    },
}

/// The canonical label and where its value comes from, or the kind's refusal.
pub(crate) fn source_for(
    schema: &FieldSchema<'_>,
    label: &str,
) -> Result<(String, Source), FieldSelectorError> {
    match schema {
        FieldSchema::BuiltIn { group, kind } => {
            let table = builtin_table(group, kind);
            match table.labels.into_iter().find(|l| l.name == label) {
                Some(l) => Ok((l.canonical.to_string(), l.source)),
                None => Err(match table.refusal {
                    Refusal::NotSupported => FieldSelectorError::not_supported(label),
                    Refusal::Job => FieldSelectorError::UnsupportedField(format!(
                        "field label {} not supported for Job",
                        crate::gofmt::quote(label)
                    )),
                    Refusal::NotKnown => FieldSelectorError::not_known(label),
                }),
            }
        }
        FieldSchema::Custom {
            namespaced,
            selectable_fields,
        } => {
            let selectable = selectable_fields
                .iter()
                .any(|f| f.strip_prefix('.').unwrap_or(f) == label);
            if label == "metadata.name"
                || (*namespaced && label == "metadata.namespace")
                || selectable
            {
                Ok((label.to_string(), Source::Path(label.to_string())))
            } else {
                Err(FieldSelectorError::not_supported(label))
            }
        }
    }
}

fn lookup<'v>(object: &'v Value, dotted: &str) -> Option<&'v Value> {
    dotted
        .split('.')
        .try_fold(object, |v, segment| v.as_object()?.get(segment))
}

/// A scalar as Go's selectable-field code would print it; objects, arrays and null are absent.
fn scalar(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

impl Source {
    pub(crate) fn value(&self, object: &Value) -> String {
        match self {
            Self::Path(p) => scalar(lookup(object, p)),
            Self::Bool(p) => lookup(object, p)
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .to_string(),
            Self::Int(p) => lookup(object, p)
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .to_string(),
            Self::FirstNonEmpty(a, b) => {
                let first = scalar(lookup(object, a));
                if first.is_empty() {
                    scalar(lookup(object, b))
                } else {
                    first
                }
            }
            Self::PodIp => {
                let first = object
                    .pointer("/status/podIPs/0/ip")
                    .and_then(Value::as_str);
                first
                    .or_else(|| object.pointer("/status/podIP").and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_string()
            }
            Self::Unset => String::new(),
        }
    }
}
