#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Label selectors: the query-string grammar with upstream's exact error texts, matching, and
//! `metav1.LabelSelector` objects.

use std::collections::BTreeMap;

use localkube_query::{
    LabelSelector, LabelSelectorObject, Operator, Requirement, parse_label_selector,
    selector_from_object,
};
use serde_json::json;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const KEY_RE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_RE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

#[test]
fn every_operator_matches_like_apimachinery() {
    let set = labels(&[
        ("name", "rel"),
        ("owner", "helm"),
        ("tier", "db"),
        ("n", "5"),
        ("empty", ""),
    ]);
    let cases: &[(&str, bool)] = &[
        ("", true),
        // helm's release lookup
        ("name=rel,owner=helm", true),
        ("name=rel,owner=other", false),
        ("name==rel", true),
        ("name=other", false),
        ("missing=x", false),
        ("name!=rel", false),
        ("name!=other", true),
        ("missing!=x", true),
        ("tier in (db,cache)", true),
        ("tier in (cache)", false),
        ("missing in (db)", false),
        ("tier notin (db)", false),
        ("tier notin (cache,web)", true),
        ("missing notin (x)", true),
        ("tier", true),
        ("missing", false),
        ("!tier", false),
        ("!missing", true),
        ("n>4", true),
        ("n>5", false),
        ("n<6", true),
        ("n<5", false),
        ("tier>1", false),
        ("missing<9", false),
        // an empty value after `=` and inside `()` is the empty string
        ("empty=", true),
        ("empty in ()", true),
        ("empty in (,x)", true),
        ("name in (,x)", false),
        // `in` and `notin` are plain words outside operator position
        ("in in (in)", false),
        // whitespace: spaces, tabs, newlines between any tokens
        ("  name = rel ,\towner  ==  helm\n", true),
        ("tier in(db)", true),
        ("tier notin(db)", false),
        ("name=rel,!missing,tier in (db),n>1", true),
    ];
    for (selector, want) in cases {
        let parsed = parse_label_selector(selector).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
        assert_eq!(parsed.matches(&set), *want, "{selector:?}");
    }
}

#[test]
fn parse_errors_are_upstreams_messages() {
    let ops = "in, notin, =, ==, !=, gt, lt";
    let long_key = "k".repeat(64);
    let long_value = format!("a={}", "v".repeat(64));
    let cases: Vec<(&str, String)> = vec![
        ("a b", format!("unable to parse requirement: found 'b', expected: {ops}")),
        ("a !(x)", format!("unable to parse requirement: found '!', expected: {ops}")),
        ("x in a", "unable to parse requirement: found 'a' expected: '('".into()),
        ("a notin", "unable to parse requirement: found '' expected: '('".into()),
        ("x in (a", "unable to parse requirement: found '', expected: ',' or ')'".into()),
        ("x in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'".into()),
        ("x in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier".into()),
        ("x in (a,=)", "unable to parse requirement: found '=', expected: ',', or identifier".into()),
        ("x=(", "unable to parse requirement: found '(', expected: identifier".into()),
        ("!", "unable to parse requirement: found '', expected: identifier".into()),
        // `!=` lexes as one token, so this is not "not a"
        ("!=a", "found '!=', expected: !, identifier, or 'end of string'".into()),
        ("! =a", "unable to parse requirement: found '=', expected: identifier".into()),
        (",a", "found ',', expected: !, identifier, or 'end of string'".into()),
        ("(a)", "found '(', expected: !, identifier, or 'end of string'".into()),
        ("a,", "found '', expected: identifier after ','".into()),
        ("a,,b", "found ',', expected: identifier after ','".into()),
        ("a=b c", "found 'c', expected: ',' or 'end of string'".into()),
        ("a=b=c", "found '=', expected: ',' or 'end of string'".into()),
        ("!a=b", "found '=', expected: ',' or 'end of string'".into()),
        (
            "a/b/c=d",
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key {KEY_RE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ),
        ),
        ("-a", format!("unable to parse requirement: <nil>: Invalid value: \"-a\": name part {KEY_RE}")),
        (
            "Example.com/a",
            "unable to parse requirement: <nil>: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into(),
        ),
        (
            "/a",
            "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty".into(),
        ),
        (
            &long_key,
            format!("unable to parse requirement: <nil>: Invalid value: \"{}\": name part must be no more than 63 bytes", "k".repeat(64)),
        ),
        ("a=-b", format!("unable to parse requirement: values[0][a]: Invalid value: \"-b\": {VALUE_RE}")),
        ("a>b", "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer".into()),
        // an integer can still be an invalid label value
        ("a>-1", format!("unable to parse requirement: values[0][a]: Invalid value: \"-1\": {VALUE_RE}")),
        // values are sorted before validation, several errors aggregate in brackets
        (
            "a in (x,-z,-y)",
            format!(
                "unable to parse requirement: [values[0][a]: Invalid value: \"-y\": {VALUE_RE}, values[1][a]: Invalid value: \"-z\": {VALUE_RE}]"
            ),
        ),
        (
            &long_value,
            format!("unable to parse requirement: values[0][a]: Invalid value: \"{}\": must be no more than 63 bytes", "v".repeat(64)),
        ),
    ];
    for (selector, want) in &cases {
        let err = parse_label_selector(selector).expect_err(selector);
        assert_eq!(err.to_string(), *want, "{selector:?}");
    }
}

