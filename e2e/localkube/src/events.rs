//! One event storage, two views (spec §a10): kube-apiserver keeps core/v1 Events under
//! `/registry/events/` and serves the same objects as events.k8s.io/v1. kube-rs's `Recorder`
//! writes the new view (create, then merge patches of `series`), `kubectl describe` reads the
//! core view with `involvedObject.*` field selectors, so both must see the same events.

use serde_json::{Map, Value};

/// core/v1 field ↔ events.k8s.io/v1 field; the rest (eventTime, series, action, reason,
/// related, type, reportingInstance, metadata) have the same name in both.
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

pub fn is_events_v1(group: &str, kind: &str) -> bool {
    group == "events.k8s.io" && kind == "Event"
}

fn rename(obj: &Value, to_v1: bool, api_version: &str) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let renamed = RENAMES
            .iter()
            .find_map(|(core, v1)| match to_v1 {
                true if key == core => Some(*v1),
                false if key == v1 => Some(*core),
                _ => None,
            })
            .unwrap_or(key.as_str());
        out.insert(renamed.to_string(), value.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    out.insert("kind".into(), Value::String("Event".into()));
    Value::Object(out)
}

/// The stored (core/v1) event as events.k8s.io/v1 shows it.
pub fn to_events_v1(core: &Value) -> Value {
    rename(core, true, "events.k8s.io/v1")
}

/// An events.k8s.io/v1 event as it is stored (core/v1).
pub fn to_core(v1: &Value) -> Value {
    rename(v1, false, "v1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_views_carry_the_same_event() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "pulled", "reason": "Pulled",
            "reportingController": "kubelet", "reportingInstance": "n1", "type": "Normal",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}
        });
        let core = to_core(&v1);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "pulled");
        assert_eq!(core["reportingComponent"], "kubelet");
        assert_eq!(core["series"]["count"], 2);
        assert_eq!(to_events_v1(&core), v1);
    }
}
