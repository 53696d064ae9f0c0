//! ClusterIP allocation in the request path, as kube-apiserver's service registry does it: from
//! the instance's Service CIDR (`10.96.<N>.0/24`, N the instance's network index, so parallel
//! instances never share a ClusterIP on the host), the first address reserved for the
//! `kubernetes` Service; headless Services keep `None`.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use rand::Rng;
use serde_json::{Value, json};

use crate::api::Shared;
use crate::api::resources::ResourceType;
use crate::api::status::{ApiError, Cause};

/// The Service CIDR of one instance: `10.96.<index>.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceCidr {
    pub index: u8,
}

impl ServiceCidr {
    pub fn new(index: u8) -> Self {
        ServiceCidr { index }
    }

    /// The `kubernetes` Service's ClusterIP (the first host address).
    pub fn kubernetes_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 96, self.index, 1)
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let o = ip.octets();
        o[..3] == [10, 96, self.index] && o[3] != 0 && o[3] != 255
    }

    fn random_host(&self, rng: &mut impl Rng) -> Ipv4Addr {
        Ipv4Addr::new(10, 96, self.index, rng.random_range(2..=254))
    }
}

impl std::fmt::Display for ServiceCidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "10.96.{}.0/24", self.index)
    }
}

fn invalid(name: &str, field: &str, value: &str, detail: &str) -> ApiError {
    ApiError::invalid(
        "Service",
        "",
        "Service",
        name,
        &[Cause {
            reason: "FieldValueInvalid".into(),
            field: field.into(),
            message: format!("{field}: Invalid value: \"{value}\": {detail}"),
        }],
    )
}

async fn used_ips(server: &Shared) -> Result<HashSet<String>, ApiError> {
    let page = server
        .store
        .list("/registry/services/specs/", None, 0, 0)
        .await
        .map_err(ApiError::internal)?;
    Ok(page
        .items
        .iter()
        .filter_map(|s| s.object["spec"]["clusterIP"].as_str().map(str::to_string))
        .collect())
}

pub async fn allocate_cluster_ip(server: &Shared, svc: &mut Value) -> Result<(), ApiError> {
    let name = svc["metadata"]["name"].as_str().unwrap_or("").to_string();
    let kind = svc["spec"]["type"]
        .as_str()
        .unwrap_or("ClusterIP")
        .to_string();
    if kind == "ExternalName" {
        return Ok(());
    }
    let requested = svc["spec"]["clusterIP"].as_str().unwrap_or("").to_string();
    let ip = match requested.as_str() {
        "None" => "None".to_string(),
        "" => {
            let used = used_ips(server).await?;
            let mut rng = rand::rng();
            let mut found = None;
            for _ in 0..1000 {
                let candidate = server.service_cidr.random_host(&mut rng).to_string();
                if !used.contains(&candidate) {
                    found = Some(candidate);
                    break;
                }
            }
            found.ok_or_else(|| {
                ApiError::internal("failed to allocate a serviceIP: range is full")
            })?
        }
        ip if ip
            .parse::<Ipv4Addr>()
            .is_ok_and(|a| server.service_cidr.contains(a)) =>
        {
            if used_ips(server).await?.contains(ip) {
                return Err(invalid(
                    &name,
                    "spec.clusterIPs",
                    ip,
                    "failed to allocate IP 10.96.x.x: provided IP is already allocated"
                        .replace("10.96.x.x", ip)
                        .as_str(),
                ));
            }
            ip.to_string()
        }
        ip => {
            return Err(invalid(
                &name,
                "spec.clusterIPs",
                ip,
                &format!(
                    "failed to allocate IP: the provided IP is not in the valid range. The range of valid IPs is {}",
                    server.service_cidr
                ),
            ));
        }
    };
    svc["spec"]["clusterIP"] = json!(ip);
    svc["spec"]["clusterIPs"] = json!([ip]);
    svc["spec"]["ipFamilies"] = json!(["IPv4"]);
    svc["spec"]["ipFamilyPolicy"] = json!("SingleStack");
    Ok(())
}

/// `spec.clusterIP` is immutable; an update that omits it keeps the allocated one (as kubectl
/// apply and helm rely on).
pub fn keep_cluster_ip(old: &Value, new: &mut Value, _rt: &ResourceType) -> Result<(), ApiError> {
    let old_ip = old["spec"]["clusterIP"].clone();
    if !new.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    match new["spec"]["clusterIP"].as_str() {
        None | Some("") => {
            new["spec"]["clusterIP"] = old_ip;
            new["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
        }
        Some(ip) if Some(ip) != old_ip.as_str() => {
            let name = new["metadata"]["name"].as_str().unwrap_or("").to_string();
            return Err(invalid(
                &name,
                "spec.clusterIPs[0]",
                ip,
                "may not change once set",
            ));
        }
        _ => {}
    }
    for field in ["ipFamilies", "ipFamilyPolicy"] {
        if new["spec"].get(field).is_none() {
            new["spec"][field] = old["spec"][field].clone();
        }
    }
    Ok(())
}
