//! A pod's `/etc/resolv.conf`, `/etc/hosts` and hostname, as kubelet (`network/dns`,
//! `kubelet_pods.go`) and containerd write them.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DnsError {
    #[error("pod Hostname {} is not a valid DNS label: {}", localkube_gofmt::quote(.0), .1)]
    InvalidHostname(String, String),
    #[error("pod Subdomain {} is not a valid DNS label: {}", localkube_gofmt::quote(.0), .1)]
    InvalidSubdomain(String, String),
    #[error("hostname for pod {} was invalid: {}", localkube_gofmt::quote(.0), localkube_gofmt::quote(.1))]
    EmptyHostname(String, String),
    #[error("invalid DNSPolicy={0}")]
    InvalidPolicy(String),
}

/// The node's DNS facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsSettings {
    /// kubelet `--cluster-dns`: the cluster DNS server(s).
    pub cluster_dns: Vec<IpAddr>,
    /// kubelet `--cluster-domain`, e.g. `cluster.local`.
    pub cluster_domain: String,
    /// The text of the node's resolv.conf (kubelet `--resolv-conf`), or `None` when kubelet is
    /// told to use none (`--resolv-conf=""`).
    pub host_resolv_conf: Option<String>,
}

/// A generated resolv.conf, with the kubelet warnings (`DNSConfigForming`,
/// `MissingClusterDNS`) the caller records as Warning events on the pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
    /// (event reason, message).
    pub warnings: Vec<(&'static str, String)>,
}

impl ResolvConf {
    /// The file as containerd writes it: `search`, then `nameserver` lines, then `options`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.searches.is_empty() {
            out.push_str(&format!("search {}\n", self.searches.join(" ")));
        }
        for ns in &self.nameservers {
            out.push_str(&format!("nameserver {ns}\n"));
        }
        if !self.options.is_empty() {
            out.push_str(&format!("options {}\n", self.options.join(" ")));
        }
        out
    }
}

const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCH_PATHS: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;

/// kubelet's `GetPodDNS`: `ClusterFirst` (the default) uses the cluster DNS server and the
/// cluster search domains followed by the node's; `Default` (or `ClusterFirst` on the host
/// network) copies the node's; `None` starts empty. `spec.dnsConfig` is then merged in, and
/// the result trimmed to resolver limits.
pub fn resolv_conf(pod: &Pod, settings: &DnsSettings) -> Result<ResolvConf, DnsError> {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let mut conf = host_config(settings.host_resolv_conf.as_deref());
    let cluster = match policy {
        "None" => {
            conf = ResolvConf::default();
            false
        }
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_network,
        "Default" => false,
        other => return Err(DnsError::InvalidPolicy(other.to_owned())),
    };
    if cluster {
        if settings.cluster_dns.is_empty() {
            let message = format!(
                "pod: {}. kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
                localkube_gofmt::quote(&format_pod(pod))
            );
            conf.warnings.push(("MissingClusterDNS", message));
        } else {
            conf.nameservers = settings
                .cluster_dns
                .iter()
                .map(ToString::to_string)
                .collect();
            if !settings.cluster_domain.is_empty() {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
                let domain = &settings.cluster_domain;
                let mut searches = vec![
                    format!("{namespace}.svc.{domain}"),
                    format!("svc.{domain}"),
                    domain.clone(),
                ];
                searches.append(&mut conf.searches);
                conf.searches = dedup(searches);
            }
            conf.options = vec!["ndots:5".to_owned()];
        }
    }
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        conf.nameservers
            .extend(extra.nameservers.iter().flatten().cloned());
        conf.nameservers = dedup(std::mem::take(&mut conf.nameservers));
        conf.searches
            .extend(extra.searches.iter().flatten().cloned());
        conf.searches = dedup(std::mem::take(&mut conf.searches));
        for option in extra.options.iter().flatten() {
            let name = option.name.clone().unwrap_or_default();
            let rendered = match option.value.as_deref().filter(|v| !v.is_empty()) {
                Some(v) => format!("{name}:{v}"),
                None => name.clone(),
            };
            // an option named again replaces the earlier one (kubelet merges through a map)
            match conf
                .options
                .iter()
                .position(|o| o.split(':').next() == Some(name.as_str()))
            {
                Some(i) => conf.options[i] = rendered,
                None => conf.options.push(rendered),
            }
        }
    }
    fit_limits(&mut conf);
    Ok(conf)
}

