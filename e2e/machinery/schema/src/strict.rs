//! Duplicate keys in a JSON request body, reported like `sigs.k8s.io/json`'s strict decoder.
//!
//! `serde_json::Value` keeps the last of two equal keys silently, but the apiserver reports
//! `duplicate field "spec.size"` (an error with `fieldValidation=Strict`, a warning with `Warn`).
//! So the raw bytes are scanned once more, iteratively, so that nesting depth cannot overflow
//! the stack.

use std::collections::HashSet;

/// Why the body could not be scanned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StrictScanError {
    /// The body is not one well-formed JSON value.
    #[error("invalid JSON at byte {offset}: {what}")]
    Malformed {
        /// Byte offset of the problem.
        offset: usize,
        /// What was expected or found.
        what: &'static str,
    },
}

/// The Go decoder stops recording after this many strict errors.
const MAX_REPORTED: usize = 100;

enum Frame {
    /// An object: the keys seen so far and the key whose value is being read.
    Object {
        keys: HashSet<String>,
        current: Option<String>,
    },
    /// An array and the index of the element being read.
    Array { index: usize },
}

/// The paths of duplicated object keys in `body`, in document order, deduplicated and capped
/// at 100 like the apiserver: `a`, `spec.size`, `items[0].name`.
pub fn duplicate_fields(body: &[u8]) -> Result<Vec<String>, StrictScanError> {
    let mut scanner = Scanner {
        bytes: body,
        pos: 0,
    };
    let mut stack: Vec<Frame> = Vec::new();
    let mut found: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();

    scanner.skip_ws();
    // Each loop iteration reads one value start, or closes containers.
    loop {
        match scanner.peek() {
            Some(b'{') => {
                scanner.pos += 1;
                stack.push(Frame::Object {
                    keys: HashSet::new(),
                    current: None,
                });
                scanner.skip_ws();
                if scanner.peek() == Some(b'}') {
                    scanner.pos += 1;
                    stack.pop();
                } else {
                    read_key(&mut scanner, &mut stack, &mut found, &mut seen)?;
                    continue;
                }
            }
            Some(b'[') => {
                scanner.pos += 1;
                stack.push(Frame::Array { index: 0 });
                scanner.skip_ws();
                if scanner.peek() == Some(b']') {
                    scanner.pos += 1;
                    stack.pop();
                } else {
                    continue;
                }
            }
            Some(b'"') => {
                scanner.string()?;
            }
            Some(_) => scanner.scalar()?,
            None => return Err(scanner.error("unexpected end of input")),
        }
        // A value is complete: move to the next sibling or close containers.
        loop {
            scanner.skip_ws();
            let Some(top) = stack.last_mut() else {
                return if scanner.peek().is_none() {
                    Ok(found)
                } else {
                    Err(scanner.error("trailing data"))
                };
            };
            match (top, scanner.peek()) {
                (Frame::Object { .. }, Some(b',')) => {
                    scanner.pos += 1;
                    read_key(&mut scanner, &mut stack, &mut found, &mut seen)?;
                    break;
                }
                (Frame::Object { .. }, Some(b'}')) | (Frame::Array { .. }, Some(b']')) => {
                    scanner.pos += 1;
                    stack.pop();
                }
                (Frame::Array { index }, Some(b',')) => {
                    scanner.pos += 1;
                    *index += 1;
                    scanner.skip_ws();
                    break;
                }
                _ => return Err(scanner.error("expected ',' or a closing bracket")),
            }
        }
    }
}

