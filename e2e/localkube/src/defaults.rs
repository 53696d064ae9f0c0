//! What kube-apiserver fills in for built-in kinds (spec §a10): helm's three-way diff and
//! readiness checks, and kubectl's output, compare against these values.

use serde_json::{Value, json};

fn set_default(obj: &mut Value, field: &str, value: Value) {
    if let Some(map) = obj.as_object_mut()
        && map.get(field).is_none_or(Value::is_null)
    {
        map.insert(field.into(), value);
    }
}

fn container(c: &mut Value) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let tag_latest = !image.contains('@')
        && image
            .rsplit('/')
            .next()
            .is_none_or(|last| !last.contains(':') || last.ends_with(":latest"));
    set_default(
        c,
        "imagePullPolicy",
        json!(if tag_latest { "Always" } else { "IfNotPresent" }),
    );
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            set_default(p, "timeoutSeconds", json!(1));
            set_default(p, "periodSeconds", json!(10));
            set_default(p, "successThreshold", json!(1));
            set_default(p, "failureThreshold", json!(3));
            if let Some(h) = p.get_mut("httpGet").filter(|h| h.is_object()) {
                set_default(h, "scheme", json!("HTTP"));
            }
        }
    }
}

pub fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    let sa = spec
        .get("serviceAccountName")
        .or_else(|| spec.get("serviceAccount"))
        .cloned()
        .unwrap_or(json!("default"));
    set_default(spec, "serviceAccountName", sa.clone());
    set_default(spec, "serviceAccount", sa);
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                container(c);
            }
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in volumes {
            for (kind, mode) in [
                ("secret", "defaultMode"),
                ("configMap", "defaultMode"),
                ("projected", "defaultMode"),
                ("downwardAPI", "defaultMode"),
            ] {
                if let Some(src) = v.get_mut(kind).filter(|s| s.is_object()) {
                    set_default(src, mode, json!(420));
                }
            }
            if let Some(e) = v.get_mut("emptyDir").filter(|s| s.is_null()) {
                *e = json!({});
            }
        }
    }
}

fn pod_template(template: Option<&mut Value>) {
    if let Some(spec) = template.and_then(|t| t.get_mut("spec")) {
        pod_spec(spec);
    }
}

/// Defaults applied on create and update.
pub fn apply(group: &str, kind: &str, obj: &mut Value) {
    match (group, kind) {
        ("", "Pod") => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec(spec);
            }
        }
        ("", "Namespace") => {
            let name = obj["metadata"]["name"].clone();
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                let labels = m.entry("labels").or_insert_with(|| json!({}));
                if labels.is_object() {
                    labels["kubernetes.io/metadata.name"] = name;
                }
            }
        }
        ("", "Service") => {
            if !obj.get("spec").is_some_and(Value::is_object) {
                obj["spec"] = json!({});
            }
            let spec = &mut obj["spec"];
            set_default(spec, "type", json!("ClusterIP"));
            set_default(spec, "sessionAffinity", json!("None"));
            set_default(spec, "internalTrafficPolicy", json!("Cluster"));
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports {
                    set_default(p, "protocol", json!("TCP"));
                    let port = p.get("port").cloned().unwrap_or(Value::Null);
                    set_default(p, "targetPort", port);
                }
            }
        }
        ("", "Secret") => {
            merge_string_data(obj);
            set_default(obj, "type", json!("Opaque"));
        }
        ("", "PersistentVolumeClaim") => {
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                set_default(spec, "volumeMode", json!("Filesystem"));
            }
        }
        ("apps", "Deployment") => {
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                set_default(spec, "replicas", json!(1));
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "progressDeadlineSeconds", json!(600));
                set_default(
                    spec,
                    "strategy",
                    json!({ "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": "25%", "maxSurge": "25%" } }),
                );
                pod_template(spec.get_mut("template"));
            }
        }
        ("apps", "ReplicaSet") => {
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                set_default(spec, "replicas", json!(1));
                pod_template(spec.get_mut("template"));
            }
        }
        ("batch", "Job") => {
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                job_spec(spec);
            }
        }
        ("batch", "CronJob") => {
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                set_default(spec, "concurrencyPolicy", json!("Allow"));
                set_default(spec, "suspend", json!(false));
                set_default(spec, "successfulJobsHistoryLimit", json!(3));
                set_default(spec, "failedJobsHistoryLimit", json!(1));
                if let Some(js) = spec.get_mut("jobTemplate").and_then(|t| t.get_mut("spec")) {
                    job_spec(js);
                }
            }
        }
        _ => {}
    }
}

fn job_spec(spec: &mut Value) {
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "completions", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    if let Some(t) = spec.get_mut("template")
        && let Some(ps) = t.get_mut("spec")
    {
        pod_spec(ps);
    }
}

/// A Secret's `stringData` is write-only: the v1 → internal conversion merges it into `data`
/// (base64, winning over `data` for the same key) and it is never stored or returned.
fn merge_string_data(secret: &mut Value) {
    use base64::Engine;
    let Some(obj) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = obj.remove("stringData") else {
        return;
    };
    let data = obj.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    for (k, v) in string_data {
        let text = v
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string());
        data[k.as_str()] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_string_data_is_merged_into_data() {
        let mut secret =
            json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "new", "c": "z"}});
        apply("", "Secret", &mut secret);
        assert_eq!(
            secret,
            json!({"data": {"a": "eA==", "b": "bmV3", "c": "eg=="}, "type": "Opaque"})
        );
    }

    #[test]
    fn deployment_gets_what_helm_dereferences() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.2", "ports": [{"containerPort": 80}]}]}}}});
        apply("apps", "Deployment", &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            (
                c["imagePullPolicy"].as_str(),
                c["ports"][0]["protocol"].as_str()
            ),
            (Some("IfNotPresent"), Some("TCP"))
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["serviceAccountName"],
            "default"
        );
    }

    #[test]
    fn latest_or_untagged_images_are_always_pulled() {
        for (image, policy) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("reg:5000/nginx", "Always"),
            ("reg:5000/nginx:1", "IfNotPresent"),
        ] {
            let mut c = json!({"name": "c", "image": image});
            container(&mut c);
            assert_eq!(c["imagePullPolicy"], policy, "{image}");
        }
    }
}
