//! Certificates for the scenarios: a stand-in for cert-manager's controller that fills the
//! Secrets of Certificates, and copies of certificates near their end (what an operator must
//! renew). Shared by the TLS scenario and the fault suite.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};

use super::NS;

/// A key of a Secret's data as text.
pub fn secret_text(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

/// cert-manager's Certificate CRD (from its Go module, fixtures/README.md), installed and
/// Established.
pub fn install_certificate_crd(env: &super::Env) {
    let crd = super::workspace()
        .join("e2e/scenarios/tests/fixtures/cert-manager/cert-manager.io_certificates.yaml");
    env.kubectl(&["apply", "-f", crd.to_str().unwrap()]);
    env.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/certificates.cert-manager.io",
    ]);
}

pub fn certificate_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "cert-manager.io",
        "v1",
        "Certificate",
    ))
}

/// What the test asks of the stand-in for cert-manager.
#[derive(Debug, Default)]
pub struct StandInOrders {
    /// Secrets to renew (as `cmctl renew` asks cert-manager), by name; each is taken off once
    /// renewed.
    pub renew: std::collections::BTreeSet<String>,
    /// Issue from a second CA, with that CA alone in `ca.crt`: the issuer's CA was replaced.
    pub second_ca: bool,
    /// Issue certificates near their end: issued 3 hours ago, ending in 30 minutes (a sixth of
    /// their lifetime is 35 minutes: the operator warns).
    pub near_end: bool,
}

/// The orders shared with the stand-in for cert-manager.
pub type Renewals = std::sync::Arc<std::sync::Mutex<StandInOrders>>;

