//! `localkube run -- CMD`: a host process that resolves cluster names like a pod does (spec §d):
//! CMD runs in a private mount namespace whose `/etc/resolv.conf` names the cluster DNS first,
//! with the pod search list, then the host's own nameservers for everything else. KUBECONFIG
//! points at the instance unless already set.
//!
//! Also the hidden `localkube in-cluster list-pods`, an in-cluster kube-rs client that tests run
//! inside pods.

use std::os::unix::process::CommandExt;
use std::path::Path;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The resolv.conf of `localkube run`: the cluster DNS and search list of namespace `default`,
/// then the host's nameservers so other names still resolve.
pub fn resolv_conf(dns_server: &str, domain: &str, host_resolv: &str) -> String {
    let mut out = format!(
        "nameserver {dns_server}\nsearch default.svc.{domain} svc.{domain} {domain}\noptions ndots:5\n"
    );
    for line in host_resolv.lines() {
        if line.trim_start().starts_with("nameserver") {
            out.push_str(line.trim());
            out.push('\n');
        }
    }
    out
}

pub async fn run(state_dir: &Path, command: &[String]) -> Result<(), BoxError> {
    let info_path = state_dir.join("network.json");
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&info_path).map_err(|e| {
            format!(
                "{}: {e} (is `localkube up --state-dir {}` running, without --api-only?)",
                info_path.display(),
                state_dir.display()
            )
        })?)?;
    let dns = info["dnsServer"]
        .as_str()
        .ok_or("network.json has no dnsServer")?;
    let domain = info["clusterDomain"].as_str().unwrap_or("cluster.local");
    let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let resolv = state_dir.join(format!("run-resolv-{}.conf", std::process::id()));
    std::fs::write(&resolv, resolv_conf(dns, domain, &host))?;
    let (program, args) = command.split_first().ok_or("no command given")?;
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/resolv.conf && rm -f \"$0\" && exec \"$@\"")
        .arg(&resolv)
        .arg(program)
        .args(args);
    if std::env::var_os("KUBECONFIG").is_none() {
        cmd.env(
            "KUBECONFIG",
            std::fs::canonicalize(state_dir)?.join("kubeconfig"),
        );
    }
    Err(format!("running {program} through unshare: {}", cmd.exec()).into())
}

pub async fn in_cluster(action: &str) -> Result<(), BoxError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::incluster()?;
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config)?;
    match action {
        "list-pods" => {
            let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
                kube::Api::namespaced(client, &namespace);
            let list = pods.list(&Default::default()).await?;
            for pod in list.items {
                println!("{}", pod.metadata.name.unwrap_or_default());
            }
            Ok(())
        }
        other => Err(format!("unknown in-cluster action {other:?} (known: list-pods)").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_dns_comes_first_then_the_host_nameservers() {
        let host = "# generated\nnameserver 192.0.2.53\nsearch corp.example\noptions edns0\n";
        assert_eq!(
            resolv_conf("10.244.3.1", "cluster.local", host),
            "nameserver 10.244.3.1\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\nnameserver 192.0.2.53\n"
        );
    }
}
