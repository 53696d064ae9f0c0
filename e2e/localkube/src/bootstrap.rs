//! Objects every cluster starts with (spec §e): the system namespaces, the `kubernetes`
//! Service and its EndpointSlice, the Node, the default StorageClass and the bootstrap RBAC
//! roles. Created only when missing, so a restart on the same state keeps user changes.

use serde_json::{Value, json};

use crate::api::status::ApiError;
use crate::api::{Shared, objects};

pub const NODE_NAME: &str = "localkube";

async fn ensure(
    server: &Shared,
    api_version: &str,
    kind: &str,
    mut obj: Value,
) -> Result<(), ApiError> {
    let rt = server
        .registry
        .by_kind(api_version, kind)
        .ok_or_else(ApiError::no_such_resource)?;
    let ns = objects::meta_str(&obj, "namespace").map(str::to_string);
    let name = objects::name(&obj).unwrap_or("").to_string();
    let key = rt.key(ns.as_deref(), &name);
    if server
        .store
        .get(&key)
        .await
        .map_err(ApiError::internal)?
        .is_some()
    {
        return Ok(());
    }
    objects::prepare_create(&rt, &mut obj, ns.as_deref());
    crate::defaults::apply(&rt.group, &rt.kind, &mut obj);
    match server.store.create(&key, &obj, None).await {
        Ok(_) | Err(crate::store::StoreError::AlreadyExists) => Ok(()),
        Err(e) => Err(ApiError::internal(e)),
    }
}

pub async fn run(server: &Shared, api_ip: &str, api_port: u16) -> Result<(), ApiError> {
    let kubernetes_ip = server.service_cidr.kubernetes_ip().to_string();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        ensure(
            server,
            "v1",
            "Namespace",
            json!({ "metadata": { "name": ns }, "spec": { "finalizers": ["kubernetes"] }, "status": { "phase": "Active" } }),
        )
        .await?;
    }
    ensure(
        server,
        "v1",
        "Service",
        json!({
            "metadata": { "name": "kubernetes", "namespace": "default", "labels": { "component": "apiserver", "provider": "kubernetes" } },
            "spec": {
                "type": "ClusterIP", "clusterIP": kubernetes_ip, "clusterIPs": [kubernetes_ip],
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
                "ports": [{ "name": "https", "port": 443, "protocol": "TCP", "targetPort": api_port }],
            },
        }),
    )
    .await?;
    ensure(
        server,
        "discovery.k8s.io/v1",
        "EndpointSlice",
        json!({
            "metadata": { "name": "kubernetes", "namespace": "default", "labels": { "kubernetes.io/service-name": "kubernetes", "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io" } },
            "addressType": "IPv4",
            "endpoints": [{ "addresses": [api_ip], "conditions": { "ready": true } }],
            "ports": [{ "name": "https", "port": api_port, "protocol": "TCP" }],
        }),
    )
    .await?;
    ensure(
        server,
        "v1",
        "Node",
        json!({
            "metadata": { "name": NODE_NAME, "labels": { "kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": "" } },
            "spec": {},
            "status": {
                "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "localkube node agent is ready", "lastHeartbeatTime": objects::now_rfc3339(), "lastTransitionTime": objects::now_rfc3339() }],
                "addresses": [{ "type": "InternalIP", "address": api_ip }, { "type": "Hostname", "address": NODE_NAME }],
                "capacity": { "cpu": "2", "memory": "24Gi", "pods": "110" },
                "allocatable": { "cpu": "2", "memory": "24Gi", "pods": "110" },
            },
        }),
    )
    .await?;
    ensure(
        server,
        "storage.k8s.io/v1",
        "StorageClass",
        json!({
            "metadata": { "name": "standard", "annotations": { "storageclass.kubernetes.io/is-default-class": "true" } },
            "provisioner": "localkube.io/host-path",
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
        }),
    )
    .await?;
    for obj in localkube_query::bootstrap_policy() {
        let api_version = obj["apiVersion"]
            .as_str()
            .unwrap_or("rbac.authorization.k8s.io/v1")
            .to_string();
        let kind = obj["kind"].as_str().unwrap_or("").to_string();
        ensure(server, &api_version, &kind, obj).await?;
    }
    Ok(())
}
