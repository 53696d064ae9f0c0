//! The FieldsV1 wire format of `metadata.managedFields[].fieldsV1`.
//!
//! A trie of JSON objects whose keys are serialized path elements (`f:name`, `k:{"name":"c"}`,
//! `v:"x"`, `i:0`), with `".": {}` marking a node that is itself a member and has children.
//! Encoding follows structured-merge-diff's `fieldpath/serialize.go` byte for byte; decoding
//! follows its reader, which skips element types it does not know.

use serde_json::{Map, Value};

use crate::error::FieldsV1Error;
use crate::fieldset::FieldSet;
use crate::gojson::{self, Flavor};
use crate::limits::MAX_DEPTH;
use crate::path::PathElement;

impl FieldSet {
    /// The exact bytes kube-apiserver writes for this set, e.g.
    /// `{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`.
    pub fn to_fields_v1_json(&self) -> String {
        let mut out = String::from("{");
        self.emit(false, &mut out);
        out.push('}');
        out
    }

    fn emit(&self, include_self: bool, out: &mut String) {
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
        };
        if include_self && !self.is_empty() {
            sep(out);
            out.push_str(r#"".":{}"#);
        }
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let take_member = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(m), Some((c, _))) => *m <= *c,
            };
            sep(out);
            if take_member {
                let Some(m) = members.next() else { break };
                gojson::write_string(out, &serialize_element(m), Flavor::JsonIter);
                match children.peek() {
                    Some((c, child)) if *c == m => {
                        out.push_str(":{");
                        child.emit(true, out);
                        out.push('}');
                        children.next();
                    }
                    _ => out.push_str(":{}"),
                }
            } else {
                let Some((c, child)) = children.next() else {
                    break;
                };
                gojson::write_string(out, &serialize_element(c), Flavor::JsonIter);
                out.push_str(":{");
                child.emit(false, out);
                out.push('}');
            }
        }
    }

    /// The set as a JSON value, keys built in the apiserver's order (which serde_json keeps only
    /// with its `preserve_order` feature; [`FieldSet::to_fields_v1_json`] is exact regardless).
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.to_map(false))
    }

    fn to_map(&self, include_self: bool) -> Map<String, Value> {
        let mut map = Map::new();
        if include_self && !self.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        let mut keys: Vec<&PathElement> = self.members.iter().chain(self.children.keys()).collect();
        keys.sort();
        keys.dedup();
        for pe in keys {
            let child = match self.children.get(pe) {
                Some(c) => c.to_map(self.members.contains(pe)),
                None => Map::new(),
            };
            map.insert(serialize_element(pe), Value::Object(child));
        }
        map
    }

    /// Parses a FieldsV1 value (the `fieldsV1` object of a managedFields entry).
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsV1Error> {
        let Value::Object(map) = v else {
            return Err(FieldsV1Error::NotAnObject);
        };
        Ok(read_node(map, 0)?.0.unwrap_or_default())
    }

    /// Parses FieldsV1 JSON text.
    pub fn from_fields_v1_json(text: &str) -> Result<FieldSet, FieldsV1Error> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| FieldsV1Error::Json(e.to_string()))?;
        Self::from_fields_v1(&v)
    }
}

