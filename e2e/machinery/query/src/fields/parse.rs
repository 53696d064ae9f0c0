//! The `fieldSelector` query-string grammar of `k8s.io/apimachinery/pkg/fields/selector.go`:
//! terms split on unescaped `,`, each `field(!=|==|=)value`, with `\\`, `\,` and `\=` escapes in
//! the value. No whitespace is trimmed (`a = b` names the field `a `), and terms are sorted
//! before anything else happens, so the first error reported is that of the smallest term.

use crate::gofmt;

/// `=` and `==` are the same test; kept apart only for printing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOperator {
    Equals,
    DoubleEquals,
    NotEquals,
}

/// One `field op value` term, value unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub operator: FieldOperator,
    pub value: String,
}

/// A parsed `fieldSelector`: the AND of its terms (none selects everything).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    pub requirements: Vec<FieldRequirement>,
}

/// A field selector the API server refuses with 400 BadRequest; `Display` is the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    Syntax { selector: String, term: String },
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// Go prints the rune with `%v`, i.e. as its code point number (`61` for `=`).
    #[error("invalid field selector: unescaped character in value: {0}")]
    UnescapedCharacter(u32),
    /// The kind does not support this field label; holds the kind's own wording.
    #[error("{0}")]
    UnsupportedField(String),
}

impl FieldSelectorError {
    /// Upstream's common wording for an unsupported label (most built-ins and every CR).
    pub(crate) fn not_supported(label: &str) -> Self {
        Self::UnsupportedField(format!("field label not supported: {label}"))
    }

    /// `runtime.DefaultMetaV1FieldSelectorConversion`'s wording, for kinds without a table.
    pub(crate) fn not_known(label: &str) -> Self {
        Self::UnsupportedField(format!(
            "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            gofmt::quote(label)
        ))
    }
}

/// Splits on commas not preceded by a backslash escape.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// The first operator occurrence, trying `!=`, `==`, `=` at each position.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, operator) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::DoubleEquals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], operator, value));
            }
        }
    }
    None
}

/// `fields.UnescapeValue`.
pub fn unescape_value(s: &str) -> Result<String, FieldSelectorError> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => return Err(FieldSelectorError::InvalidEscape(format!("\\{other}"))),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(FieldSelectorError::UnescapedCharacter(c as u32)),
            other => out.push(other),
        }
    }
    if in_slash {
        return Err(FieldSelectorError::InvalidEscape("\\".to_string()));
    }
    Ok(out)
}

/// `fields.EscapeValue`.
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `fields.ParseSelector`. Empty terms (`a=b,`) are skipped; the empty string selects everything.
pub fn parse_field_selector(selector: &str) -> Result<FieldSelector, FieldSelectorError> {
    let mut parts = split_terms(selector);
    parts.sort_unstable();
    let mut requirements = Vec::with_capacity(parts.len());
    for part in parts {
        if part.is_empty() {
            continue;
        }
        let Some((field, operator, rhs)) = split_term(part) else {
            return Err(FieldSelectorError::Syntax {
                selector: selector.to_string(),
                term: part.to_string(),
            });
        };
        requirements.push(FieldRequirement {
            field: field.to_string(),
            operator,
            value: unescape_value(rhs)?,
        });
    }
    Ok(FieldSelector { requirements })
}

/// `String()`: terms joined by `,`, values escaped.
impl std::fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if r.operator == FieldOperator::NotEquals {
                "!="
            } else {
                "="
            };
            write!(f, "{}{op}{}", r.field, escape_value(&r.value))?;
        }
        Ok(())
    }
}
