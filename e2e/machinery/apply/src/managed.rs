//! `metadata.managedFields`: decoding entries into per-manager field sets and encoding them back
//! exactly as kube-apiserver does (`managedfields/internal/managedfields.go`).
//!
//! A manager is identified by its name, operation, subresource and, for `Update` only, the API
//! version: an applier keeps one entry across versions, an updater gets one per version.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::fieldset::FieldSet;
use crate::gojson::{self, Flavor};

/// `Apply` or `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write: create, update, patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who owns a field set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagerId {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    /// Part of the identity of `Update` entries only.
    pub(crate) api_version: Option<String>,
    pub(crate) subresource: String,
}

impl ManagerId {
    pub(crate) fn new(
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: &str,
    ) -> Self {
        ManagerId {
            manager: if manager.is_empty() {
                "unknown".into()
            } else {
                manager.into()
            },
            operation,
            api_version: (operation == Operation::Update).then(|| api_version.to_string()),
            subresource: subresource.to_string(),
        }
    }

    /// `BuildManagerIdentifier`: the entry without time and fields, as Go marshals it. Managers
    /// are keyed and sorted (in conflict messages) by this string.
    pub(crate) fn key(&self) -> String {
        let mut out = String::from("{");
        let mut sep = "";
        let mut field = |out: &mut String, name: &str, v: &str| {
            out.push_str(sep);
            sep = ",";
            gojson::write_string(out, name, Flavor::Std);
            out.push(':');
            gojson::write_string(out, v, Flavor::Std);
        };
        if !self.manager.is_empty() {
            field(&mut out, "manager", &self.manager);
        }
        field(&mut out, "operation", self.operation.as_str());
        if let Some(v) = self.api_version.as_deref().filter(|v| !v.is_empty()) {
            field(&mut out, "apiVersion", v);
        }
        if !self.subresource.is_empty() {
            field(&mut out, "subresource", &self.subresource);
        }
        out.push('}');
        out
    }

    /// `printManager`: how conflict messages name a manager, e.g. `"helm"`,
    /// `"kubectl-client-side-apply" using apps/v1`, `"op" with subresource "status" using v1`.
    pub(crate) fn describe(&self) -> String {
        let mut s = gojson::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                gojson::go_quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(
                " using {}",
                self.api_version.as_deref().unwrap_or_default()
            ));
        }
        s
    }
}

/// One manager's fields.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Owned {
    pub(crate) id: ManagerId,
    pub(crate) set: FieldSet,
    pub(crate) api_version: String,
}

/// All managers of an object, keyed by [`ManagerId::key`], with the time of each one's last
/// change (kept apart, as the apiserver does, so that a manager whose set changes without an
/// object change keeps its old time).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Managed {
    pub(crate) fields: BTreeMap<String, Owned>,
    pub(crate) times: BTreeMap<String, String>,
}

impl Managed {
    pub(crate) fn set_of(&self, key: &str) -> Option<&FieldSet> {
        self.fields.get(key).map(|o| &o.set)
    }

    pub(crate) fn drop_empty(&mut self) {
        self.fields.retain(|_, o| !o.set.is_empty());
    }

