//! The CustomResourceDefinitions, and their rendering into the Helm chart.
//!
//! Each CRD becomes one template in `charts/etcd-operator/templates/crds/`, wrapped in
//! `{{- if and .Values.crds.enabled .Values.crds.install }}` (`install` is the 0.1 spelling) and
//! annotated `helm.sh/resource-policy: keep` unless `crds.keep` is false. The CRDs sit
//! in `templates/` rather than Helm's `crds/` folder because Helm installs `crds/` once and never
//! upgrades it; the keep policy stops `helm uninstall` from deleting them, which would delete
//! every EtcdCluster, EtcdBackup and EtcdRestore in the cluster with them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{EtcdBackup, EtcdCluster, EtcdRestore};

/// Path of the generated templates, relative to the chart's root.
pub const CHART_CRD_DIR: &str = "templates/crds";
/// Annotation that keeps a resource when its Helm release is uninstalled.
pub const HELM_RESOURCE_POLICY: &str = "helm.sh/resource-policy";
/// Label naming what the CRDs belong to.
pub const PART_OF_LABEL: (&str, &str) = ("app.kubernetes.io/part-of", "etcd-operator");

/// The three CRDs, with the metadata every copy of them carries.
pub fn all() -> Vec<CustomResourceDefinition> {
    [EtcdCluster::crd(), EtcdBackup::crd(), EtcdRestore::crd()]
        .into_iter()
        .map(|mut crd| {
            crd.metadata
                .annotations
                .get_or_insert_default()
                .insert(HELM_RESOURCE_POLICY.into(), "keep".into());
            crd.metadata
                .labels
                .get_or_insert_default()
                .insert(PART_OF_LABEL.0.into(), PART_OF_LABEL.1.into());
            crd
        })
        .collect()
}

/// The `openAPIV3Schema` of a CRD's first version as JSON: what an API server validates objects
/// against, and what tests evaluate the CEL rules of.
pub fn openapi_schema(crd: &CustomResourceDefinition) -> Option<serde_json::Value> {
    let schema = crd
        .spec
        .versions
        .first()?
        .schema
        .as_ref()?
        .open_api_v3_schema
        .as_ref()?;
    serde_json::to_value(schema).ok()
}

/// A generated file of the chart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Path relative to the chart's root, e.g. `templates/crds/etcdclusters.etcd.operator.rs.yaml`.
    pub path: String,
    /// Full contents.
    pub contents: String,
}

/// Why the CRDs could not be rendered.
#[derive(Debug)]
pub enum RenderError {
    /// YAML serialization failed.
    Yaml(serde_saphyr::SerializeError),
    /// The YAML contains `{{`, which Helm would try to evaluate as a template.
    TemplateSyntax {
        /// The CRD whose text contains it.
        crd: String,
    },
    /// The CRD's YAML lacks the `helm.sh/resource-policy: keep` annotation block that
    /// `crds.keep` switches.
    MissingKeepPolicy {
        /// The CRD.
        crd: String,
    },
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RenderError::Yaml(error) => write!(f, "serializing a CRD to YAML: {error}"),
            RenderError::MissingKeepPolicy { crd } => write!(
                f,
                "the CRD {crd} has no `helm.sh/resource-policy: keep` annotation to make optional"
            ),
            RenderError::TemplateSyntax { crd } => write!(
                f,
                "the CRD {crd} contains '{{{{' (in a doc comment?), which Helm would evaluate as a template"
            ),
        }
    }
}

impl std::error::Error for RenderError {}

/// Plain YAML of one CRD, for `kubectl apply` without Helm.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    serde_saphyr::to_string(crd).map_err(RenderError::Yaml)
}

/// The chart templates of all CRDs, in a stable order.
pub fn chart_templates() -> Result<Vec<GeneratedFile>, RenderError> {
    all()
        .iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let yaml = to_yaml(crd)?;
            if yaml.contains("{{") {
                return Err(RenderError::TemplateSyntax { crd: name });
            }
            // `crds.keep: false` drops the keep policy (cert-manager's spelling).
            let keep = "  annotations:\n    helm.sh/resource-policy: keep\n";
            if !yaml.contains(keep) {
                return Err(RenderError::MissingKeepPolicy { crd: name });
            }
            let yaml = yaml.replace(
                keep,
                &format!("{{{{- if .Values.crds.keep }}}}\n{keep}{{{{- end }}}}\n"),
            );
            Ok(GeneratedFile {
                path: format!("{CHART_CRD_DIR}/{name}.yaml"),
                contents: format!(
                    "{{{{- if and .Values.crds.enabled .Values.crds.install }}}}\n\
                     # Generated by `make crds` from crates/etcd-api. Do not edit.\n\
                     {yaml}\
                     {{{{- end }}}}\n"
                ),
            })
        })
        .collect()
}
