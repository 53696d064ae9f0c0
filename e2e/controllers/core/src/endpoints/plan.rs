//! Which EndpointSlice writes turn the existing slices of a Service into the desired ones, with
//! as few writes as possible: the DNS server and the proxy watch these, so an unchanged slice is
//! never rewritten.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::desired::SliceContent;

#[derive(Debug, Default, PartialEq)]
pub struct SlicePlan {
    pub create: Vec<SliceContent>,
    /// (existing slice name, its new content)
    pub update: Vec<(String, SliceContent)>,
    pub delete: Vec<String>,
}

fn content(s: &EndpointSlice) -> SliceContent {
    SliceContent {
        ports: s.ports.clone().unwrap_or_default(),
        endpoints: s.endpoints.clone(),
    }
}

/// Keep existing slices whose content and labels already match a desired slice; rewrite other
/// existing slices with the remaining desired content; create what is still missing; delete
/// what is left over.
pub fn plan(
    desired: Vec<SliceContent>,
    existing: &[EndpointSlice],
    labels: &BTreeMap<String, String>,
) -> SlicePlan {
    let mut used = vec![false; existing.len()];
    let mut unmatched = Vec::new();
    for d in desired {
        let same = existing.iter().enumerate().position(|(i, s)| {
            !used[i]
                && s.address_type == "IPv4"
                && s.metadata.labels.as_ref() == Some(labels)
                && content(s) == d
        });
        match same {
            Some(i) => used[i] = true,
            None => unmatched.push(d),
        }
    }
    let mut out = SlicePlan::default();
    for d in unmatched {
        match used.iter().position(|u| !u) {
            Some(i) => {
                used[i] = true;
                out.update
                    .push((existing[i].metadata.name.clone().unwrap_or_default(), d));
            }
            None => out.create.push(d),
        }
    }
    out.delete = existing
        .iter()
        .zip(used)
        .filter(|(_, u)| !u)
        .filter_map(|(s, _)| s.metadata.name.clone())
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn content_of(ips: &[&str], port: i32) -> SliceContent {
        SliceContent {
            ports: vec![EndpointPort {
                port: Some(port),
                ..Default::default()
            }],
            endpoints: ips
                .iter()
                .map(|ip| Endpoint {
                    addresses: vec![ip.to_string()],
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn slice(name: &str, c: &SliceContent, labels: &BTreeMap<String, String>) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels.clone()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: c.endpoints.clone(),
            ports: Some(c.ports.clone()),
        }
    }

    #[test]
    fn plans() {
        let labels: BTreeMap<String, String> = [("a".to_string(), "b".to_string())].into();
        let other: BTreeMap<String, String> = [("a".to_string(), "c".to_string())].into();
        let one = content_of(&["10.0.0.1"], 80);
        let two = content_of(&["10.0.0.2"], 81);
        // (desired, existing) -> plan
        let cases: Vec<(Vec<SliceContent>, Vec<EndpointSlice>, SlicePlan)> = vec![
            // unchanged: no writes at all
            (
                vec![one.clone()],
                vec![slice("s1", &one, &labels)],
                SlicePlan::default(),
            ),
            // nothing yet: create
            (
                vec![one.clone()],
                vec![],
                SlicePlan {
                    create: vec![one.clone()],
                    ..Default::default()
                },
            ),
            // content changed: rewrite the existing slice in place
            (
                vec![two.clone()],
                vec![slice("s1", &one, &labels)],
                SlicePlan {
                    update: vec![("s1".into(), two.clone())],
                    ..Default::default()
                },
            ),
            // labels changed: rewrite
            (
                vec![one.clone()],
                vec![slice("s1", &one, &other)],
                SlicePlan {
                    update: vec![("s1".into(), one.clone())],
                    ..Default::default()
                },
            ),
            // one kept, one new, a stale one deleted... reused for the new content instead
            (
                vec![one.clone(), two.clone()],
                vec![
                    slice("s1", &content_of(&["10.0.0.9"], 1), &labels),
                    slice("s2", &one, &labels),
                ],
                SlicePlan {
                    update: vec![("s1".into(), two.clone())],
                    ..Default::default()
                },
            ),
            // fewer groups: the surplus goes
            (
                vec![one.clone()],
                vec![slice("s1", &two, &labels), slice("s2", &one, &labels)],
                SlicePlan {
                    delete: vec!["s1".into()],
                    ..Default::default()
                },
            ),
        ];
        for (i, (desired, existing, want)) in cases.into_iter().enumerate() {
            assert_eq!(plan(desired, &existing, &labels), want, "case {i}");
        }
    }
}