/// Reads `"key":` inside the innermost object, recording it if it repeats.
fn read_key(
    scanner: &mut Scanner<'_>,
    stack: &mut [Frame],
    found: &mut Vec<String>,
    seen: &mut HashSet<String>,
) -> Result<(), StrictScanError> {
    scanner.skip_ws();
    if scanner.peek() != Some(b'"') {
        return Err(scanner.error("expected an object key"));
    }
    let key = scanner.string()?;
    scanner.skip_ws();
    if scanner.peek() != Some(b':') {
        return Err(scanner.error("expected ':'"));
    }
    scanner.pos += 1;
    scanner.skip_ws();
    let (last, parents) = match stack.split_last_mut() {
        Some(split) => split,
        None => return Err(scanner.error("key outside an object")),
    };
    if let Frame::Object { keys, current } = last {
        if !keys.insert(key.clone()) && found.len() < MAX_REPORTED {
            let parent = path_of(parents);
            let path = if parent.is_empty() {
                key.clone()
            } else {
                format!("{parent}.{key}")
            };
            if seen.insert(path.clone()) {
                found.push(path);
            }
        }
        *current = Some(key);
    }
    Ok(())
}

/// The path of the value being read in each frame, spelled like the Go decoder's field stack.
fn path_of(frames: &[Frame]) -> String {
    let mut path = String::new();
    for frame in frames {
        match frame {
            Frame::Object {
                current: Some(key), ..
            } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Object { current: None, .. } => {}
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn error(&self, what: &'static str) -> StrictScanError {
        StrictScanError::Malformed {
            offset: self.pos,
            what,
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// A number or a literal (`true`, `false`, `null`); only its extent matters here.
    fn scalar(&mut self) -> Result<(), StrictScanError> {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.pos += 1;
        }
        let token = &self.bytes[start..self.pos];
        let is_literal = matches!(token, b"true" | b"false" | b"null");
        let is_number = !token.is_empty()
            && token
                .iter()
                .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
        if is_literal || is_number {
            Ok(())
        } else {
            self.pos = start;
            Err(self.error("expected a value"))
        }
    }

    /// A string starting at the opening quote, decoded (keys are compared decoded, as Go does).
    fn string(&mut self) -> Result<String, StrictScanError> {
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            self.pos += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let c = self.unicode_escape()?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                b if b < 0x20 => return Err(self.error("control character in string")),
                b => out.push(b),
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn hex4(&mut self) -> Result<u32, StrictScanError> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("short \\u escape"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.error("bad \\u escape"))?;
        let v = u32::from_str_radix(text, 16).map_err(|_| self.error("bad \\u escape"))?;
        self.pos += 4;
        Ok(v)
    }

    /// `\uXXXX`, joining surrogate pairs; lone surrogates become U+FFFD like Go.
    fn unicode_escape(&mut self) -> Result<char, StrictScanError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first)
            && self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u")
        {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{fffd}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{fffd}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_paths_like_the_go_decoder() {
        let body = br#"{"a":"","b":"","a":"","b":"","c":{"c":"","c":""},"d":{"e":{"f":1,"f":1}},"e":[{"g":1,"g":1}]}"#;
        assert_eq!(
            duplicate_fields(body).unwrap(),
            vec!["a", "b", "c.c", "d.e.f", "e[0].g"]
        );
    }

    #[test]
    fn repeated_duplicates_are_reported_once_and_escapes_are_decoded() {
        let body = br#"{"spec":{"size":1,"size":2,"size":3,"s\u0069ze":4}}"#;
        assert_eq!(duplicate_fields(body).unwrap(), vec!["spec.size"]);
        assert!(
            duplicate_fields(br#"{"a":[1,{"b":[]}],"c":{}}"#)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn malformed_bodies_are_errors() {
        for bad in [
            &b"{"[..],
            b"{\"a\" 1}",
            b"[1,]",
            b"{\"a\":1}x",
            b"",
            b"{\"a\":tru}",
        ] {
            assert!(
                duplicate_fields(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let depth = 200_000;
        let mut body = "[".repeat(depth).into_bytes();
        body.extend(std::iter::repeat_n(b']', depth));
        assert_eq!(duplicate_fields(&body).unwrap(), Vec::<String>::new());
    }
}