/// The node's resolv.conf as kubelet's `parseResolvConf` reads it: nameservers accumulate, the
/// last `search` line wins (trailing dots dropped, `.` ignored), `options` accumulate.
fn host_config(text: Option<&str>) -> ResolvConf {
    let Some(text) = text else {
        // kubelet --resolv-conf="": the local resolver and no search
        return ResolvConf {
            nameservers: vec!["127.0.0.1".to_owned()],
            searches: vec![".".to_owned()],
            ..Default::default()
        };
    };
    let mut conf = ResolvConf::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["nameserver", server, ..] => conf.nameservers.push((*server).to_owned()),
            ["search", domains @ ..] => {
                conf.searches = domains
                    .iter()
                    .filter(|d| **d != ".")
                    .map(|d| d.trim_end_matches('.').to_owned())
                    .collect();
            }
            ["options", options @ ..] => {
                for option in options {
                    let name = option.split(':').next().unwrap_or(option);
                    match conf
                        .options
                        .iter()
                        .position(|o| o.split(':').next() == Some(name))
                    {
                        Some(i) => conf.options[i] = (*option).to_owned(),
                        None => conf.options.push((*option).to_owned()),
                    }
                }
            }
            _ => {}
        }
    }
    conf
}

/// kubelet's `formDNSConfigFitsLimits`.
fn fit_limits(conf: &mut ResolvConf) {
    let mut exceeded = false;
    if conf.searches.len() > MAX_SEARCH_PATHS {
        conf.searches.truncate(MAX_SEARCH_PATHS);
        exceeded = true;
    }
    let before = conf.searches.len();
    conf.searches.retain(|s| s.len() <= 253);
    exceeded |= conf.searches.len() != before;
    let mut line_len = conf.searches.join(" ").len();
    while line_len > MAX_SEARCH_CHARS {
        if let Some(last) = conf.searches.pop() {
            line_len = line_len.saturating_sub(last.len() + 1);
        }
        exceeded = true;
    }
    if exceeded {
        conf.warnings.push((
            "DNSConfigForming",
            format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                conf.searches.join(" ")
            ),
        ));
    }
    if conf.nameservers.len() > MAX_NAMESERVERS {
        conf.nameservers.truncate(MAX_NAMESERVERS);
        conf.warnings.push((
            "DNSConfigForming",
            format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                conf.nameservers.join(" ")
            ),
        ));
    }
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// `format.Pod`: `name_namespace(uid)`, how kubelet names a pod in messages.
pub fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or("")
    )
}

/// kubelet's `GeneratePodHostNameAndDomain`: the hostname (`spec.hostname` or the pod name,
/// cut to 63 characters) and, with `spec.subdomain`, the domain
/// `<subdomain>.<namespace>.svc.<cluster domain>`.
pub fn hostname_and_domain(
    pod: &Pod,
    cluster_domain: &str,
) -> Result<(String, Option<String>), DnsError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let hostname = match spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
    {
        Some(h) => {
            if let Some(msg) = dns1123_label_error(h) {
                return Err(DnsError::InvalidHostname(h.to_owned(), msg));
            }
            h.to_owned()
        }
        None => name.clone(),
    };
    let hostname = if hostname.len() > 63 {
        let cut: String = hostname.chars().take(63).collect();
        let cut = cut.trim_end_matches(['-', '.']).to_owned();
        if cut.is_empty() {
            return Err(DnsError::EmptyHostname(name, hostname));
        }
        cut
    } else {
        hostname
    };
    let domain = match spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|d| !d.is_empty())
    {
        Some(sub) => {
            if let Some(msg) = dns1123_label_error(sub) {
                return Err(DnsError::InvalidSubdomain(sub.to_owned(), msg));
            }
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
            Some(format!("{sub}.{namespace}.svc.{cluster_domain}"))
        }
        None => None,
    };
    Ok((hostname, domain))
}

