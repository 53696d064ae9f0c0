//! The `pod-template-hash` of a Deployment's template (`controller.ComputeHash`): FNV-32a over the
//! template (here its JSON, so the value differs from upstream's, which hashes a Go dump; the
//! spec allows that) followed by the collision count, printed in decimal and encoded with
//! `rand.SafeEncodeString` so it never spells words or looks like a number.

use k8s_openapi::api::core::v1::PodTemplateSpec;

/// The label carrying the hash on ReplicaSets, their selectors, templates and pods.
pub(crate) const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// Upstream's "safe" alphabet: no vowels, no 0/1/3 (`k8s.io/apimachinery/pkg/util/rand`).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

/// Map every byte onto the safe alphabet (`rand.SafeEncodeString`).
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// The hash of `template` (its own `pod-template-hash` label ignored) and `collision_count`.
pub(crate) fn pod_template_hash(
    template: &PodTemplateSpec,
    collision_count: Option<i32>,
) -> String {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    // Serialising a typed value cannot fail (no maps with non-string keys); an empty input
    // would still hash deterministically.
    let mut bytes = serde_json::to_vec(&template).unwrap_or_default();
    if let Some(count) = collision_count {
        bytes.extend_from_slice(count.to_string().as_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn template(image: &str, labels: &[(&str, &str)]) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn fnv32a_reference_values() {
        // Test vectors of the FNV reference implementation.
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn safe_encoding_maps_digits_like_upstream() {
        // '0' is byte 48, 48 % 27 = 21 -> '4'; '9' is 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("0129"), "456f");
    }

    #[test]
    fn hash_is_stable_ignores_its_label_and_changes_with_template_and_collisions() {
        let a = pod_template_hash(&template("nginx:1", &[("app", "web")]), None);
        assert_eq!(
            a,
            pod_template_hash(&template("nginx:1", &[("app", "web")]), None)
        );
        let labelled = template("nginx:1", &[("app", "web"), (POD_TEMPLATE_HASH, &a)]);
        assert_eq!(a, pod_template_hash(&labelled, None));
        assert_ne!(
            a,
            pod_template_hash(&template("nginx:2", &[("app", "web")]), None)
        );
        assert_ne!(
            a,
            pod_template_hash(&template("nginx:1", &[("app", "web")]), Some(1))
        );
        assert!(
            a.len() <= 10 && a.bytes().all(|b| SAFE_ALPHABET.contains(&b)),
            "{a}"
        );
    }
}