/// A stand-in for cert-manager's controller (issue 19 allows one): every Certificate in the
/// namespace whose Secret is missing gets it, issued by a CA of the stand-in's own from the
/// Certificate's `commonName`, `dnsNames`, `ipAddresses` and `usages`, with `tls.crt`,
/// `tls.key`, `ca.crt` and the `secretTemplate` labels, as cert-manager's CA issuer writes it.
/// A Secret named in `renewals` is renewed as cert-manager renews: a new key and certificate
/// written into the same Secret. With `second_ca`, from a second CA of the stand-in (as after
/// the issuer's CA was replaced; the same name, another key).
pub fn cert_manager_stand_in(
    client: kube::Client,
    renewals: Renewals,
) -> tokio::task::JoinHandle<()> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, SanType,
    };
    let new_ca = || {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "stand-in cert-manager CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
        (ca_pem, Issuer::new(ca_params, ca_key))
    };
    let cas = [new_ca(), new_ca()];
    tokio::spawn(async move {
        let certificates: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), NS, &certificate_resource());
        let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
        loop {
            for certificate in certificates
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                let spec = &certificate.data["spec"];
                let strings = |key: &str| -> Vec<String> {
                    spec[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                };
                let secret_name = spec["secretName"].as_str().unwrap().to_owned();
                let existing = secrets.get_opt(&secret_name).await.ok().flatten();
                let (renew, second_ca, near_end) = {
                    let orders = renewals.lock().unwrap();
                    (
                        orders.renew.contains(&secret_name),
                        orders.second_ca,
                        orders.near_end,
                    )
                };
                if existing.is_some() && !renew {
                    continue;
                }
                let (ca_pem, issuer) = &cas[usize::from(second_ca)];
                let mut params = CertificateParams::new(strings("dnsNames")).unwrap();
                if let Some(cn) = spec["commonName"].as_str() {
                    params.distinguished_name.push(DnType::CommonName, cn);
                }
                for ip in strings("ipAddresses") {
                    params
                        .subject_alt_names
                        .push(SanType::IpAddress(ip.parse().unwrap()));
                }
                let usages = strings("usages");
                params.key_usages = vec![
                    KeyUsagePurpose::DigitalSignature,
                    KeyUsagePurpose::KeyEncipherment,
                ];
                params.extended_key_usages = usages
                    .iter()
                    .filter_map(|u| match u.as_str() {
                        "server auth" => Some(ExtendedKeyUsagePurpose::ServerAuth),
                        "client auth" => Some(ExtendedKeyUsagePurpose::ClientAuth),
                        _ => None,
                    })
                    .collect();
                if near_end {
                    let now = time::OffsetDateTime::now_utc();
                    params.not_before = now - time::Duration::hours(3);
                    params.not_after = now + time::Duration::minutes(30);
                }
                let key = KeyPair::generate().unwrap();
                let cert = params.signed_by(&key, issuer).unwrap();
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(spec["secretTemplate"]["labels"].clone())
                        .unwrap_or_default();
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(secret_name.clone()),
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    },
                    type_: Some("kubernetes.io/tls".into()),
                    string_data: Some(BTreeMap::from([
                        ("tls.crt".to_owned(), cert.pem()),
                        ("tls.key".to_owned(), key.serialize_pem()),
                        ("ca.crt".to_owned(), ca_pem.clone()),
                    ])),
                    ..Secret::default()
                };
                match existing {
                    None => {
                        let _ = secrets.create(&PostParams::default(), &secret).await;
                    }
                    Some(existing) => {
                        // In place, guarded by the resourceVersion read above.
                        let mut renewed = existing.clone();
                        renewed.string_data = secret.string_data;
                        if secrets
                            .replace(&secret_name, &PostParams::default(), &renewed)
                            .await
                            .is_ok()
                        {
                            renewals.lock().unwrap().renew.remove(&secret_name);
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// Replaces the certificate and key in Secret `name` by a [`near_expiry_copy`] of its
/// certificate, signed by `ca`; returns the planted certificate (PEM).
pub async fn plant_near_expiry(secrets: &Api<Secret>, name: &str, ca: &Secret) -> String {
    let mut secret = secrets.get(name).await.unwrap();
    let (cert, key) = near_expiry_copy(&secret_text(&secret, "tls.crt"), ca);
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    data.insert(
        "tls.crt".into(),
        k8s_openapi::ByteString(cert.clone().into_bytes()),
    );
    data.insert("tls.key".into(), k8s_openapi::ByteString(key.into_bytes()));
    secrets
        .replace(name, &PostParams::default(), &secret)
        .await
        .unwrap();
    cert
}

/// A copy of the certificate `current_pem` (its subject and SANs) signed by the cluster's CA
/// but near its end: issued an hour ago, ending in ten minutes. What a real observer sees of a
/// certificate nearing expiry; the operator must find it due and re-issue it.
pub fn near_expiry_copy(current_pem: &str, ca: &Secret) -> (String, String) {
    use x509_parser::extensions::GeneralName;
    let (_, pem) = x509_parser::pem::parse_x509_pem(current_pem.as_bytes()).unwrap();
    let current = pem.parse_x509().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    if let Some(cn) = current
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
    {
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
    }
    let sans = current.subject_alternative_name().unwrap().unwrap();
    for name in &sans.value.general_names {
        match name {
            GeneralName::DNSName(dns) => params
                .subject_alt_names
                .push(rcgen::SanType::DnsName(dns.to_string().try_into().unwrap())),
            GeneralName::IPAddress(bytes) => {
                let ip: std::net::IpAddr = match bytes.len() {
                    4 => <[u8; 4]>::try_from(*bytes).unwrap().into(),
                    _ => <[u8; 16]>::try_from(*bytes).unwrap().into(),
                };
                params.subject_alt_names.push(rcgen::SanType::IpAddress(ip));
            }
            _ => {}
        }
    }
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::minutes(10);
    let issuer = rcgen::Issuer::from_ca_cert_pem(
        &secret_text(ca, "tls.crt"),
        rcgen::KeyPair::from_pem(&secret_text(ca, "tls.key")).unwrap(),
    )
    .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// notAfter (Unix seconds) of a PEM certificate.
pub fn not_after(pem: &str) -> i64 {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    pem.parse_x509().unwrap().validity().not_after.timestamp()
}