/// Reads one trie node; returns its children (if any) and whether the node is a member of its
/// parent. A node with no children (`{}`) is a member.
fn read_node(
    map: &Map<String, Value>,
    depth: usize,
) -> Result<(Option<FieldSet>, bool), FieldsV1Error> {
    if depth > MAX_DEPTH {
        return Err(FieldsV1Error::TooDeep);
    }
    let mut children: Option<FieldSet> = None;
    let mut is_member = false;
    for (key, value) in map {
        let Value::Object(child_map) = value else {
            return Err(FieldsV1Error::NotAnObject);
        };
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(pe) = deserialize_element(key)? else {
            continue;
        };
        let (grandchildren, child_is_member) = read_node(child_map, depth + 1)?;
        if child_is_member {
            children.get_or_insert_default().members.insert(pe.clone());
        }
        if let Some(g) = grandchildren {
            let node = children
                .get_or_insert_default()
                .children
                .entry(pe)
                .or_default();
            *node = node.union(&g);
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

/// `fieldpath.SerializePathElement`.
pub(crate) fn serialize_element(pe: &PathElement) -> String {
    let mut out = String::new();
    match pe {
        PathElement::Field(name) => {
            out.push_str("f:");
            out.push_str(name);
        }
        PathElement::Key(fields) => {
            out.push_str("k:{");
            for (i, (name, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                gojson::write_string(&mut out, name, Flavor::JsonIter);
                out.push(':');
                gojson::write_value(&mut out, v, Flavor::JsonIter);
            }
            out.push('}');
        }
        PathElement::Value(v) => {
            out.push_str("v:");
            gojson::write_value(&mut out, v, Flavor::JsonIter);
        }
        PathElement::Index(i) => {
            out.push_str("i:");
            out.push_str(&i.to_string());
        }
    }
    out
}

/// `fieldpath.DeserializePathElement`; `Ok(None)` for an unknown element type, which the
/// apiserver drops rather than rejects.
pub(crate) fn deserialize_element(s: &str) -> Result<Option<PathElement>, FieldsV1Error> {
    let bytes = s.as_bytes();
    if bytes.len() < 2 {
        return Err(FieldsV1Error::Element(
            "key must be 2 characters long:".into(),
        ));
    }
    if bytes[1] != b':' {
        return Err(FieldsV1Error::Element(format!("missing colon: {s}")));
    }
    let rest = &s[2..];
    let parse = |text: &str| -> Result<Value, FieldsV1Error> {
        serde_json::from_str(text).map_err(|e| FieldsV1Error::Element(format!("{s}: {e}")))
    };
    Ok(Some(match bytes[0] {
        b'f' => PathElement::Field(rest.to_string()),
        b'v' => PathElement::Value(parse(rest)?),
        b'k' => match parse(rest)? {
            Value::Object(fields) => PathElement::key(fields.into_iter().collect()),
            _ => {
                return Err(FieldsV1Error::Element(format!(
                    "{s}: key is not a JSON object"
                )));
            }
        },
        b'i' => PathElement::Index(
            rest.parse()
                .map_err(|_| FieldsV1Error::Element(format!("{s}: invalid index")))?,
        ),
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// FieldsV1 as real kube-apiservers wrote them (kube-apiserver, kubectl run, kubelet).
    const REAL: &[&str] = &[
        r#"{"f:metadata":{"f:labels":{".":{},"f:component":{},"f:provider":{}}},"f:spec":{"f:clusterIP":{},"f:ipFamilyPolicy":{},"f:ports":{".":{},"k:{\"port\":443,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:sessionAffinity":{},"f:type":{}}}"#,
        r#"{"f:metadata":{"f:labels":{".":{},"f:run":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"ngx\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}"#,
        r#"{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.0.3\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}"#,
        r#"{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app.kubernetes.io/name":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/name":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}}}}}}"#,
        r#"{"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/a\"":{},"v:\"example.com/b\"":{}}}}"#,
        r#"{}"#,
    ];

    #[test]
    fn real_samples_round_trip_byte_exact() {
        for sample in REAL {
            let set = FieldSet::from_fields_v1_json(sample).unwrap();
            assert_eq!(set.to_fields_v1_json(), *sample);
            let via_value = FieldSet::from_fields_v1(&set.to_fields_v1()).unwrap();
            assert_eq!(via_value, set);
        }
    }

    #[test]
    fn decodes_paths() {
        let set = FieldSet::from_fields_v1_json(REAL[0]).unwrap();
        let shown: Vec<String> = set
            .paths()
            .iter()
            .map(|p| crate::path::path_string(p))
            .collect();
        assert!(shown.contains(&".metadata.labels".to_string()));
        assert!(shown.contains(&r#".spec.ports[port=443,protocol="TCP"].targetPort"#.to_string()));
        assert!(!shown.contains(&".spec".to_string()));
    }

    #[test]
    fn orders_keys_numerically_and_escapes_html() {
        let mut set = FieldSet::new();
        for port in [8080, 80] {
            set.insert(&[
                PathElement::Field("ports".into()),
                PathElement::key(vec![("port".into(), json!(port))]),
            ]);
        }
        set.insert(&[PathElement::Field("a<b".into())]);
        assert_eq!(
            set.to_fields_v1_json(),
            r#"{"f:a\u003cb":{},"f:ports":{"k:{\"port\":80}":{},"k:{\"port\":8080}":{}}}"#
        );
        assert_eq!(
            FieldSet::from_fields_v1_json(&set.to_fields_v1_json()).unwrap(),
            set
        );
    }

    #[test]
    fn unknown_element_types_are_dropped_and_bad_ones_rejected() {
        let set = FieldSet::from_fields_v1_json(r#"{"f:a":{},"z:future":{}}"#).unwrap();
        assert_eq!(set.to_fields_v1_json(), r#"{"f:a":{}}"#);
        let bad = [
            r#"{"x":{}}"#,
            r#"{"fa":{}}"#,
            r#"{"k:[1]":{}}"#,
            r#"{"v:{":{}}"#,
            r#"{"i:x":{}}"#,
            r#"{"f:a":1}"#,
            r#"[]"#,
            r#"{"#,
        ];
        for text in bad {
            assert!(FieldSet::from_fields_v1_json(text).is_err(), "{text}");
        }
    }

    #[test]
    fn deep_input_is_an_error_not_a_crash() {
        let mut v = json!({});
        for _ in 0..(MAX_DEPTH + 5) {
            v = json!({ "f:a": v });
        }
        assert_eq!(FieldSet::from_fields_v1(&v), Err(FieldsV1Error::TooDeep));
    }
}
