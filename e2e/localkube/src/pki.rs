//! The control plane's certificates: a CA, the API server's serving certificate (SANs for every
//! name and address a client uses), and the admin client certificate (`O=system:masters`) that
//! goes into the kubeconfig. Generated once per state directory and reused on restart, so a
//! kubeconfig written earlier keeps working.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating {what}: {source}")]
    Generate {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// PEM files of one state directory.
/// The user cluster DNS authenticates as (see `upstream::bootstrap` for its ClusterRole).
pub const DNS_USER: &str = "system:localkube-dns";

#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: String,
    pub ca_key: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub admin_cert: String,
    pub admin_key: String,
    /// The ServiceAccount token signing key (PKCS#8) and its public half: kube-apiserver's
    /// `--service-account-signing-key-file`/`--service-account-key-file`, kube-controller-manager's
    /// `--service-account-private-key-file`.
    pub service_account_key: String,
    pub service_account_pub: String,
    /// Client certificates of the upstream components, with the identities their bootstrap
    /// RBAC roles are bound to: `system:kube-controller-manager`, `system:kube-scheduler`, the
    /// node `system:node:<name>` in `system:nodes`, and the API server's client to the kubelet
    /// API (`system:masters`, as kubeadm's apiserver-kubelet-client is bound to
    /// `system:kubelet-api-admin`).
    pub controller_manager_cert: String,
    pub controller_manager_key: String,
    pub scheduler_cert: String,
    pub scheduler_key: String,
    pub node_cert: String,
    pub node_key: String,
    /// The Service proxy's client certificate: `system:kube-proxy`, which upstream's bootstrap
    /// policy binds to `system:node-proxier`, as for kube-proxy.
    pub proxy_cert: String,
    pub proxy_key: String,
    /// Cluster DNS's client certificate: [`DNS_USER`], bound by localkube to a ClusterRole that
    /// reads what CoreDNS's does.
    pub dns_cert: String,
    pub dns_key: String,
    pub kubelet_client_cert: String,
    pub kubelet_client_key: String,
    /// The node agent's kubelet API serving certificate (the node's addresses as SANs).
    pub kubelet_serving_cert: String,
    pub kubelet_serving_key: String,
}

/// The serving certificate's names (spec §a1): what kube-rs builds from
/// `KUBERNETES_SERVICE_HOST`, the `kubernetes` Service names, and the loopback address.
pub fn serving_names(extra_ips: &[IpAddr]) -> Vec<SanType> {
    let mut sans: Vec<SanType> = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
    ]
    .iter()
    .filter_map(|n| (*n).try_into().ok().map(SanType::DnsName))
    .collect();
    let mut ips: Vec<IpAddr> = vec![IpAddr::from([127, 0, 0, 1])];
    ips.extend_from_slice(extra_ips);
    ips.dedup();
    sans.extend(ips.into_iter().map(SanType::IpAddress));
    sans
}

fn generate_err(what: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError::Generate { what, source }
}

fn leaf(
    common_name: &str,
    organization: Option<&str>,
    sans: Vec<SanType>,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
    what: &'static str,
) -> Result<(String, String), PkiError> {
    let key = KeyPair::generate().map_err(generate_err(what))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generate_err(what))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    params.distinguished_name = dn;
    params.subject_alt_names = sans;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer).map_err(generate_err(what))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Reads one PEM field of [`Pki`].
type PemField = fn(&Pki) -> &String;

impl Pki {
    /// Generate a fresh CA and certificates.
    pub fn generate(extra_ips: &[IpAddr]) -> Result<Self, PkiError> {
        let ca_key = KeyPair::generate().map_err(generate_err("CA key"))?;
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).map_err(generate_err("CA"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "localkube-ca");
        ca_params.distinguished_name = dn;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(generate_err("CA"))?;
        let ca_cert_pem = ca_cert.pem();
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = Issuer::new(ca_params, ca_key);
        let (serving_cert, serving_key) = leaf(
            "kube-apiserver",
            None,
            serving_names(extra_ips),
            ExtendedKeyUsagePurpose::ServerAuth,
            &issuer,
            "serving certificate",
        )?;
        let (admin_cert, admin_key) = leaf(
            "kubernetes-admin",
            Some("system:masters"),
            vec![],
            ExtendedKeyUsagePurpose::ClientAuth,
            &issuer,
            "admin certificate",
        )?;
        let client = |cn: &str, o: Option<&str>, what| {
            leaf(
                cn,
                o,
                vec![],
                ExtendedKeyUsagePurpose::ClientAuth,
                &issuer,
                what,
            )
        };
        let (controller_manager_cert, controller_manager_key) = client(
            "system:kube-controller-manager",
            None,
            "controller-manager certificate",
        )?;
        let (scheduler_cert, scheduler_key) =
            client("system:kube-scheduler", None, "scheduler certificate")?;
        let node_user = format!("system:node:{}", crate::components::NODE_NAME);
        let (node_cert, node_key) =
            client(&node_user, Some("system:nodes"), "node client certificate")?;
        let (proxy_cert, proxy_key) =
            client("system:kube-proxy", None, "service proxy certificate")?;
        let (dns_cert, dns_key) = client(DNS_USER, None, "cluster DNS certificate")?;
        let (kubelet_client_cert, kubelet_client_key) = client(
            "kube-apiserver-kubelet-client",
            Some("system:masters"),
            "kubelet client certificate",
        )?;
        let (kubelet_serving_cert, kubelet_serving_key) = leaf(
            &node_user,
            Some("system:nodes"),
            serving_names(extra_ips),
            ExtendedKeyUsagePurpose::ServerAuth,
            &issuer,
            "kubelet serving certificate",
        )?;
        let sa = KeyPair::generate().map_err(generate_err("ServiceAccount key"))?;
        Ok(Self {
            ca_cert: ca_cert_pem,
            ca_key: ca_key_pem,
            serving_cert,
            serving_key,
            admin_cert,
            admin_key,
            service_account_key: sa.serialize_pem(),
            service_account_pub: sa.public_key_pem(),
            controller_manager_cert,
            controller_manager_key,
            scheduler_cert,
            scheduler_key,
            node_cert,
            node_key,
            proxy_cert,
            proxy_key,
            dns_cert,
            dns_key,
            kubelet_client_cert,
            kubelet_client_key,
            kubelet_serving_cert,
            kubelet_serving_key,
        })
    }