fn dns1123_label_error(value: &str) -> Option<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !(value.starts_with(ok) && value.ends_with(ok) && value.chars().all(|c| ok(c) || c == '-')) {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_owned());
    }
    (!errs.is_empty()).then(|| errs.join(";"))
}

/// The pod's `/etc/hosts` exactly as kubelet's `managedHostsFileContent` writes it (pods on the
/// pod network; host-network pods get the node's file and are not supported here).
pub fn etc_hosts(pod: &Pod, pod_ips: &[String], cluster_domain: &str) -> Result<String, DnsError> {
    let (hostname, domain) = hostname_and_domain(pod, cluster_domain)?;
    let mut out = String::from("# Kubernetes-managed hosts file.\n");
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        match &domain {
            Some(domain) => out.push_str(&format!("{ip}\t{hostname}.{domain}\t{hostname}\n")),
            None => out.push_str(&format!("{ip}\t{hostname}\n")),
        }
    }
    let aliases = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or(&[]);
    if !aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for alias in aliases {
            let names = alias.hostnames.as_deref().unwrap_or(&[]).join("\t");
            out.push_str(&format!("{}\t{names}\n", alias.ip));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c"}]);
        serde_json::from_value(
            json!({"metadata": {"name": "etcd-0", "namespace": "db", "uid": "u1"}, "spec": spec}),
        )
        .unwrap()
    }

    fn settings(host: Option<&str>) -> DnsSettings {
        DnsSettings {
            cluster_dns: vec!["10.244.0.1".parse().unwrap()],
            cluster_domain: "cluster.local".into(),
            host_resolv_conf: host.map(Into::into),
        }
    }

    const HOST: &str = "# generated\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nsearch corp.example. .\noptions edns0 ndots:2\n";

    #[test]
    fn resolv_conf_per_policy() {
        let cases: &[(serde_json::Value, Option<&str>, &str)] = &[
            (
                json!({}),
                Some(""),
                "search db.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.244.0.1\noptions ndots:5\n",
            ),
            (
                json!({"dnsPolicy": "ClusterFirst"}),
                Some(HOST),
                "search db.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.244.0.1\noptions ndots:5\n",
            ),
            (
                json!({"dnsPolicy": "Default"}),
                Some(HOST),
                "search corp.example\nnameserver 192.168.1.1\nnameserver 192.168.1.2\noptions edns0 ndots:2\n",
            ),
            (
                json!({"dnsPolicy": "ClusterFirst", "hostNetwork": true}),
                Some(HOST),
                "search corp.example\nnameserver 192.168.1.1\nnameserver 192.168.1.2\noptions edns0 ndots:2\n",
            ),
            (
                json!({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": true}),
                Some(HOST),
                "search db.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.244.0.1\noptions ndots:5\n",
            ),
            (
                json!({"dnsPolicy": "Default"}),
                None,
                "search .\nnameserver 127.0.0.1\n",
            ),
            (
                json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["a.example"],
                "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}}),
                Some(HOST),
                "search a.example\nnameserver 1.1.1.1\noptions ndots:2 edns0\n",
            ),
            (
                json!({"dnsConfig": {"nameservers": ["10.244.0.1", "8.8.8.8"], "searches": ["svc.cluster.local", "x.example"],
                "options": [{"name": "ndots", "value": "1"}, {"name": "single-request-reopen"}]}}),
                Some(""),
                "search db.svc.cluster.local svc.cluster.local cluster.local x.example\nnameserver 10.244.0.1\nnameserver 8.8.8.8\noptions ndots:1 single-request-reopen\n",
            ),
        ];
        for (spec, host, expected) in cases {
            let conf = resolv_conf(&pod(spec.clone()), &settings(*host)).unwrap();
            assert_eq!(conf.render(), *expected, "{spec}");
            assert!(conf.warnings.is_empty(), "{spec}: {:?}", conf.warnings);
        }
    }

    #[test]
    fn resolv_conf_limits_and_fallbacks() {
        let conf = resolv_conf(
            &pod(json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]}})),
            &settings(Some("")),
        )
        .unwrap();
        assert_eq!(conf.nameservers, ["1.1.1.1", "2.2.2.2", "3.3.3.3"]);
        assert_eq!(
            conf.warnings,
            [("DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3".to_owned())]
        );
        let many: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
        let conf = resolv_conf(
            &pod(json!({"dnsPolicy": "None", "dnsConfig": {"searches": many}})),
            &settings(Some("")),
        )
        .unwrap();
        assert_eq!(conf.searches.len(), 32);
        assert_eq!(conf.warnings[0].0, "DNSConfigForming");

        let no_cluster_dns = DnsSettings {
            cluster_dns: vec![],
            ..settings(Some(HOST))
        };
        let conf = resolv_conf(&pod(json!({})), &no_cluster_dns).unwrap();
        assert_eq!(conf.nameservers, ["192.168.1.1", "192.168.1.2"]);
        assert_eq!(
            conf.warnings,
            [("MissingClusterDNS", "pod: \"etcd-0_db(u1)\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.".to_owned())]
        );
        assert_eq!(
            resolv_conf(&pod(json!({"dnsPolicy": "Bogus"})), &settings(None))
                .unwrap_err()
                .to_string(),
            "invalid DNSPolicy=Bogus"
        );
    }

    const HEADER: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

    /// The cases of kubelet's `TestManagedHostsFileContent`, adapted to this pod.
    #[test]
    fn hosts_file_like_kubelet() {
        let ips = vec!["10.244.0.7".to_owned()];
        let cases: &[(serde_json::Value, &[String], String)] = &[
            (json!({}), &ips, format!("{HEADER}10.244.0.7\tetcd-0\n")),
            (
                json!({"hostname": "m0", "subdomain": "peers"}),
                &ips,
                format!("{HEADER}10.244.0.7\tm0.peers.db.svc.cluster.local\tm0\n"),
            ),
            (
                json!({"subdomain": "peers"}),
                &ips,
                format!("{HEADER}10.244.0.7\tetcd-0.peers.db.svc.cluster.local\tetcd-0\n"),
            ),
            (json!({}), &[], HEADER.to_owned()),
            (
                json!({"hostAliases": [{"ip": "123.45.67.89", "hostnames": ["foo", "bar", "baz"]},
                                     {"ip": "456.78.90.123", "hostnames": ["park", "doo", "boo"]}]}),
                &ips,
                format!(
                    "{HEADER}10.244.0.7\tetcd-0\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"
                ),
            ),
        ];
        for (spec, pod_ips, expected) in cases {
            assert_eq!(
                etc_hosts(&pod(spec.clone()), pod_ips, "cluster.local").unwrap(),
                *expected,
                "{spec}"
            );
        }
    }

    #[test]
    fn hostnames() {
        let long = "a".repeat(62) + "-b";
        let mut p = pod(json!({}));
        p.metadata.name = Some(long.clone());
        assert_eq!(
            hostname_and_domain(&p, "cluster.local").unwrap(),
            ("a".repeat(62), None)
        );
        assert_eq!(
            hostname_and_domain(&pod(json!({"hostname": "Bad_Name"})), "cluster.local")
                .unwrap_err()
                .to_string(),
            "pod Hostname \"Bad_Name\" is not a valid DNS label: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        );
        assert!(matches!(
            hostname_and_domain(&pod(json!({"subdomain": "x.y"})), "cluster.local"),
            Err(DnsError::InvalidSubdomain(..))
        ));
    }
}