#[test]
fn parsed_selectors_print_and_expose_requirements_like_upstream() {
    let s = parse_label_selector("b=1,a in (y,x,y),!c,d,e notin (),f>3").unwrap();
    assert_eq!(s.to_string(), "a in (x,y),b=1,!c,d,e notin (),f>3");
    let first = &s.requirements()[0];
    assert_eq!(
        (first.key(), first.operator(), first.values()),
        ("a", Operator::In, &["x".to_string(), "y".to_string()][..])
    );
    assert_eq!(s.requires_exact_match("b"), Some("1"));
    assert_eq!(s.requires_exact_match("a"), None);
    assert!(parse_label_selector("").unwrap().is_everything());
    assert!(parse_label_selector("   ").unwrap().is_everything());
}

#[test]
fn objects_match_on_their_metadata_labels() {
    let s = parse_label_selector("app=web").unwrap();
    assert!(s.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
    assert!(
        !s.matches_object(&json!({"metadata": {"labels": {"app": 5}}})),
        "non-string label values do not count"
    );
    assert!(!s.matches_object(&json!({"metadata": {}})));
    assert!(!s.matches_object(&json!("not an object")));
    let absent = parse_label_selector("!app").unwrap();
    assert!(absent.matches_object(&json!({"metadata": {"labels": null}})));
}

#[test]
fn huge_and_binary_inputs_do_not_panic() {
    let long = "a=b,".repeat(20_000) + "a=b";
    assert!(
        parse_label_selector(&long)
            .unwrap()
            .matches(&labels(&[("a", "b")]))
    );
    for weird in [
        "\u{0}",
        "a\u{0}=b",
        "é=ü",
        "(((((",
        ")))",
        "!!!!",
        "=====",
        "a in ((((",
        "𝕏",
    ] {
        let _ = parse_label_selector(weird);
    }
    // NUL ends the input, as in Go's lexer
    assert!(
        parse_label_selector("a\u{0}!!!")
            .unwrap()
            .matches(&labels(&[("a", "")]))
    );
}

#[test]
fn requirement_constructor_checks_operator_arity() {
    let cases: &[(Operator, &[&str], &str)] = &[
        (
            Operator::In,
            &[],
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            Operator::Equals,
            &["a", "b"],
            "values: Invalid value: [\"a\",\"b\"]: exact-match compatibility requires one single value",
        ),
        (
            Operator::Exists,
            &["a"],
            "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist",
        ),
        (
            Operator::GreaterThan,
            &["1", "2"],
            "values: Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one value is required",
        ),
    ];
    for (op, values, want) in cases {
        let err =
            Requirement::new("k", *op, values.iter().map(|v| v.to_string()).collect()).unwrap_err();
        assert_eq!(err.to_string(), *want, "{op:?}");
    }
    assert_eq!(
        Requirement::new("-k", Operator::Exists, vec![])
            .unwrap_err()
            .to_string(),
        format!("key: Invalid value: \"-k\": name part {KEY_RE}")
    );
}

#[test]
fn selector_objects_null_selects_nothing_empty_selects_everything() {
    let pod = labels(&[("app", "web")]);
    let none = LabelSelectorObject::from_value(None).unwrap();
    assert_eq!(none, None);
    assert_eq!(selector_from_object(None).unwrap(), LabelSelector::Nothing);
    assert!(!selector_from_object(None).unwrap().matches(&pod));
    assert_eq!(
        LabelSelectorObject::from_value(Some(&json!(null))).unwrap(),
        None
    );

    let empty = LabelSelectorObject::from_value(Some(&json!({})))
        .unwrap()
        .unwrap();
    assert!(empty.is_empty());
    assert!(
        selector_from_object(Some(&empty)).unwrap().matches(&pod),
        "PDB selector {{}} covers every pod"
    );
    assert!(
        selector_from_object(Some(&empty))
            .unwrap()
            .matches(&labels(&[]))
    );

    let sel = LabelSelectorObject::from_value(Some(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["fe", "be"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "NotIn", "values": ["a"]},
            {"key": "app", "operator": "Exists"}
        ]
    })))
    .unwrap()
    .unwrap();
    assert!(sel.validate("spec.selector").is_empty());
    let s = sel.to_selector().unwrap();
    assert_eq!(
        s.to_string(),
        "app=web,app,!canary,tier in (be,fe),zone notin (a)"
    );
    assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("tier", "fe"), ("canary", "1")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("tier", "fe"), ("zone", "a")])));
    assert!(!s.matches(&labels(&[("app", "web")])));
}

