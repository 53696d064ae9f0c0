//! Go's `strconv.Quote` (the `%q` verb). kube-apiserver quotes user input this way in its error
//! messages, and clients and tests compare those messages byte for byte, so every crate of the
//! local control plane quotes through this one function rather than Rust's `{:?}`.

use std::fmt::Write as _;

/// Whether Go's `unicode.IsPrint` holds closely enough for API names, paths and values:
/// control characters, whitespace other than the ASCII space, and the invisible format
/// characters are not printable.
fn is_go_printable(c: char) -> bool {
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{ad}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{200b}'..='\u{200f}'
        ))
}

/// `strconv.Quote(s)`: a double-quoted Go string literal (`\"`, `\\`, the C escapes, `\xNN` for
/// other ASCII controls, `\uNNNN` / `\UNNNNNNNN` for other non-printable code points).
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
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if !is_go_printable(c) => {
                if u32::from(c) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                } else {
                    let _ = write!(out, "\\U{:08x}", u32::from(c));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_like_strconv_quote() {
        for (input, want) in [
            ("abc", r#""abc""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("tab\there\n", r#""tab\there\n""#),
            ("\u{1}\u{7f}", r#""\x01\x7f""#),
            ("née", r#""née""#),
            ("nb\u{a0}sp", r#""nb\u00a0sp""#),
            ("zero\u{200b}width", r#""zero\u200bwidth""#),
        ] {
            assert_eq!(quote(input), want, "{input:?}");
        }
    }
}
