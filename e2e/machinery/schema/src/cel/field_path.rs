//! A rule's `fieldPath` (`.spec.x`, `['a.b']`), checked against the schema and normalized to the
//! `field.Path` spelling the error will carry (`ValidFieldPath` in the apiserver).

use crate::model::Node;
use crate::path::FieldPath;

/// The normalized path, or `Err` when it is malformed or names no field of `node`.
pub(crate) fn normalize(json_path: &str, node: &Node) -> Result<String, ()> {
    let tokens = tokenize(json_path);
    let mut path = FieldPath::nil();
    let mut schema = node;
    let mut i = 0;
    while i < tokens.len() {
        let name = match tokens[i] {
            "." => {
                let name = tokens.get(i + 1).ok_or(())?;
                i += 2;
                (*name).to_owned()
            }
            "[" => {
                let quoted = tokens.get(i + 1).ok_or(())?;
                if quoted.len() < 2 || !quoted.starts_with('\'') || !quoted.ends_with('\'') {
                    return Err(());
                }
                if tokens.get(i + 2) != Some(&"]") {
                    return Err(());
                }
                i += 3;
                unescape(&quoted[1..quoted.len() - 1])?
            }
            _ => return Err(()),
        };
        if !schema.properties.is_empty() {
            path = path.child(&name);
            schema = schema.properties.get(&name).ok_or(())?;
        } else if let Some(values) = schema.additional_schema() {
            path = path.key(&name);
            schema = values;
        } else {
            return Err(());
        }
    }
    if tokens.is_empty() {
        return Err(());
    }
    Ok(path.to_string())
}

/// Splits on `.`, `[` and `]`, keeping single-quoted strings whole (delimiters inside them too).
fn tokenize(s: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\'' && i == start {
            // A quoted string runs to the next unescaped quote.
            let mut j = i + 1;
            while j < bytes.len() && !(bytes[j] == b'\'' && bytes[j - 1] != b'\\') {
                j += 1;
            }
            let end = (j + 1).min(bytes.len());
            tokens.push(&s[i..end]);
            i = end;
            start = i;
            continue;
        }
        if matches!(bytes[i], b'.' | b'[' | b']') {
            if i > start {
                tokens.push(&s[start..i]);
            }
            tokens.push(&s[i..=i]);
            start = i + 1;
        }
        i += 1;
    }
    if start < bytes.len() {
        tokens.push(&s[start..]);
    }
    tokens
}

/// Go's `unescapeSingleQuote`.
fn unescape(s: &str) -> Result<String, ()> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next().ok_or(())? {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            _ => return Err(()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalizes_like_valid_field_path() {
        let node = crate::compile::compile_node_for_tests(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {"a.b": {"type": "string"}, "x": {"type": "string"}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        }));
        assert_eq!(normalize(".spec.x", &node), Ok("spec.x".to_owned()));
        assert_eq!(normalize(".spec['a.b']", &node), Ok("spec.a.b".to_owned()));
        assert_eq!(
            normalize(".labels['app']", &node),
            Ok("labels[app]".to_owned())
        );
        assert_eq!(normalize("spec.x", &node), Err(()));
        assert_eq!(normalize(".spec.y", &node), Err(()));
        assert_eq!(normalize(".spec[x]", &node), Err(()));
    }
}
