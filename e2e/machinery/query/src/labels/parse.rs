//! The query-string label selector grammar of `k8s.io/apimachinery/pkg/labels/selector.go`
//! (`Lexer`, `Parser`), reproduced token for token so that every error message is the one the
//! API server answers (HTTP 400, the message bare):
//!
//! ```text
//! <selector>    ::= <requirement> | <requirement> "," <selector>
//! <requirement> ::= [!] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//! ```
//!
//! Whitespace (space, tab, CR, LF) separates tokens and is otherwise ignored; `in` and `notin`
//! are keywords only where an operator is expected (`in in (in)` is valid). Like Go, the lexer
//! works on bytes and stops at a NUL byte.

use super::selector::{LabelSelector, Operator, Requirement};
use crate::validation;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The two parser contexts of upstream: where an operator may appear, `in`/`notin` are
/// keywords; everywhere else they are plain identifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

fn symbol(s: &[u8]) -> Option<Tok> {
    Some(match s {
        b")" => Tok::ClosedPar,
        b"," => Tok::Comma,
        b"!" => Tok::DoesNotExist,
        b"==" => Tok::DoubleEquals,
        b"=" => Tok::Equals,
        b">" => Tok::GreaterThan,
        b"<" => Tok::LessThan,
        b"!=" => Tok::NotEquals,
        b"(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the whole input into tokens up front (upstream `Parser.scan`), ending with exactly one
/// `EndOfString`.
fn scan(input: &str) -> Vec<(Tok, &str)> {
    let bytes = input.as_bytes();
    // Go's lexer reads a 0 byte as "end of input".
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let mut pos = 0;
    let mut items = Vec::new();
    loop {
        while pos < end && is_whitespace(bytes[pos]) {
            pos += 1;
        }
        if pos >= end {
            items.push((Tok::EndOfString, ""));
            return items;
        }
        let start = pos;
        if is_special(bytes[pos]) {
            // Longest run of special characters that still forms a token: "!=" but "=" + "(".
            let mut best = None;
            let mut probe = pos;
            while probe < end && is_special(bytes[probe]) {
                probe += 1;
                match symbol(&bytes[start..probe]) {
                    Some(tok) => best = Some((tok, probe)),
                    None if best.is_some() => break,
                    None => {}
                }
            }
            // Every single special character is a token, so `best` is always set here.
            let (tok, stop) = best.unwrap_or((Tok::EndOfString, end));
            pos = stop;
            items.push((tok, &input[start..pos]));
        } else {
            while pos < end && !is_special(bytes[pos]) && !is_whitespace(bytes[pos]) {
                pos += 1;
            }
            let lit = &input[start..pos];
            let tok = match lit {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Identifier,
            };
            items.push((tok, lit));
        }
    }
}

/// A query-string label selector that the API server would refuse; the message is upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LabelSelectorParseError(pub String);

struct Parser<'a> {
    items: Vec<(Tok, &'a str)>,
    position: usize,
}

impl<'a> Parser<'a> {
    fn item(&self, at: usize, context: Context) -> (Tok, &'a str) {
        let (tok, lit) = self
            .items
            .get(at)
            .copied()
            .unwrap_or((Tok::EndOfString, ""));
        match (context, tok) {
            (Context::Values, Tok::In | Tok::NotIn) => (Tok::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn lookahead(&self, context: Context) -> (Tok, &'a str) {
        self.item(self.position, context)
    }

    fn consume(&mut self, context: Context) -> (Tok, &'a str) {
        let item = self.item(self.position, context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Tok::EndOfString => return Ok(requirements),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(op) = inferred {
            return Requirement::new(&key, op, Vec::new()).map_err(|e| e.to_string());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values).map_err(|e| e.to_string())
    }

    /// The key, and `Exists`/`DoesNotExist` when no binary operator follows.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut negated = false;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Tok::DoesNotExist {
            negated = true;
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = validation::label_key_errors(lit);
        if !errs.is_empty() {
            return Err(crate::FieldError::invalid("<nil>", lit, errs.join("; ")).to_string());
        }
        let (next, _) = self.lookahead(Context::Values);
        let op = if negated {
            // `!key` is unary whatever follows; anything after it fails at the caller.
            Some(Operator::DoesNotExist)
        } else if matches!(next, Tok::EndOfString | Tok::Comma) {
            Some(Operator::Exists)
        } else {
            None
        };
        Ok((lit.to_string(), op))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Tok::In => Operator::In,
            Tok::Equals => Operator::Equals,
            Tok::DoubleEquals => Operator::DoubleEquals,
            Tok::GreaterThan => Operator::GreaterThan,
            Tok::LessThan => Operator::LessThan,
            Tok::NotIn => Operator::NotIn,
            Tok::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `( v1, v2 )`; empty members count as the empty value, `()` is `{""}`. Returned sorted and
    /// de-duplicated, like upstream's `sets.String.List()`.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        let mut set = match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.parse_identifiers_list()?;
                let (closing, _) = self.consume(Context::Values);
                if closing != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                set
            }
            Tok::ClosedPar => {
                self.consume(Context::Values);
                vec![String::new()]
            }
            _ => return Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        };
        set.sort();
        set.dedup();
        Ok(set)
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Tok::Identifier => {
                    set.push(lit.to_string());
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.push(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Tok::ClosedPar {
                        set.push(String::new());
                        return Ok(set);
                    }
                    if tok2 == Tok::Comma {
                        set.push(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if matches!(tok, Tok::EndOfString | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Tok::Identifier {
            return Ok(vec![lit.to_string()]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

/// `labels.Parse`: the `labelSelector` query parameter. The empty string selects everything.
/// Requirements come back sorted by key, as upstream's.
pub fn parse_label_selector(input: &str) -> Result<LabelSelector, LabelSelectorParseError> {
    let mut parser = Parser {
        items: scan(input),
        position: 0,
    };
    let mut requirements = parser.parse().map_err(LabelSelectorParseError)?;
    requirements.sort_by(|a, b| a.key().cmp(b.key()));
    Ok(LabelSelector::from_requirements(requirements))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_operators_greedily() {
        let toks: Vec<Tok> = scan("a!=b,c==(d)").into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            toks,
            vec![
                Tok::Identifier,
                Tok::NotEquals,
                Tok::Identifier,
                Tok::Comma,
                Tok::Identifier,
                Tok::DoubleEquals,
                Tok::OpenPar,
                Tok::Identifier,
                Tok::ClosedPar,
                Tok::EndOfString
            ]
        );
        let lits: Vec<&str> = scan("x>=1").into_iter().map(|(_, l)| l).collect();
        assert_eq!(lits, vec!["x", ">", "=", "1", ""]);
        assert_eq!(scan("a\0b").len(), 2, "NUL ends the input");
    }
}