    fn files(dir: &Path) -> [(PathBuf, PemField); 22] {
        [
            (dir.join("ca.crt"), |p| &p.ca_cert),
            (dir.join("ca.key"), |p| &p.ca_key),
            (dir.join("apiserver.crt"), |p| &p.serving_cert),
            (dir.join("apiserver.key"), |p| &p.serving_key),
            (dir.join("admin.crt"), |p| &p.admin_cert),
            (dir.join("admin.key"), |p| &p.admin_key),
            (dir.join("sa.key"), |p| &p.service_account_key),
            (dir.join("sa.pub"), |p| &p.service_account_pub),
            (dir.join("controller-manager.crt"), |p| {
                &p.controller_manager_cert
            }),
            (dir.join("controller-manager.key"), |p| {
                &p.controller_manager_key
            }),
            (dir.join("scheduler.crt"), |p| &p.scheduler_cert),
            (dir.join("scheduler.key"), |p| &p.scheduler_key),
            (dir.join("node.crt"), |p| &p.node_cert),
            (dir.join("node.key"), |p| &p.node_key),
            (dir.join("apiserver-kubelet-client.crt"), |p| {
                &p.kubelet_client_cert
            }),
            (dir.join("apiserver-kubelet-client.key"), |p| {
                &p.kubelet_client_key
            }),
            (dir.join("kubelet.crt"), |p| &p.kubelet_serving_cert),
            (dir.join("kubelet.key"), |p| &p.kubelet_serving_key),
            (dir.join("proxy.crt"), |p| &p.proxy_cert),
            (dir.join("proxy.key"), |p| &p.proxy_key),
            (dir.join("dns.crt"), |p| &p.dns_cert),
            (dir.join("dns.key"), |p| &p.dns_key),
        ]
    }

    /// Load the certificates of `dir`, generating and writing them when absent.
    pub fn load_or_generate(dir: &Path, extra_ips: &[IpAddr]) -> Result<Self, PkiError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PkiError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let files = Self::files(dir);
        if files.iter().all(|(p, _)| p.exists()) {
            let read = |i: usize| std::fs::read_to_string(&files[i].0).map_err(io(&files[i].0));
            return Ok(Self {
                ca_cert: read(0)?,
                ca_key: read(1)?,
                serving_cert: read(2)?,
                serving_key: read(3)?,
                admin_cert: read(4)?,
                admin_key: read(5)?,
                service_account_key: read(6)?,
                service_account_pub: read(7)?,
                controller_manager_cert: read(8)?,
                controller_manager_key: read(9)?,
                scheduler_cert: read(10)?,
                scheduler_key: read(11)?,
                node_cert: read(12)?,
                node_key: read(13)?,
                kubelet_client_cert: read(14)?,
                kubelet_client_key: read(15)?,
                kubelet_serving_cert: read(16)?,
                kubelet_serving_key: read(17)?,
                proxy_cert: read(18)?,
                proxy_key: read(19)?,
                dns_cert: read(20)?,
                dns_key: read(21)?,
            });
        }
        let pki = Self::generate(extra_ips)?;
        for (path, field) in &files {
            std::fs::write(path, field(&pki)).map_err(io(path))?;
        }
        Ok(pki)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The identity a client certificate asserts: CN is the user, each O a group (as kube-apiserver's
    /// x509 authenticator reads it).
    pub fn identity_from_der(der: &[u8]) -> Option<(String, Vec<String>)> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let user = subject
            .iter_common_name()
            .next()?
            .as_str()
            .ok()?
            .to_string();
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect();
        Some((user, groups))
    }

    #[test]
    fn admin_certificate_carries_system_masters() {
        let pki = Pki::generate(&[]).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(pki.admin_cert.as_bytes()).unwrap();
        let (user, groups) = identity_from_der(&pem.contents).unwrap();
        assert_eq!(user, "kubernetes-admin");
        assert_eq!(groups, vec!["system:masters".to_string()]);
    }
}
