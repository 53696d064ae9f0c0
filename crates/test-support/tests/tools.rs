//! Locating binaries: missing ones fail loudly, kubectl/helm pairs have the expected versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use test_support::{
    EtcdCluster, EtcdVersion, HarnessError, KubeClients, KubePair, S3Server, Tools,
};

#[test]
fn missing_binary_names_file_path_and_fix() {
    let empty = tempfile::tempdir().unwrap();
    let tools = Tools::from_dir(empty.path());
    let err = tools.etcd(EtcdVersion::V3_5).unwrap_err();
    let text = err.to_string();
    let path = empty.path().join("etcd-3.5");
    assert!(text.contains("etcd-3.5"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("make deps"), "{text}");
    assert_eq!(err.path, path);

    for (result, file) in [
        (tools.etcdctl(EtcdVersion::V3_4), "etcdctl-3.4"),
        (tools.etcdutl(), "etcdutl-3.5"),
        (tools.weed(), "weed"),
        (tools.aws(), "aws"),
        (tools.kubectl(KubePair::Previous), "kubectl-1.32"),
        (tools.helm(KubePair::Current), "helm-4.3"),
    ] {
        let text = result.unwrap_err().to_string();
        assert!(text.contains(file) && text.contains("make deps"), "{text}");
    }
}

#[test]
fn non_executable_file_counts_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("weed"), b"not a program").unwrap();
    let err = Tools::from_dir(dir.path()).weed().unwrap_err();
    assert!(err.to_string().contains("weed"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn starting_with_missing_binaries_fails_with_that_error() {
    let empty = tempfile::tempdir().unwrap();
    let tools = Tools::from_dir(empty.path());
    let err = EtcdCluster::start_with(&tools, EtcdVersion::V3_5, 3)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, HarnessError::MissingBinary(_)), "{text}");
    assert!(
        text.contains("etcd-3.5") && text.contains("make deps"),
        "{text}"
    );
    assert!(text.contains(&empty.path().display().to_string()), "{text}");

    let err = S3Server::start_with(&tools).await.unwrap_err();
    assert!(matches!(err, HarnessError::MissingBinary(_)), "{err}");
    assert!(err.to_string().contains("weed"), "{err}");
}

#[test]
fn installed_tools_are_found() {
    let tools = Tools::from_env();
    for v in EtcdVersion::ALL {
        tools.etcd(v).unwrap();
        tools.etcdctl(v).unwrap();
    }
    tools.etcdutl().unwrap();
    tools.weed().unwrap();
    tools.aws().unwrap();
}

#[test]
fn etcd_version_names() {
    assert_eq!(EtcdVersion::V3_4.version_string(), "3.4.23");
    assert_eq!(EtcdVersion::V3_5.version_string(), "3.5.1");
    assert_eq!(EtcdVersion::V3_4.as_minor(), "3.4");
    assert_eq!(EtcdVersion::V3_5.as_minor(), "3.5");
}

#[test]
fn kubectl_and_helm_pairs_have_the_expected_versions() {
    for (pair, kubectl, helm) in [
        (KubePair::Current, "v1.37.", "v4.3."),
        (KubePair::Previous, "v1.32.", "v3.17."),
    ] {
        let clients = KubeClients::find(pair).unwrap();
        assert_eq!(clients.pair(), pair);
        let out = clients.kubectl_version().unwrap();
        assert!(out.contains(&format!("Client Version: {kubectl}")), "{out}");
        let out = clients.helm_version().unwrap();
        assert!(out.trim().starts_with(helm), "{out}");
    }
}
