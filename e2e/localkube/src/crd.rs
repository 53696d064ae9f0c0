//! CustomResourceDefinitions (spec §a9): checked and marked `NamesAccepted` + `Established` in the
//! same write that stores them, so a custom resource can be created the moment `kubectl apply`
//! of its CRD returns (helm waits for Established); then served from the registry. Deleting a
//! CRD deletes every custom resource of it first (finalizer `customresourcecleanup...`).

use serde_json::{Value, json};

use crate::api::objects::{self, meta_mut};
use crate::api::resources::{CustomResourceInfo, ResourceType};
use crate::api::status::{ApiError, Cause};
use crate::api::{Shared, handlers};

const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn crd_invalid(name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid(
        "CustomResourceDefinition.apiextensions.k8s.io",
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        name,
        &causes,
    )
}

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.into(),
        field: field.into(),
        message,
    }
}

/// Validate a CRD (names, versions, schemas, CEL rules: fail closed) and set its status.
pub fn admit(_server: &Shared, crd: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    let name = objects::name(crd).unwrap_or("").to_string();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let group = spec["group"].as_str().unwrap_or("");
    let plural = spec["names"]["plural"].as_str().unwrap_or("");
    let kind = spec["names"]["kind"].as_str().unwrap_or("");
    let mut errors = Vec::new();
    if group.is_empty() {
        errors.push(cause(
            "FieldValueRequired",
            "spec.group",
            "spec.group: Required value".into(),
        ));
    }
    if plural.is_empty() {
        errors.push(cause(
            "FieldValueRequired",
            "spec.names.plural",
            "spec.names.plural: Required value".into(),
        ));
    }
    if kind.is_empty() {
        errors.push(cause(
            "FieldValueRequired",
            "spec.names.kind",
            "spec.names.kind: Required value".into(),
        ));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        errors.push(cause(
            "FieldValueInvalid",
            "metadata.name",
            format!("metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        Some(other) => errors.push(cause(
            "FieldValueNotSupported",
            "spec.scope",
            format!("spec.scope: Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""),
        )),
        None => errors.push(cause("FieldValueRequired", "spec.scope", "spec.scope: Required value".into())),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        errors.push(cause("FieldValueRequired", "spec.versions", "spec.versions: Invalid value: null: must have exactly one version marked as storage version".into()));
    }
    let storage: Vec<&Value> = versions
        .iter()
        .filter(|v| v["storage"] == json!(true))
        .collect();
    if !versions.is_empty() && storage.len() != 1 {
        errors.push(cause(
            "FieldValueInvalid",
            "spec.versions",
            format!("spec.versions: Invalid value: {}: must have exactly one version marked as storage version", serde_json::to_string(&spec["versions"]).unwrap_or_default()),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let Some(schema) = v.get("schema").and_then(|s| s.get("openAPIV3Schema")) else {
            errors.push(cause(
                "FieldValueRequired",
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                format!("spec.versions[{i}].schema.openAPIV3Schema: Required value: schemas are required"),
            ));
            continue;
        };
        let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
        if let Err(schema_errors) = localkube_schema::StructuralSchema::compile_at(schema, &at) {
            for e in schema_errors {
                errors.push(cause(e.reason(), &e.field, e.to_string()));
            }
        }
    }
    if let Some(old) = old
        && old["spec"]["group"] != spec["group"]
    {
        errors.push(cause(
            "FieldValueInvalid",
            "spec.group",
            format!("spec.group: Invalid value: \"{group}\": field is immutable"),
        ));
    }
    if !errors.is_empty() {
        return Err(crd_invalid(&name, errors));
    }
    let now = objects::now_rfc3339();
    let stored_versions: Vec<Value> = storage.iter().map(|v| v["name"].clone()).collect();
    let mut accepted = spec["names"].clone();
    if accepted.get("singular").is_none_or(Value::is_null) {
        accepted["singular"] = json!(kind.to_lowercase());
    }
    if accepted.get("listKind").is_none_or(Value::is_null) {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    let previous = old.map(|o| o["status"].clone()).unwrap_or(Value::Null);
    let since = |t: &str| {
        previous["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_string))
            .unwrap_or_else(|| now.clone())
    };
    crd["status"] = json!({
        "acceptedNames": accepted,
        "conditions": [
            { "type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted") },
            { "type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": since("Established") },
        ],
        "storedVersions": stored_versions,
    });
    // Custom resources of this CRD are removed before the CRD itself.
    let mut finalizers = objects::finalizers(crd);
    if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) && !objects::is_deleting(crd) {
        finalizers.push(CLEANUP_FINALIZER.into());
        meta_mut(crd).insert("finalizers".into(), json!(finalizers));
    }
    Ok(())
}

/// The served resource types of a stored CRD, one per served version.
pub fn resource_types(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let group = spec["group"].as_str().unwrap_or("").to_string();
    let kind = names["kind"].as_str().unwrap_or("").to_string();
    let plural = names["plural"].as_str().unwrap_or("").to_string();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for v in spec["versions"].as_array().cloned().unwrap_or_default() {
        if v["served"] != json!(true) {
            continue;
        }
        let openapi = v["schema"]["openAPIV3Schema"].clone();
        let schema = localkube_schema::StructuralSchema::compile(&openapi).ok();
        let mut subresources = Vec::new();
        if v["subresources"].get("status").is_some() {
            subresources.push("status".to_string());
        }
        let scale = v["subresources"].get("scale").cloned();
        if scale.is_some() {
            subresources.push("scale".to_string());
        }
        out.push(ResourceType {
            group: group.clone(),
            version: v["name"].as_str().unwrap_or("").to_string(),
            kind: kind.clone(),
            list_kind: names["listKind"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{kind}List")),
            plural: plural.clone(),
            singular: names["singular"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| kind.to_lowercase()),
            namespaced: spec["scope"] == "Namespaced",
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            subresources,
            storage_prefix: format!("/registry/{group}/{plural}"),
            custom: Some(CustomResourceInfo {
                schema,
                printer_columns: v["additionalPrinterColumns"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                scale,
                openapi_schema: Some(openapi),
            }),
        });
    }
    out
}

pub fn register(server: &Shared, crd: &Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or("");
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("");
    server
        .registry
        .set_custom(group, plural, resource_types(crd));
}

pub fn unregister(server: &Shared, crd: &Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or("");
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("");
    server.registry.remove_custom(group, plural);
}

/// Serve every stored CRD (at startup), and finish deletions a previous run left half-done.
pub async fn load_all(server: &Shared) -> Result<(), ApiError> {
    let rt = server
        .registry
        .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .ok_or_else(ApiError::no_such_resource)?;
    let filter = handlers::Filter::from_query(&rt, &Default::default())?;
    let listed = handlers::read_list(server, &rt, None, &Default::default(), &filter).await?;
    for crd in listed.items {
        register(server, &crd);
        if objects::is_deleting(&crd) {
            start_cleanup(server.clone(), crd);
        }
    }
    Ok(())
}

/// Delete every custom resource of a CRD being deleted, then drop the cleanup finalizer.
pub fn start_cleanup(server: Shared, crd: Value) {
    tokio::spawn(async move {
        let name = objects::name(&crd).unwrap_or("").to_string();
        if let Err(e) = cleanup(&server, &crd).await {
            tracing::warn!(crd = %name, error = %e, "custom resource cleanup failed; retrying later");
        }
    });
}

async fn cleanup(server: &Shared, crd: &Value) -> Result<(), ApiError> {
    let group = crd["spec"]["group"].as_str().unwrap_or("");
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("");
    let name = objects::name(crd).unwrap_or("").to_string();
    let types = resource_types(crd);
    if let Some(rt) = types.into_iter().next() {
        // Delete every object (all versions share the storage prefix), honouring their own
        // finalizers, and wait until none is left, as the apiextensions finalizer does.
        loop {
            let page = server
                .store
                .list(&rt.list_prefix(None), None, 500, 0)
                .await
                .map_err(ApiError::internal)?;
            if page.items.is_empty() {
                break;
            }
            for item in &page.items {
                let ns = objects::meta_str(&item.object, "namespace").map(str::to_string);
                let item_name = objects::name(&item.object).unwrap_or("").to_string();
                match handlers::delete_one(
                    server,
                    &rt,
                    ns.as_deref(),
                    &item_name,
                    &json!({}),
                    false,
                )
                .await
                {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
    server.registry.remove_custom(group, plural);
    let crd_type = server
        .registry
        .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .ok_or_else(ApiError::no_such_resource)?;
    handlers::guaranteed_update(
        server,
        &crd_type,
        None,
        &name,
        &Default::default(),
        |current| {
            let mut obj = current.object.clone();
            let finalizers: Vec<String> = objects::finalizers(&obj)
                .into_iter()
                .filter(|f| f != CLEANUP_FINALIZER)
                .collect();
            meta_mut(&mut obj).insert("finalizers".into(), json!(finalizers));
            Ok(handlers::Update::Put {
                object: obj,
                pinned_rv: None,
            })
        },
    )
    .await?;
    Ok(())
}