#[test]
fn selector_object_validation_is_worded_like_metav1_validation() {
    let sel = LabelSelectorObject::from_value(Some(&json!({
        "matchLabels": {"-bad": "ok", "good": "-bad"},
        "matchExpressions": [
            {"key": "a", "operator": "Foo"},
            {"key": "b", "operator": "In"},
            {"key": "c", "operator": "Exists", "values": ["x"]},
            {"key": "d/e/f", "operator": "NotIn", "values": ["ok", "-no"]}
        ]
    })))
    .unwrap()
    .unwrap();
    let got: Vec<String> = sel
        .validate("spec.selector")
        .iter()
        .map(ToString::to_string)
        .collect();
    let want = vec![
        format!("spec.selector.matchLabels: Invalid value: \"-bad\": name part {KEY_RE}"),
        format!("spec.selector.matchLabels: Invalid value: \"-bad\": {VALUE_RE}"),
        "spec.selector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator".to_string(),
        "spec.selector.matchExpressions[1].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            .to_string(),
        "spec.selector.matchExpressions[2].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            .to_string(),
        format!(
            "spec.selector.matchExpressions[3].key: Invalid value: \"d/e/f\": a valid label key {KEY_RE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ),
        format!("spec.selector.matchExpressions[3].values[1]: Invalid value: \"-no\": {VALUE_RE}"),
    ];
    assert_eq!(got, want);
    let reasons: Vec<&str> = sel.validate("s").iter().map(|e| e.reason()).collect();
    assert_eq!(
        reasons[2..5],
        [
            "FieldValueInvalid",
            "FieldValueRequired",
            "FieldValueForbidden"
        ]
    );
}

#[test]
fn unvalidated_selector_objects_fail_conversion_like_label_selector_as_selector() {
    let bad_op = LabelSelectorObject::from_value(Some(
        &json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(
        bad_op.to_selector().unwrap_err().to_string(),
        "\"Foo\" is not a valid label selector operator"
    );
    let no_values = LabelSelectorObject::from_value(Some(
        &json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(
        no_values.to_selector().unwrap_err().to_string(),
        "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
    );
}

#[test]
fn malformed_selector_objects_are_errors_not_panics() {
    for bad in [
        json!("x"),
        json!([]),
        json!({"matchLabels": []}),
        json!({"matchLabels": {"a": 1}}),
        json!({"matchExpressions": {}}),
        json!({"matchExpressions": ["x"]}),
        json!({"matchExpressions": [{"key": 1, "operator": "In", "values": ["a"]}]}),
        json!({"matchExpressions": [{"key": "a", "operator": "In", "values": "a"}]}),
        json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}),
    ] {
        assert!(
            LabelSelectorObject::from_value(Some(&bad)).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn service_style_map_selectors() {
    let s = LabelSelector::from_match_labels([("app", "web"), ("tier", "fe")]);
    assert_eq!(s.to_string(), "app=web,tier=fe");
    assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe"), ("x", "y")])));
    assert!(!s.matches(&labels(&[("app", "web")])));
    assert!(LabelSelector::from_match_labels([]).is_everything());
}
