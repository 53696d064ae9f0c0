//! The two bits of Go formatting that the API server's messages are made of: `%q` quoting
//! (`strconv.Quote`) and the `[a, b]` rendering of an aggregated error list
//! (`k8s.io/apimachinery/pkg/util/errors` `aggregate.Error`). Clients and tests compare the
//! messages byte for byte, so these follow Go rather than Rust's `{:?}`.

use std::fmt::Write as _;

/// `strconv.Quote`: double quotes, `\"` and `\\`, the C escapes, `\xNN` for other ASCII controls,
/// `\uNNNN`/`\UNNNNNNNN` for non-printable code points; printable Unicode is kept as is.
/// "Printable" follows `unicode.IsPrint` closely enough for API names and paths: control
/// characters and whitespace other than the ASCII space are escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, otherwise the distinct messages
/// in order, comma separated, in brackets (a list whose messages are all equal prints one, bare).
pub fn aggregate(messages: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for m in messages {
        if !seen.contains(&m.as_str()) {
            seen.push(m);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_matches_go() {
        let cases = [
            ("plain", r#""plain""#),
            ("a\"b", r#""a\"b""#),
            ("back\\slash", r#""back\\slash""#),
            ("tab\tnl\n", r#""tab\tnl\n""#),
            ("\u{1}", r#""\x01""#),
            ("\u{7f}", r#""\x7f""#),
            ("é ü", r#""é ü""#),
            ("\u{a0}", r#""\u00a0""#),
        ];
        for (input, want) in cases {
            assert_eq!(quote(input), want, "{input:?}");
        }
    }

    #[test]
    fn aggregate_matches_go() {
        assert_eq!(aggregate(&[]), "");
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
