//! The node's registration and heartbeats, as the kubelet does them: the Node object (created
//! when missing, labels, addresses, capacity, the kubelet endpoint), its status every
//! `STATUS_PERIOD` with a `Ready` condition, and the node Lease in `kube-node-lease` renewed
//! every `LEASE_RENEW` (what kube-controller-manager's node lifecycle controller reads: a
//! node whose Lease stops being renewed turns NotReady and its pods are evicted).

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// The kubelet's defaults: `nodeLeaseDurationSeconds` 40, renewed every quarter of it.
const LEASE_DURATION_SECONDS: i32 = 40;
const LEASE_RENEW: Duration = Duration::from_secs(10);
/// The kubelet reports status at least every `nodeStatusReportFrequency` (5 min) and on change;
/// this agent has no changes to detect, so it reports at a fixed, shorter period.
const STATUS_PERIOD: Duration = Duration::from_secs(30);
const FIELD_MANAGER: &str = "localkube-node";

/// What the Node object says about this node.
#[derive(Debug, Clone)]
pub struct NodeRegistration {
    pub name: String,
    pub internal_ip: Ipv4Addr,
    pub kubelet_port: u16,
    pub kubelet_version: String,
    /// The CPUs the node advertises, when not the machine's own (a test node standing in for
    /// the several nodes a production cluster spreads its members over).
    pub cpu: Option<String>,
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// Capacity as the kubelet measures it: CPUs online (or `cpu`), physical memory, 110 pods.
fn capacity(cpu: Option<&str>) -> serde_json::Value {
    let cpus = cpu.map(str::to_string).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .to_string()
    });
    let memory_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    json!({ "cpu": cpus, "memory": format!("{memory_kib}Ki"), "pods": "110",
            "ephemeral-storage": "100Gi" })
}

/// The status the node reports: Ready, no pressure, its addresses and capacity.
pub fn node_status(reg: &NodeRegistration, transition: &str) -> serde_json::Value {
    let heartbeat = now();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({ "type": type_, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition })
    };
    let capacity = capacity(reg.cpu.as_deref());
    json!({
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "localkube node agent is posting ready status"),
        ],
        "addresses": [
            { "type": "InternalIP", "address": reg.internal_ip.to_string() },
            { "type": "Hostname", "address": reg.name },
        ],
        "capacity": capacity,
        "allocatable": capacity,
        "daemonEndpoints": { "kubeletEndpoint": { "Port": reg.kubelet_port } },
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": kernel_version(),
            "osImage": "localkube node agent",
            "containerRuntimeVersion": "localkube://0.1.0",
            "kubeletVersion": reg.kubelet_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

fn kernel_version() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Register the node, then keep its status and Lease fresh until the task is dropped.
pub async fn run(client: Client, reg: NodeRegistration) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    // The labels a kubelet sets on itself; NodeRestriction refuses `node-role.kubernetes.io/*`
    // from a node (an administrator sets roles), and this node runs workloads anyway.
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": reg.name, "labels": {
            "kubernetes.io/hostname": reg.name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64" } },
    });
    let node: Node = serde_json::from_value(node).map_err(kube::Error::SerdeError)?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e),
    }
    let transition = now();
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let mut last_status: Option<tokio::time::Instant> = None;
    loop {
        if last_status.is_none_or(|t| t.elapsed() >= STATUS_PERIOD) {
            let patch = json!({ "status": node_status(&reg, &transition) });
            match nodes
                .patch_status(&reg.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => last_status = Some(tokio::time::Instant::now()),
                Err(e) => tracing::warn!(error = %e, "node status update failed; retrying"),
            }
        }
        if let Err(e) = renew_lease(&leases, &reg.name).await {
            tracing::warn!(error = %e, "node lease renewal failed; retrying");
        }
        tokio::time::sleep(LEASE_RENEW).await;
    }
}

async fn renew_lease(leases: &Api<Lease>, name: &str) -> Result<(), kube::Error> {
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": { "name": name, "namespace": "kube-node-lease" },
        "spec": { "holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                  "renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string() },
    });
    leases
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&lease),
        )
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_reports_ready_with_the_kubelet_endpoint_and_addresses() {
        let reg = NodeRegistration {
            name: "n1".into(),
            internal_ip: Ipv4Addr::new(10, 244, 3, 1),
            kubelet_port: 10250,
            kubelet_version: "v1.37.2".into(),
            cpu: Some("16".into()),
        };
        let status = node_status(&reg, "2026-01-01T00:00:00Z");
        let ready = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
        assert_eq!(status["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
        assert_eq!(status["addresses"][0]["address"], "10.244.3.1");
        assert_eq!(status["capacity"]["pods"], "110");
        assert_eq!(status["allocatable"]["cpu"], "16");
        // The status must deserialize as a NodeStatus (what the API server validates).
        let _: k8s_openapi::api::core::v1::NodeStatus = serde_json::from_value(status).unwrap();
    }
}