    /// `DecodeManagedFields`. A missing or null list is no managers.
    pub(crate) fn decode(list: Option<&Value>) -> Result<Managed, String> {
        let mut managed = Managed::default();
        let entries = match list {
            None | Some(Value::Null) => return Ok(managed),
            Some(Value::Array(entries)) => entries,
            Some(_) => return Err("managedFields must be a list".into()),
        };
        for (i, entry) in entries.iter().enumerate() {
            let Value::Object(e) = entry else {
                return Err(format!("managed fields entry {i} is not an object"));
            };
            let text = |name: &str| -> Result<&str, String> {
                match e.get(name) {
                    None | Some(Value::Null) => Ok(""),
                    Some(Value::String(s)) => Ok(s),
                    Some(_) => Err(format!(
                        "{name} of managed fields entry {i} must be a string"
                    )),
                }
            };
            let operation = match text("operation")? {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            let api_version = text("apiVersion")?;
            if api_version.is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match text("fieldsType")? {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => {
                    return Err(format!(
                        "invalid fieldsType {} in managed fields entry {i}",
                        gojson::go_quote(other)
                    ));
                }
            }
            let set = match e.get("fieldsV1") {
                None | Some(Value::Null) => FieldSet::new(),
                Some(v) => FieldSet::from_fields_v1(v)
                    .map_err(|err| format!("error decoding set: {err}"))?,
            };
            let id = ManagerId {
                manager: text("manager")?.to_string(),
                operation,
                api_version: (operation == Operation::Update).then(|| api_version.to_string()),
                subresource: text("subresource")?.to_string(),
            };
            let key = id.key();
            match text("time")? {
                "" => managed.times.remove(&key),
                t => managed.times.insert(key.clone(), t.to_string()),
            };
            managed.fields.insert(
                key,
                Owned {
                    id,
                    set,
                    api_version: api_version.to_string(),
                },
            );
        }
        Ok(managed)
    }

    /// `encodeManagedFields`: entries sorted by operation, time (to the second), manager, API
    /// version and subresource; `None` when there is no manager (the field is then omitted).
    pub(crate) fn encode(&self) -> Option<Value> {
        if self.fields.is_empty() {
            return None;
        }
        let mut entries: Vec<(&String, &Owned)> = self.fields.iter().collect();
        let seconds = |key: &String| self.times.get(key).map_or(0, |t| unix_seconds(t));
        entries.sort_by(|(pk, p), (qk, q)| {
            p.id.operation
                .cmp(&q.id.operation)
                .then_with(|| seconds(pk).cmp(&seconds(qk)))
                .then_with(|| p.id.manager.cmp(&q.id.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.id.subresource.cmp(&q.id.subresource))
        });
        let list = entries
            .into_iter()
            .map(|(key, owned)| {
                let mut e = Map::new();
                if !owned.id.manager.is_empty() {
                    e.insert("manager".into(), owned.id.manager.clone().into());
                }
                e.insert("operation".into(), owned.id.operation.as_str().into());
                e.insert("apiVersion".into(), owned.api_version.clone().into());
                if let Some(t) = self.times.get(key) {
                    e.insert("time".into(), t.clone().into());
                }
                e.insert("fieldsType".into(), "FieldsV1".into());
                e.insert("fieldsV1".into(), owned.set.to_fields_v1());
                if !owned.id.subresource.is_empty() {
                    e.insert("subresource".into(), owned.id.subresource.clone().into());
                }
                Value::Object(e)
            })
            .collect();
        Some(Value::Array(list))
    }
}

/// Seconds since the epoch of an RFC 3339 time (`2024-05-01T10:00:00Z`, fractions and offsets
/// allowed); 0 when unreadable, which sorts like a missing time.
pub(crate) fn unix_seconds(t: &str) -> i64 {
    parse_rfc3339(t).unwrap_or(0)
}

fn parse_rfc3339(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = t.get(from..from + len)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    // Only ASCII is valid here; checking it first keeps every slice below on char boundaries.
    if !t.is_ascii()
        || b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, min, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &t[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(&rest[..1], "+" | "-") && &rest[3..4] == ":" => {
            let (h, m) = (
                rest[1..3].parse::<i64>().ok()?,
                rest[4..6].parse::<i64>().ok()?,
            );
            let off = h * 3600 + m * 60;
            if rest.starts_with('-') { -off } else { off }
        }
        _ => return None,
    };
    Some(days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers_match_build_manager_identifier() {
        let cases = [
            (
                ManagerId::new("kubectl", Operation::Apply, "apps/v1", ""),
                r#"{"manager":"kubectl","operation":"Apply"}"#,
            ),
            (
                ManagerId::new(
                    "kubectl-client-side-apply",
                    Operation::Update,
                    "apps/v1",
                    "",
                ),
                r#"{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"apps/v1"}"#,
            ),
            (
                ManagerId::new("op", Operation::Update, "v1", "status"),
                r#"{"manager":"op","operation":"Update","apiVersion":"v1","subresource":"status"}"#,
            ),
            (
                ManagerId::new("", Operation::Apply, "v1", ""),
                r#"{"manager":"unknown","operation":"Apply"}"#,
            ),
        ];
        for (id, want) in cases {
            assert_eq!(id.key(), want);
        }
    }

    #[test]
    fn describe_matches_print_manager() {
        assert_eq!(
            ManagerId::new("helm", Operation::Apply, "v1", "").describe(),
            r#""helm""#
        );
        assert_eq!(
            ManagerId::new(
                "kubectl-client-side-apply",
                Operation::Update,
                "apps/v1",
                ""
            )
            .describe(),
            r#""kubectl-client-side-apply" using apps/v1"#
        );
        assert_eq!(
            ManagerId::new("op", Operation::Apply, "v1", "status").describe(),
            r#""op" with subresource "status""#
        );
    }

    #[test]
    fn decode_errors_use_apiserver_wording() {
        let cases = [
            (
                json!([{"operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}]),
                "operation must be `Apply` or `Update`",
            ),
            (
                json!([{"operation": "Apply", "fieldsType": "FieldsV1"}]),
                "apiVersion must not be empty",
            ),
            (
                json!([{"operation": "Apply", "apiVersion": "v1"}]),
                "missing fieldsType in managed fields entry 0",
            ),
            (
                json!([{"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV2"}]),
                "invalid fieldsType \"FieldsV2\" in managed fields entry 0",
            ),
            (
                json!([{"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"xy": {}}}]),
                "error decoding set: missing colon: xy",
            ),
            (json!({}), "managedFields must be a list"),
        ];
        for (input, want) in cases {
            assert_eq!(Managed::decode(Some(&input)), Err(want.to_string()));
        }
    }

    #[test]
    fn round_trip_sorts_like_the_apiserver() {
        let list = json!([
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:02Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "z", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:01Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:z": {}}}, "subresource": "status"},
            {"manager": "a", "operation": "Apply", "apiVersion": "v1", "time": "2024-01-01T00:00:09Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}
        ]);
        let managed = Managed::decode(Some(&list)).unwrap();
        let encoded = managed.encode().unwrap();
        let managers: Vec<&str> = encoded
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["a", "z", "b"]);
        assert_eq!(encoded[1], list[1]);
        assert_eq!(Managed::decode(None).unwrap().encode(), None);
    }

    #[test]
    fn rfc3339_seconds() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0),
            ("2024-02-29T12:30:15Z", 1_709_209_815),
            ("2024-02-29T12:30:15.999999Z", 1_709_209_815),
            ("2024-02-29T14:30:15+02:00", 1_709_209_815),
            ("garbage", 0),
            ("2024-13-01T00:00:00Z", 0),
            ("2024-01-01T00:00:00é+:00", 0),
            ("2024-01-01Té0:00:00Z", 0),
        ];
        for (t, want) in cases {
            assert_eq!(unix_seconds(t), want, "{t}");
        }
    }
}
