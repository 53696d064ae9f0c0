//! How the Go code sees a decoded JSON value: its dynamic type, `==`, and `fmt` rendering.
//!
//! kube-apiserver decodes patches with `sigs.k8s.io/json` (integers stay `int64`, other numbers
//! are `float64`) and the error texts embed values with `%v`/`%s`. Matching those texts and the
//! cases where Go's `==` panics needs this small model of Go's `interface{}` values.

use serde_json::{Map, Value};

use crate::error::{PatchError, panics};

/// The dynamic Go type of a decoded JSON value (`reflect.TypeOf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoType {
    Nil,
    Bool,
    Int64,
    Float64,
    String,
    Slice,
    Map,
}

impl GoType {
    pub(crate) fn of(v: &Value) -> Self {
        match v {
            Value::Null => Self::Nil,
            Value::Bool(_) => Self::Bool,
            // PreserveInts keeps a number as int64 only when it fits.
            Value::Number(n) if n.is_i64() => Self::Int64,
            Value::Number(_) => Self::Float64,
            Value::String(_) => Self::String,
            Value::Array(_) => Self::Slice,
            Value::Object(_) => Self::Map,
        }
    }

    /// `reflect.Type.String()`, or what `%s` prints for a nil `reflect.Type`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Nil => "%!s(<nil>)",
            Self::Bool => "bool",
            Self::Int64 => "int64",
            Self::Float64 => "float64",
            Self::String => "string",
            Self::Slice => "[]interface {}",
            Self::Map => "map[string]interface {}",
        }
    }
}

/// Go's `a == b` on two `interface{}` values: false across types, a panic for two maps or two
/// slices (uncomparable), value equality otherwise.
pub(crate) fn eq(a: &Value, b: &Value) -> Result<bool, PatchError> {
    let (ta, tb) = (GoType::of(a), GoType::of(b));
    if ta != tb {
        return Ok(false);
    }
    match ta {
        GoType::Map => Err(PatchError::GoPanic(panics::COMPARE_MAP)),
        GoType::Slice => Err(PatchError::GoPanic(panics::COMPARE_SLICE)),
        GoType::Float64 => Ok(as_f64(a) == as_f64(b)),
        _ => Ok(a == b),
    }
}

/// Using `v` as a key of a Go `map[interface{}]…`: maps and slices panic.
pub(crate) fn ensure_hashable(v: &Value) -> Result<(), PatchError> {
    match v {
        Value::Object(_) => Err(PatchError::GoPanic(panics::HASH_MAP)),
        Value::Array(_) => Err(PatchError::GoPanic(panics::HASH_SLICE)),
        _ => Ok(()),
    }
}

fn as_f64(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// `fmt.Sprintf("%v", m)` for a map.
pub(crate) fn v_map(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    write_map(&mut out, map, Verb::V);
    out
}

/// `fmt.Sprintf("%s", v)`: strings print as is, other scalars as `%!s(type=value)`.
pub(crate) fn s(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, Verb::S);
    out
}

/// `fmt.Sprintf("%v", list)` for a slice.
pub(crate) fn v_list(list: &[Value]) -> String {
    let mut out = String::new();
    write_list(&mut out, list, Verb::V);
    out
}

/// `fmt.Sprint(lists)` for a slice of slices, as in "list element types are not identical".
pub(crate) fn v_lists(lists: &[&[Value]]) -> String {
    let mut out = String::from("[");
    for (i, list) in lists.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_list(&mut out, list, Verb::V);
    }
    out.push(']');
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    V,
    S,
}

fn write_value(out: &mut String, value: &Value, verb: Verb) {
    let scalar = match value {
        Value::Array(list) => return write_list(out, list, verb),
        Value::Object(map) => return write_map(out, map, verb),
        Value::String(s) => return out.push_str(s),
        Value::Null => {
            out.push_str(if verb == Verb::S {
                "%!s(<nil>)"
            } else {
                "<nil>"
            });
            return;
        }
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => float(n.as_f64().unwrap_or(f64::NAN)),
        },
    };
    if verb == Verb::S {
        out.push_str(&format!("%!s({}={scalar})", GoType::of(value).name()));
    } else {
        out.push_str(&scalar);
    }
}

fn write_list(out: &mut String, list: &[Value], verb: Verb) {
    out.push('[');
    for (i, item) in list.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_value(out, item, verb);
    }
    out.push(']');
}

