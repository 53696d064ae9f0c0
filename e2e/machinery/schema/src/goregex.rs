//! Go (RE2) `pattern`s compiled with the Rust `regex` crate.
//!
//! The two dialects are close; the differences that change verdicts are handled here:
//! RE2's `\d`, `\w`, `\s` and `\b` are ASCII-only while Rust's are Unicode, and look-around,
//! which neither engine supports, must be refused with Go's own message.

use regex::Regex;

/// Compiles a Go regular expression, or explains why Go would refuse it, in the words of
/// Go's `regexp/syntax` error (`error parsing regexp: ...`).
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    if let Some(construct) = look_around(pattern) {
        return Err(format!(
            "error parsing regexp: invalid or unsupported Perl syntax: `{construct}`"
        ));
    }
    let translated = ascii_classes(pattern);
    Regex::new(&translated).map_err(|e| {
        // The Rust message spans several lines (pattern, caret, reason): keep the reason.
        let text = e.to_string();
        let reason = text
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .unwrap_or(&text);
        format!(
            "error parsing regexp: {}",
            reason.trim_start_matches("error:").trim()
        )
    })
}

/// The first look-around construct (`(?=`, `(?!`, `(?<=`, `(?<!`) outside a class, if any.
fn look_around(pattern: &str) -> Option<&str> {
    let bytes = pattern.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'(' if !in_class => {
                for construct in ["(?<=", "(?<!", "(?=", "(?!"] {
                    if pattern[i..].starts_with(construct) {
                        return Some(construct);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Rewrites the Perl classes to their ASCII meaning: outside a bracket `\d` becomes
/// `(?-u:\d)`; inside one it is spelled out (`0-9`), since a group cannot appear in a class.
fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                match (in_class, next) {
                    (false, 'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B') => {
                        out.push_str("(?-u:\\");
                        out.push(next);
                        out.push(')');
                    }
                    (true, 'd') => out.push_str("0-9"),
                    (true, 'w') => out.push_str("0-9A-Za-z_"),
                    (true, 's') => out.push_str("\\t\\n\\x0C\\r "),
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // A leading `^` and a leading `]` belong to the class.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // `[:alpha:]` inside a class.
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii_like_re2() {
        let re = compile(r"^\d+$").unwrap();
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣")); // Arabic-Indic digits are \d in Rust's Unicode mode only.
        let re = compile(r"^[\d.]+$").unwrap();
        assert!(re.is_match("1.2"));
        assert!(!re.is_match("١"));
        assert!(compile(r"^[]a]$").unwrap().is_match("]"));
        assert!(compile(r"^[[:alpha:]]+$").unwrap().is_match("abc"));
    }

    #[test]
    fn look_around_is_refused_with_go_s_words() {
        assert_eq!(
            compile("^(?!foo)").unwrap_err(),
            "error parsing regexp: invalid or unsupported Perl syntax: `(?!`"
        );
        assert!(compile(r"[(?=]").is_ok());
        assert!(
            compile("(unclosed")
                .unwrap_err()
                .starts_with("error parsing regexp: ")
        );
    }

    #[test]
    fn project_patterns_compile() {
        let re = compile(r"^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$").unwrap();
        assert!(re.is_match("5m") && re.is_match("1h30m") && !re.is_match("5x"));
    }
}
