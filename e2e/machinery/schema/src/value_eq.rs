//! Deep equality of JSON values without recursion: `serde_json::Value`'s `==` recurses once per
//! nesting level, and update ratcheting compares whole objects that a client controls.

use serde_json::Value;

/// Whether `a` and `b` are equal (numbers compare as serde_json does: by representation).
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    let mut pending: Vec<(&Value, &Value)> = vec![(a, b)];
    while let Some((x, y)) = pending.pop() {
        match (x, y) {
            (Value::Array(xs), Value::Array(ys)) => {
                if xs.len() != ys.len() {
                    return false;
                }
                pending.extend(xs.iter().zip(ys));
            }
            (Value::Object(xs), Value::Object(ys)) => {
                if xs.len() != ys.len() {
                    return false;
                }
                for (k, xv) in xs {
                    match ys.get(k) {
                        Some(yv) => pending.push((xv, yv)),
                        None => return false,
                    }
                }
            }
            (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => {
                return false;
            }
            (x, y) => {
                if x != y {
                    return false;
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compares_like_partial_eq() {
        let a = json!({"a": [1, {"b": null}], "c": "x"});
        assert!(equal(&a, &a.clone()));
        assert!(!equal(&a, &json!({"a": [1, {"b": 0}], "c": "x"})));
        assert!(!equal(&json!([1, 2]), &json!([1])));
        assert!(!equal(&json!({"a": 1}), &json!({"b": 1})));
    }
}
