//! Unstructured JSON values as CEL values, following the apiserver's `UnstructuredToVal`:
//! object fields are escaped CEL identifiers, map keys are not, `number` is always a double,
//! and string formats become bytes, durations and timestamps.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use kube_cel::cel::Value as CelValue;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use crate::model::{Node, SchemaType};

/// Values nested deeper than this are refused rather than converted: conversion is recursive
/// (serde_json refuses documents deeper than 128, so only hand-built values get here).
const MAX_DEPTH: usize = 512;

/// The value is too deeply nested to be given to CEL.
#[derive(Debug)]
pub(crate) struct TooDeep;

const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL name of an object field, by the Kubernetes escaping rules: reserved words become
/// `__word__`; `__`, `.`, `-` and `/` become `__underscores__`, `__dot__`, `__dash__`, `__slash__`.
pub(crate) fn escape_field_name(name: &str) -> String {
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    name.replace("__", "__underscores__")
        .replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__")
}

/// Converts `v`, described by `node` (absent for unknown preserved fields), to a CEL value.
pub(crate) fn to_cel(v: &Value, node: Option<&Node>) -> Result<CelValue, TooDeep> {
    convert(v, node, 0)
}

fn convert(v: &Value, node: Option<&Node>, depth: usize) -> Result<CelValue, TooDeep> {
    if depth > MAX_DEPTH {
        return Err(TooDeep);
    }
    Ok(match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            let is_number_type = node.is_some_and(|n| n.ty == Some(SchemaType::Number));
            match n.as_i64() {
                Some(i) if !is_number_type => CelValue::Int(i),
                _ => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
            }
        }
        Value::String(s) => string(s, node),
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            let converted: Result<Vec<_>, _> = items
                .iter()
                .map(|i| convert(i, item_node, depth + 1))
                .collect();
            CelValue::List(Arc::new(converted?))
        }
        Value::Object(map) => {
            let is_map = node.is_some_and(|n| n.has_additional());
            let mut out = HashMap::with_capacity(map.len());
            for (k, child) in map {
                let child_node =
                    node.and_then(|n| n.properties.get(k).or_else(|| n.additional_schema()));
                let key = if is_map {
                    k.clone()
                } else {
                    escape_field_name(k)
                };
                out.insert(
                    Key::String(Arc::new(key)),
                    convert(child, child_node, depth + 1)?,
                );
            }
            CelValue::Map(Map { map: Arc::new(out) })
        }
    })
}

fn string(s: &str, node: Option<&Node>) -> CelValue {
    let plain = || CelValue::String(Arc::new(s.to_owned()));
    let Some(node) = node else { return plain() };
    if node.int_or_string || node.ty != Some(SchemaType::String) {
        return plain();
    }
    match node.format.as_deref() {
        Some("byte") => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_or_else(|_| plain(), |b| CelValue::Bytes(Arc::new(b))),
        Some("duration") => parse_duration(s).map_or_else(plain, CelValue::Duration),
        Some("date") => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map_or_else(plain, |dt| CelValue::Timestamp(dt.and_utc().fixed_offset())),
        Some("date-time" | "datetime") => {
            chrono::DateTime::parse_from_rfc3339(s).map_or_else(|_| plain(), CelValue::Timestamp)
        }
        _ => plain(),
    }
}

/// A Go `time.ParseDuration` string (`1h30m`, `-1.5s`, `300ms`, `0`).
pub(crate) fn parse_duration(s: &str) -> Option<chrono::Duration> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        nanos += number * scale;
    }
    if !nanos.is_finite() || nanos > i64::MAX as f64 {
        return None;
    }
    let d = chrono::Duration::nanoseconds(nanos as i64);
    Some(if neg { -d } else { d })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_kubernetes() {
        assert_eq!(escape_field_name("namespace"), "__namespace__");
        assert_eq!(escape_field_name("a-b.c/d"), "a__dash__b__dot__c__slash__d");
        assert_eq!(escape_field_name("a__b_c"), "a__underscores__b_c");
        assert_eq!(escape_field_name("plain"), "plain");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h30m"), Some(chrono::Duration::minutes(90)));
        assert_eq!(
            parse_duration("-1.5s"),
            Some(-chrono::Duration::milliseconds(1500))
        );
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration(""), None);
    }
}
