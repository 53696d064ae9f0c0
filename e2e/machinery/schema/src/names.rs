//! Object name checks shared by every kind, with apimachinery's exact wording
//! (`k8s.io/apimachinery/pkg/util/validation` and `pkg/api/validation`).

use std::sync::LazyLock;

use regex::Regex;

use crate::field_error::{BadValue, FieldError};
use crate::path::FieldPath;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

fn subdomain_fmt() -> String {
    format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*")
}

#[allow(clippy::expect_used)] // constant patterns, covered by tests
static LABEL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("^{DNS1123_LABEL_FMT}$")).expect("valid DNS-1123 label regex")
});
#[allow(clippy::expect_used)] // constant patterns, covered by tests
static SUBDOMAIN_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("^{}$", subdomain_fmt())).expect("valid DNS-1123 subdomain regex")
});

/// `validation.RegexError(msg, fmt, examples...)`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    // Go's loop puts " or " after the "', " of the previous example: two spaces, as the apiserver says.
    let listed: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        listed.join(" or ")
    )
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `IsDNS1123Label`: the reasons `value` is not a DNS-1123 label (empty when it is one).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !LABEL_RE.is_match(value) {
        if SUBDOMAIN_RE.is_match(value) {
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`: the reasons `value` is not a DNS-1123 subdomain.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !SUBDOMAIN_RE.is_match(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            &subdomain_fmt(),
            &["example.com"],
        ));
    }
    errs
}

/// `IsPathSegmentName` (`prefix == false`) / `IsPathSegmentPrefix`: names that cannot be a URL
/// path segment. Kinds without a stricter rule (most custom resources' sub-objects) use this.
pub fn path_segment_errors(value: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for illegal in [".", ".."] {
            if value == illegal {
                return vec![format!("may not be '{illegal}'")];
            }
        }
    }
    ["/", "%"]
        .iter()
        .filter(|illegal| value.contains(*illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// Go's `maskTrailingDash`: a `generateName` prefix may end in `-` (a suffix follows). Go
/// replaces the last *two* bytes by `a`, and so does this, to give the same verdicts.
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let cut = name.len() - 2;
        if name.is_char_boundary(cut) {
            return format!("{}a", &name[..cut]);
        }
    }
    name.to_owned()
}

/// How a kind validates `metadata.name` (Go's `ValidateNameFunc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: custom resources, ConfigMaps, Secrets, Deployments...
    DnsSubdomain,
    /// `NameIsDNSLabel`: Namespaces, Services' ports...
    DnsLabel,
    /// `path.ValidatePathSegmentName`: kinds with no stricter rule.
    PathSegment,
}

impl NameRule {
    /// The reasons `name` is not acceptable; `prefix` is true for a `generateName`.
    pub fn errors(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            Self::DnsSubdomain | Self::DnsLabel => {
                let name = if prefix {
                    mask_trailing_dash(name)
                } else {
                    name.to_owned()
                };
                if self == Self::DnsSubdomain {
                    dns1123_subdomain_errors(&name)
                } else {
                    dns1123_label_errors(&name)
                }
            }
            Self::PathSegment => path_segment_errors(name, prefix),
        }
    }
}

/// The name part of `ValidateObjectMetaAccessor`: `metadata.generateName` and `metadata.name`
/// errors, e.g. `metadata.name: Invalid value: "X": a lowercase RFC 1123 subdomain must ...`
/// or `metadata.name: Required value: name or generateName is required`.
pub fn validate_object_name(name: &str, generate_name: &str, rule: NameRule) -> Vec<FieldError> {
    let meta = FieldPath::new("metadata");
    let mut errs = Vec::new();
    if !generate_name.is_empty() {
        for msg in rule.errors(generate_name, true) {
            errs.push(FieldError::invalid(
                &meta.child("generateName"),
                BadValue::string(generate_name),
                msg,
            ));
        }
    }
    if name.is_empty() {
        errs.push(FieldError::required(
            &meta.child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in rule.errors(name, false) {
            errs.push(FieldError::invalid(
                &meta.child("name"),
                BadValue::string(name),
                msg,
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_message_is_apimachinery_s() {
        let errs = validate_object_name("X", "", NameRule::DnsSubdomain);
        assert_eq!(
            errs[0].to_string(),
            "metadata.name: Invalid value: \"X\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert!(validate_object_name("a.b-c", "", NameRule::DnsSubdomain).is_empty());
        let long = "a".repeat(254);
        assert_eq!(
            dns1123_subdomain_errors(&long),
            vec!["must be no more than 253 characters".to_owned()]
        );
    }

    #[test]
    fn label_messages() {
        assert_eq!(
            dns1123_label_errors("a.b"),
            vec!["must not contain dots".to_owned()]
        );
        assert_eq!(
            dns1123_label_errors("A"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_owned()]
        );
    }

    #[test]
    fn generate_name_may_end_with_a_dash_and_name_is_required() {
        let errs = validate_object_name("", "web-", NameRule::DnsSubdomain);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn path_segment_rules() {
        assert_eq!(
            path_segment_errors("..", false),
            vec!["may not be '..'".to_owned()]
        );
        assert_eq!(
            path_segment_errors("a/b%", false),
            vec![
                "may not contain '/'".to_owned(),
                "may not contain '%'".to_owned()
            ]
        );
        assert!(path_segment_errors("..", true).is_empty());
    }
}
