//! The Service CIDR of one instance, `10.96.<N>.0/24` (N the instance's network index, so
//! parallel instances never share a ClusterIP on the host). kube-apiserver allocates from it
//! (`--service-cluster-ip-range`) and gives its first host address to the `kubernetes` Service.

use std::net::Ipv4Addr;

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
}

impl std::fmt::Display for ServiceCidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "10.96.{}.0/24", self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_instance_has_its_own_slash_24() {
        let cidr = ServiceCidr::new(7);
        assert_eq!(cidr.to_string(), "10.96.7.0/24");
        assert_eq!(cidr.kubernetes_ip(), Ipv4Addr::new(10, 96, 7, 1));
    }
}
