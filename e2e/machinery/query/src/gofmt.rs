//! The two bits of Go formatting that the API server's messages are made of: `%q` quoting
//! (`strconv.Quote`) and the `[a, b]` rendering of an aggregated error list
//! (`k8s.io/apimachinery/pkg/util/errors` `aggregate.Error`). Clients and tests compare the
//! messages byte for byte, so these follow Go rather than Rust's `{:?}`.

/// `strconv.Quote` (re-exported: the crates of the local control plane share one).
pub use localkube_gofmt::quote;

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
