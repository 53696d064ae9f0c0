//! Go-compatible rendering of JSON values.
//!
//! Field sets are compared byte for byte with what kube-apiserver writes, and the order of
//! managers, conflicts and list keys follows Go's value ordering. serde_json neither escapes the
//! way Go does (`<` → `\u003c`) nor orders mixed numbers the way structured-merge-diff does, so
//! the few places where bytes or order are observable go through this module.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Number, Value};

/// Which Go encoder's escaping to mimic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// json-iterator in `ConfigCompatibleWithStandardLibrary` mode, which structured-merge-diff
    /// uses for FieldsV1: `\b` and `\f` come out as `\u0008` and `\u000c`.
    JsonIter,
    /// encoding/json since Go 1.22: `\b` and `\f` get their short escapes.
    Std,
}

/// Appends `s` as a quoted JSON string, escaping HTML characters and U+2028/U+2029 as Go does.
pub(crate) fn write_string(out: &mut String, s: &str, flavor: Flavor) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' if flavor == Flavor::Std => out.push_str("\\b"),
            '\u{c}' if flavor == Flavor::Std => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends `v` as compact JSON with object keys sorted, as Go encodes a `map[string]any`.
pub(crate) fn write_value(out: &mut String, v: &Value, flavor: Flavor) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s, flavor),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, flavor);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k, flavor);
                out.push(':');
                if let Some(child) = map.get(k) {
                    write_value(out, child, flavor);
                }
            }
            out.push('}');
        }
    }
}

/// Go's encoding/json number output: integers as is, floats in the shortest form, switching to
/// exponent notation below 1e-6 and from 1e21 on.
fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        let abs = f.abs();
        if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
            let (mantissa, exp) = split_exponent(f);
            let sign = if exp < 0 { '-' } else { '+' };
            let _ = write!(out, "{mantissa}e{sign}{:02}", exp.unsigned_abs());
            // encoding/json cleans `e-07` up to `e-7`.
            if (-9..0).contains(&exp) {
                let len = out.len();
                out.remove(len - 2);
            }
        } else {
            let _ = write!(out, "{f}");
        }
    }
}

/// Splits the shortest round-trip representation of `f` into mantissa and decimal exponent.
fn split_exponent(f: f64) -> (String, i32) {
    let rendered = format!("{f:e}");
    match rendered.split_once('e') {
        Some((mantissa, exp)) => (mantissa.to_string(), exp.parse().unwrap_or(0)),
        None => (rendered, 0),
    }
}

/// Go's `fmt` `%v` for a float64: `%g` with the shortest precision.
fn format_float_v(f: f64) -> String {
    let (mantissa, exp) = split_exponent(f);
    let digits = mantissa.chars().filter(char::is_ascii_digit).count() as i32;
    let mut eprec = 6;
    if eprec > digits && digits > exp {
        eprec = digits;
    }
    if exp < -4 || exp >= eprec {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        format!("{f}")
    }
}

/// structured-merge-diff's `value.ToString`, used in conflict paths such as `[name="nginx"]`.
pub(crate) fn to_go_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) if n.as_u64().is_none() => format_float_v(f),
            _ => n.to_string(),
        },
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(to_go_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            keys.into_iter()
                .filter_map(|k| {
                    map.get(k)
                        .map(|child| format!("{k}={}", to_go_string(child)))
                })
                .collect()
        }
    }
}

/// Go's `strconv.Quote` (the `%q` verb).
pub(crate) use localkube_gofmt::quote as go_quote;

/// A JSON number as structured-merge-diff sees it: an int64 or a float64.
enum GoNumber {
    Int(i64),
    Float(f64),
}

fn go_number(n: &Number) -> GoNumber {
    match n.as_i64() {
        Some(i) => GoNumber::Int(i),
        None => GoNumber::Float(n.as_f64().unwrap_or(0.0)),
    }
}

