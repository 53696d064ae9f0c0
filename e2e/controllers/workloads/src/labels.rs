//! Label selectors as the controllers use them: matching a pod's labels (adoption, release) and
//! rendering the selector as the `labelSelector` query of a fresh list.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Does `selector` select an object with `labels`? An empty selector (no requirements) selects
/// nothing, as `metav1.LabelSelectorAsSelector` + the controllers' `selector.Empty()` guard do:
/// a controller with an empty selector must not adopt every pod of its namespace.
pub(crate) fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    if is_empty(selector) {
        return false;
    }
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = selector.match_expressions.iter().flatten().all(|req| {
        let values = req.values.as_deref().unwrap_or_default();
        let value = labels.get(&req.key);
        match req.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// A selector with no requirements at all.
pub(crate) fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

/// The selector as a `labelSelector` query string (`a=b,c in (d,e),!f`).
pub(crate) fn to_query(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for req in selector.match_expressions.iter().flatten() {
        let values = req.values.as_deref().unwrap_or_default().join(",");
        parts.push(match req.operator.as_str() {
            "In" => format!("{} in ({values})", req.key),
            "NotIn" => format!("{} notin ({values})", req.key),
            "Exists" => req.key.clone(),
            _ => format!("!{}", req.key),
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn selector_matching() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                req("tier", "In", &["a", "b"]),
                req("canary", "DoesNotExist", &[]),
                req("zone", "NotIn", &["x"]),
            ]),
        };
        let cases = [
            (labels(&[("app", "web"), ("tier", "a")]), true),
            (
                labels(&[("app", "web"), ("tier", "b"), ("zone", "y")]),
                true,
            ),
            (labels(&[("app", "web"), ("tier", "c")]), false),
            (labels(&[("app", "web")]), false),
            (
                labels(&[("app", "web"), ("tier", "a"), ("canary", "1")]),
                false,
            ),
            (
                labels(&[("app", "web"), ("tier", "a"), ("zone", "x")]),
                false,
            ),
            (labels(&[("app", "db"), ("tier", "a")]), false),
        ];
        for (pod, want) in cases {
            assert_eq!(matches(&sel, &pod), want, "{pod:?}");
        }
        assert_eq!(
            to_query(&sel),
            "app=web,tier in (a,b),!canary,zone notin (x)"
        );
    }

    #[test]
    fn empty_selector_selects_nothing() {
        assert!(!matches(&LabelSelector::default(), &labels(&[("a", "b")])));
    }
}
