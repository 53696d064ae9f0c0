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
        (tools.etcdutl(), "etcdutl-3.6"),
        (tools.etcdutl_of(EtcdVersion::V3_7), "etcdutl-3.7"),
        (tools.etcdutl_of(EtcdVersion::V3_4), "etcdutl-3.4"),
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
        if v.has_etcdutl() {
            tools.etcdutl_of(v).unwrap();
        }
    }
    tools.etcdutl().unwrap();
    tools.weed().unwrap();
    tools.aws().unwrap();
}

/// Each installed binary is the pinned version (`make deps` built or linked the right one).
#[test]
fn installed_etcd_binaries_are_the_pinned_versions() {
    let tools = Tools::from_env();
    let first_line = |path: std::path::PathBuf, arg: &str| {
        let out = std::process::Command::new(&path).arg(arg).output().unwrap();
        assert!(out.status.success(), "{} {arg}: {out:?}", path.display());
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    for v in EtcdVersion::ALL {
        let want = v.version_string();
        let etcd = first_line(tools.etcd(v).unwrap(), "--version");
        assert_eq!(
            etcd,
            format!("etcd Version: {want}"),
            "etcd-{}",
            v.as_minor()
        );
        let ctl = first_line(tools.etcdctl(v).unwrap(), "version");
        assert_eq!(
            ctl,
            format!("etcdctl version: {want}"),
            "etcdctl-{}",
            v.as_minor()
        );
        if v.has_etcdutl() {
            let utl = first_line(tools.etcdutl_of(v).unwrap(), "version");
            assert_eq!(
                utl,
                format!("etcdutl version: {want}"),
                "etcdutl-{}",
                v.as_minor()
            );
        }
    }
}

#[test]
fn etcd_version_names() {
    let names: Vec<(&str, &str)> = EtcdVersion::ALL
        .iter()
        .map(|v| (v.version_string(), v.as_minor()))
        .collect();
    assert_eq!(
        names,
        [
            ("3.4.23", "3.4"),
            ("3.5.35", "3.5"),
            ("3.6.16", "3.6"),
            ("3.7.3", "3.7")
        ]
    );
    assert_eq!(EtcdVersion::DEFAULT, EtcdVersion::V3_6);
    assert_eq!(EtcdVersion::V3_4.next_minor(), Some(EtcdVersion::V3_5));
    assert_eq!(EtcdVersion::V3_7.next_minor(), None);
    assert!(!EtcdVersion::V3_4.has_etcdutl() && EtcdVersion::V3_5.has_etcdutl());
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
