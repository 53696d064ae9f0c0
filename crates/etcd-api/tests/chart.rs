//! The chart's CRD templates: fresh (what the types generate), and rendered by both helm majors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use etcd_api::crd;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use test_support::{KubeClients, KubePair};

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/etcd-operator")
}

#[test]
fn committed_crd_templates_match_the_types() {
    let chart = chart_dir();
    for file in crd::chart_templates().unwrap() {
        let path = chart.join(&file.path);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `make crds`", path.display()));
        assert!(
            committed == file.contents,
            "{} is stale: run `make crds` and commit the result",
            path.display()
        );
    }
    let generated: Vec<String> = crd::chart_templates()
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    for entry in std::fs::read_dir(chart.join(crd::CHART_CRD_DIR)).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let path = format!("{}/{name}", crd::CHART_CRD_DIR);
        assert!(
            generated.contains(&path),
            "{path} is no longer generated: run `make crds`"
        );
    }
}

/// The CRDs in a `helm template` output.
fn rendered_crds(output: &str) -> Vec<CustomResourceDefinition> {
    output
        .split("\n---")
        .filter(|doc| doc.contains("kind: CustomResourceDefinition"))
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect()
}

#[test]
fn both_helm_majors_render_the_crds_exactly_and_honour_crds_install() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let lint = clients.run_helm(&["lint", "--strict", chart]).unwrap();
        assert!(
            lint.contains("0 chart(s) failed"),
            "helm {}: {lint}",
            pair.helm_minor()
        );

        let rendered = clients
            .run_helm(&["template", "etcd-operator", chart])
            .unwrap();
        let crds = rendered_crds(&rendered);
        let mut expected = crd::all();
        expected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let names = |crds: &[CustomResourceDefinition]| -> Vec<Option<String>> {
            crds.iter().map(|c| c.metadata.name.clone()).collect()
        };
        // helm renders templates in file-name order.
        assert_eq!(names(&crds), names(&expected), "helm {}", pair.helm_minor());
        for (got, want) in crds.iter().zip(&expected) {
            assert!(
                got == want,
                "helm {} changes {:?} when rendering it",
                pair.helm_minor(),
                want.metadata.name
            );
        }
        for crd in &crds {
            let annotations = crd.metadata.annotations.clone().unwrap();
            assert_eq!(
                annotations
                    .get("helm.sh/resource-policy")
                    .map(String::as_str),
                Some("keep")
            );
        }

        let without = clients
            .run_helm(&[
                "template",
                "etcd-operator",
                chart,
                "--set",
                "crds.install=false",
            ])
            .unwrap();
        assert!(
            rendered_crds(&without).is_empty(),
            "helm {}: crds.install=false",
            pair.helm_minor()
        );
    }
}