/// Go's fmt prints map entries sorted by key.
fn write_map(out: &mut String, map: &Map<String, Value>, verb: Verb) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    out.push_str("map[");
    for (i, (k, val)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(k);
        out.push(':');
        write_value(out, val, verb);
    }
    out.push(']');
}

/// `%v` of a float64: the shortest digits, `%e` style when the exponent is below -4 or at
/// least 6 (`1e+06`, `1.5e-05`), plain decimal otherwise.
fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "-1.2345e6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else {
        let point = point as usize;
        if digits.len() <= point {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", &digits[..point], &digits[point..])
        }
    };
    format!("{sign}{body}")
}

/// `strconv.Quote`, for the error texts that quote user input.
pub(crate) use localkube_gofmt::quote;

/// `strconv.Atoi`: optional sign, decimal digits only, 64-bit range; Go's error texts.
pub(crate) fn atoi(s: &str) -> Result<i64, String> {
    let fail = |what: &str| format!("strconv.Atoi: parsing {}: {what}", quote(s));
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(fail("invalid syntax"));
    }
    let mut magnitude: u64 = 0;
    for b in digits.bytes() {
        magnitude = magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(b - b'0')))
            .ok_or_else(|| fail("value out of range"))?;
    }
    if negative {
        match magnitude {
            m if m <= i64::MAX as u64 => Ok(-(m as i64)),
            m if m == i64::MAX as u64 + 1 => Ok(i64::MIN),
            _ => Err(fail("value out of range")),
        }
    } else {
        i64::try_from(magnitude).map_err(|_| fail("value out of range"))
    }
}

/// `mergepatch.ErrBadArgType(expected, actual)`.
pub(crate) fn bad_arg_type(expected: GoType, actual: &Value) -> PatchError {
    PatchError::Internal(format!(
        "expected a {}, but received a {}",
        expected.name(),
        GoType::of(actual).name()
    ))
}

/// `mergepatch.ErrNoMergeKey(m, k)`.
pub(crate) fn no_merge_key(map: &Map<String, Value>, key: &str) -> PatchError {
    PatchError::Internal(format!(
        "map: {} does not contain declared merge key: {key}",
        v_map(map)
    ))
}

/// The JSON kind name Go's decoder puts in "cannot unmarshal X into …".
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_go_percent_v() {
        for (f, want) in [
            (1_000_000.0, "1e+06"),
            (123_456.0, "123456"),
            (1.5, "1.5"),
            (0.000_015, "1.5e-05"),
            (0.0001, "0.0001"),
            (-2.5e20, "-2.5e+20"),
            (1_234_567.0, "1.234567e+06"),
        ] {
            assert_eq!(float(f), want, "{f}");
        }
    }

    #[test]
    fn maps_print_sorted_with_nested_values() {
        let value = json!({"b": [1, "x", null], "a": {"c": true, "d": 2.5}});
        let Value::Object(map) = value else {
            unreachable!()
        };
        assert_eq!(v_map(&map), "map[a:map[c:true d:2.5] b:[1 x <nil>]]");
        assert_eq!(s(&json!(5)), "%!s(int64=5)");
        assert_eq!(s(&json!({"$patch": 1})), "map[$patch:%!s(int64=1)]");
    }

    #[test]
    fn atoi_matches_go() {
        assert_eq!(atoi("+7"), Ok(7));
        assert_eq!(atoi("-0"), Ok(0));
        assert_eq!(atoi("007"), Ok(7));
        assert_eq!(
            atoi("x"),
            Err("strconv.Atoi: parsing \"x\": invalid syntax".into())
        );
        assert_eq!(
            atoi(""),
            Err("strconv.Atoi: parsing \"\": invalid syntax".into())
        );
        assert_eq!(
            atoi("99999999999999999999"),
            Err("strconv.Atoi: parsing \"99999999999999999999\": value out of range".into())
        );
        assert_eq!(atoi("-9223372036854775808"), Ok(i64::MIN));
    }

    #[test]
    fn go_equality_panics_only_on_two_maps_or_slices() {
        assert_eq!(eq(&json!(1), &json!(1.0)), Ok(false));
        assert_eq!(eq(&json!("a"), &json!({})), Ok(false));
        assert_eq!(eq(&json!(null), &json!(null)), Ok(true));
        assert!(matches!(
            eq(&json!({}), &json!({})),
            Err(PatchError::GoPanic(_))
        ));
    }
}