fn float_cmp(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// The rank of a value's type in structured-merge-diff's total order: numbers, strings, bools,
/// lists, maps, null.
fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// structured-merge-diff's `value.Compare`: a total order over JSON values in which floats and
/// integers compare numerically (so `1` and `1.0` are the same set item).
pub(crate) fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (go_number(x), go_number(y)) {
            (GoNumber::Int(i), GoNumber::Int(j)) => i.cmp(&j),
            (GoNumber::Int(i), GoNumber::Float(g)) => float_cmp(i as f64, g),
            (GoNumber::Float(f), GoNumber::Int(j)) => float_cmp(f, j as f64),
            (GoNumber::Float(f), GoNumber::Float(g)) => float_cmp(f, g),
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y.iter()) {
                let c = compare(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => compare_maps(x, y),
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => type_rank(a).cmp(&type_rank(b)),
    }
}

/// `value.MapCompare`: walks the union of keys in lexical order.
fn compare_maps(
    x: &serde_json::Map<String, Value>,
    y: &serde_json::Map<String, Value>,
) -> Ordering {
    if x.is_empty() && y.is_empty() {
        return Ordering::Equal;
    }
    let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
    keys.sort();
    keys.dedup();
    for (i, k) in keys.into_iter().enumerate() {
        let c = match (x.get(k), y.get(k)) {
            _ if i == x.len() => Ordering::Less,
            _ if i == y.len() => Ordering::Greater,
            (None, _) => Ordering::Greater,
            (_, None) => Ordering::Less,
            (Some(l), Some(r)) => compare(l, r),
        };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// `value.Equals`: deep equality in which `1` equals `1.0`.
pub(crate) fn equals(a: &Value, b: &Value) -> bool {
    compare(a, b) == Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encoded(v: &Value) -> String {
        let mut out = String::new();
        write_value(&mut out, v, Flavor::JsonIter);
        out
    }

    #[test]
    fn strings_escape_like_go() {
        let cases = [
            ("a<b>&c", r#""a\u003cb\u003e\u0026c""#),
            ("quote\"back\\", r#""quote\"back\\""#),
            ("nl\ntab\t", r#""nl\ntab\t""#),
            ("\u{1}", r#""\u0001""#),
            ("\u{8}", r#""\u0008""#),
            ("\u{2028}", r#""\u2028""#),
            ("héllo", "\"héllo\""),
        ];
        for (input, want) in cases {
            assert_eq!(encoded(&json!(input)), want, "{input:?}");
        }
        let mut std = String::new();
        write_string(&mut std, "\u{8}\u{c}", Flavor::Std);
        assert_eq!(std, r#""\b\f""#);
    }

    #[test]
    fn numbers_render_like_encoding_json() {
        let cases = [
            (json!(80), "80"),
            (json!(-3), "-3"),
            (json!(1.5), "1.5"),
            (json!(100.0), "100"),
            (json!(1e21), "1e+21"),
            (json!(1.5e-7), "1.5e-7"),
            (json!(1e-10), "1e-10"),
            (json!(u64::MAX), "18446744073709551615"),
        ];
        for (input, want) in cases {
            assert_eq!(encoded(&input), want, "{input}");
        }
    }

    #[test]
    fn objects_sort_keys() {
        assert_eq!(
            encoded(&json!({"b": 1, "a": [true, null]})),
            r#"{"a":[true,null],"b":1}"#
        );
    }

    #[test]
    fn go_strings_for_paths() {
        let cases = [
            (json!("nginx"), "\"nginx\""),
            (json!(8080), "8080"),
            (json!(1.5), "1.5"),
            (json!(1e8), "1e+08"),
            (json!(123456789.5), "1.234567895e+08"),
            (json!(true), "true"),
            (json!(null), "null"),
            (json!("tab\there"), "\"tab\\there\""),
        ];
        for (input, want) in cases {
            assert_eq!(to_go_string(&input), want, "{input}");
        }
    }

    #[test]
    fn value_order_matches_structured_merge_diff() {
        assert_eq!(compare(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(compare(&json!(80), &json!(8080)), Ordering::Less);
        assert_eq!(compare(&json!(2), &json!("a")), Ordering::Less);
        assert_eq!(compare(&json!("a"), &json!(true)), Ordering::Less);
        assert_eq!(compare(&json!(true), &json!([1])), Ordering::Less);
        assert_eq!(compare(&json!([1]), &json!({})), Ordering::Less);
        assert_eq!(compare(&json!({}), &json!(null)), Ordering::Less);
        assert_eq!(compare(&json!([1, 2]), &json!([1])), Ordering::Greater);
        assert_eq!(
            compare(&json!({"a": 1}), &json!({"a": 1, "b": 1})),
            Ordering::Less
        );
        assert!(equals(&json!({"a": [1.0]}), &json!({"a": [1]})));
    }
}
