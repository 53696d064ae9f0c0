//! Go's text renderings that end up inside apiserver messages.
//!
//! Clients compare error texts, so values are printed the way Go prints them: `%q`
//! (`strconv.Quote`), `%v` of a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`) and
//! `encoding/json.Marshal` (sorted map keys, HTML-safe escapes, Go's float layout).

use serde_json::Value;

/// Nesting beyond which [`json`] stops descending and prints `null`: the renderer is recursive and
/// must not overflow the stack on hostile input (serde_json itself refuses documents deeper than 128).
const MAX_RENDER_DEPTH: usize = 512;

/// `strconv.Quote(s)`: a double-quoted Go string literal.
pub(crate) use localkube_gofmt::quote;

/// `fmt.Sprintf("%v", f)` for a float64: the shortest digits, in `%e` form when the decimal
/// exponent is below -4 or at least 6 (strconv uses `eprec = 6` for the shortest format).
pub(crate) fn float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let (neg, digits, exp) = shortest_digits(f);
    let body = if !(-4..6).contains(&exp) {
        exponent_form(&digits, exp)
    } else {
        fixed_form(&digits, exp)
    };
    if neg { format!("-{body}") } else { body }
}

/// Go's `encoding/json` float layout: fixed notation for `1e-6 <= |f| < 1e21`, otherwise `%e`
/// with a one-digit negative exponent (`1e-7`, but `1e+21`).
fn json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".to_owned();
    }
    let (neg, digits, exp) = shortest_digits(f);
    let abs = f.abs();
    let body = if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = exponent_form(&digits, exp);
        // Go cleans up "e-09" to "e-9" (only for negative exponents).
        match s.find("e-0") {
            Some(i) if s.len() == i + 4 => format!("{}e-{}", &s[..i], &s[i + 3..]),
            _ => s,
        }
    } else {
        fixed_form(&digits, exp)
    };
    if neg { format!("-{body}") } else { body }
}

/// The shortest round-tripping decimal digits of `f` and its decimal exponent (`d.ddd × 10^exp`).
fn shortest_digits(f: f64) -> (bool, String, i32) {
    let neg = f.is_sign_negative() && f != 0.0;
    // Rust's `{:e}` prints the shortest round-tripping digits, e.g. `1.5e-7`.
    let s = format!("{:e}", f.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() {
        "0".to_owned()
    } else {
        digits.to_owned()
    };
    (neg, digits, exp.parse().unwrap_or(0))
}

fn exponent_form(digits: &str, exp: i32) -> String {
    let (first, rest) = digits.split_at(1);
    let mut out = first.to_owned();
    if !rest.is_empty() {
        out.push('.');
        out.push_str(rest);
    }
    let sign = if exp < 0 { '-' } else { '+' };
    out.push_str(&format!("e{sign}{:02}", exp.abs()));
    out
}

fn fixed_form(digits: &str, exp: i32) -> String {
    let point = exp + 1; // digits before the decimal point
    if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    }
}

/// A JSON number as Go prints it with `%v`: integers as integers, other values as float64.
pub(crate) fn number_v(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        // Go decodes integers above int64 as float64.
        float_v(u as f64)
    } else {
        float_v(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// `json.Marshal(v)` of an unstructured value.
pub(crate) fn json(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out, 0);
    out
}

fn write_json(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_RENDER_DEPTH {
        out.push_str("null");
        return;
    }
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&json_float(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out, depth + 1);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Go sorts map keys; serde_json may keep insertion order (feature `preserve_order`).
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(k, out);
                out.push(':');
                if let Some(v) = map.get(k) {
                    write_json(v, out, depth + 1);
                }
            }
            out.push('}');
        }
    }
}

/// A JSON string with Go's escapes, including the HTML-safe `\u003c`, `\u003e`, `\u0026`.
pub(crate) fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_like_strconv() {
        assert_eq!(quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
        assert_eq!(quote("\u{1}é"), r#""\x01é""#);
        assert_eq!(quote("\u{2028}"), r#""\u2028""#);
    }

    #[test]
    fn floats_like_percent_v() {
        for (f, want) in [
            (1.0, "1"),
            (0.5, "0.5"),
            (1.5e-7, "1.5e-07"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (8589934592.0, "8.589934592e+09"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (0.0, "0"),
        ] {
            assert_eq!(float_v(f), want, "{f}");
        }
    }

    #[test]
    fn json_like_encoding_json() {
        let v = json!({"b": [1, 2.5, 1e21, 1e-7, 2.0], "a": "<x>&", "c": null, "d": true});
        assert_eq!(
            json(&v),
            r#"{"a":"\u003cx\u003e\u0026","b":[1,2.5,1e+21,1e-7,2],"c":null,"d":true}"#
        );
    }
}
