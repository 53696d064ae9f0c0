//! The string `format`s the apiserver validates (kube-openapi's `strfmt.Default` registry,
//! restricted by `StripUnsupportedFormatsPostProcess` to the formats CRDs may use).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use base64::Engine;
use regex::Regex;

use crate::model::SchemaType;

/// The string formats kept by the apiserver (Kubernetes 1.34+), with `-` removed as go-openapi
/// normalizes names (`date-time` and `datetime` are the same format).
const STRING_FORMATS: [&str; 26] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// The format the validator will check, or `None` when the apiserver strips it.
pub(crate) fn supported(format: &str, ty: Option<SchemaType>) -> bool {
    match ty {
        None | Some(SchemaType::String) => {
            STRING_FORMATS.contains(&format.replace('-', "").as_str())
        }
        Some(SchemaType::Integer) => matches!(format, "int32" | "int64"),
        Some(SchemaType::Number) => matches!(format, "float" | "double"),
        _ => false,
    }
}

/// Whether a string format applies to strings (as opposed to int32, float...).
pub(crate) fn is_string_format(format: &str) -> bool {
    STRING_FORMATS.contains(&format.replace('-', "").as_str())
}

macro_rules! re {
    ($name:ident, $pattern:expr) => {
        #[allow(clippy::expect_used)] // constant pattern, covered by tests
        static $name: LazyLock<Regex> =
            LazyLock::new(|| Regex::new($pattern).expect("valid format regex"));
    };
}

re!(
    UUID,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
re!(
    UUID3,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
re!(
    UUID4,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
re!(
    UUID5,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
re!(
    HOSTNAME,
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$"
);
re!(
    DATE_TIME_TAIL,
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
);
re!(HEXCOLOR, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
re!(
    RGBCOLOR,
    r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
);
re!(SSN, r"^\d{3}[- ]?\d{2}[- ]?\d{4}$");
re!(
    MAC,
    r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{2}[:-]){7}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$|^([0-9A-Fa-f]{4}\.){3}[0-9A-Fa-f]{4}$"
);
re!(EMAIL, r"^[^\s@<>]+@[^\s@<>]+$");
re!(BSON, r"^[0-9a-fA-F]{24}$");
re!(SHORT_NAME, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
re!(
    LONG_NAME,
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
);

/// Whether `s` is valid for the string `format` (names compared without `-`).
pub(crate) fn validates(format: &str, s: &str) -> bool {
    match format.replace('-', "").as_str() {
        "date" => is_date(s),
        "datetime" => is_date_time(s),
        "duration" => is_duration(s),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" => UUID.is_match(s),
        "uuid3" => UUID3.is_match(s),
        "uuid4" => UUID4.is_match(s),
        "uuid5" => UUID5.is_match(s),
        "ipv4" => s.contains('.') && s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => MAC.is_match(s),
        "hostname" => HOSTNAME.is_match(s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63),
        "email" => EMAIL.is_match(s),
        "uri" => is_request_uri(s),
        "hexcolor" => HEXCOLOR.is_match(s),
        "rgbcolor" => RGBCOLOR.is_match(s),
        "ssn" => SSN.is_match(s),
        "bsonobjectid" => BSON.is_match(s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "k8sshortname" => s.len() <= 63 && SHORT_NAME.is_match(s),
        "k8slongname" => s.len() <= 253 && LONG_NAME.is_match(s),
        _ => true, // "password" and anything else accept every string
    }
}

fn is_date(s: &str) -> bool {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() && s.len() == 10
}

/// strfmt's `IsDateTime`: a date, a `t`, then a time matched loosely (any separator before
/// the fraction, hours up to 23, minutes and seconds up to 59).
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    DATE_TIME_TAIL.captures(time).is_some_and(|c| {
        let field = |i: usize| c.get(i).map_or("99", |m| m.as_str()).to_owned();
        field(1).as_str() <= "23" && field(2).as_str() <= "59" && field(3).as_str() <= "59"
    })
}

/// strfmt's `ParseDuration`: a Go duration, or `<n> <unit>` pairs such as `3 days`.
fn is_duration(s: &str) -> bool {
    if crate::cel::parse_go_duration(s).is_some() {
        return true;
    }
    const UNITS: [&[&str]; 8] = [
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    re!(PAIR, r"((\d+)\s*([A-Za-zµ]+))");
    PAIR.captures_iter(s).any(|c| {
        let unit = c.get(3).map_or("", |m| m.as_str()).trim().to_lowercase();
        UNITS.iter().any(|variants| {
            let last = variants.len() - 1;
            variants
                .iter()
                .enumerate()
                .any(|(i, v)| (i == last && unit.starts_with(v)) || unit.eq_ignore_ascii_case(v))
        })
    })
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

/// govalidator's `IsRequestURI`: an absolute URI or an absolute path, no fragment rules.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.contains(char::is_whitespace) {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    match s.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

fn digits_only(s: &str) -> String {
    s.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = digits_only(s);
    if d.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in d.chars().enumerate() {
        let v = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'X' if i == 9 => 10,
            _ => return false,
        };
        sum += (i as u32 + 1) * v;
    }
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = digits_only(s);
    if d.len() != 13 || !d.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = d
        .chars()
        .enumerate()
        .map(|(i, c)| (c as u32 - '0' as u32) * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

fn is_credit_card(s: &str) -> bool {
    let d: String = s.chars().filter(char::is_ascii_digit).collect();
    if d.len() < 12 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in d.chars().rev().enumerate() {
        let mut v = c as u32 - '0' as u32;
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_time_and_friends() {
        for (format, ok, bad) in [
            ("date-time", "2024-01-02T03:04:05Z", "2024-01-02"),
            (
                "date-time",
                "2024-01-02t03:04:05.123+02:00",
                "2024-13-02T03:04:05Z",
            ),
            ("date", "2024-02-29", "2023-02-29"),
            ("duration", "1h30m", "soon"),
            ("duration", "3 days", "x"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123"),
            ("ipv4", "10.0.0.1", "::1"),
            ("ipv6", "::1", "10.0.0.1x"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("hostname", "example.com", "-bad-.com"),
            ("k8s-short-name", "my-name", "My-Name"),
            ("uri", "https://example.com/x", "not a uri"),
        ] {
            assert!(validates(format, ok), "{format} {ok}");
            assert!(!validates(format, bad), "{format} {bad}");
        }
        assert!(supported("date-time", Some(SchemaType::String)));
        assert!(!supported("quantity", Some(SchemaType::String)));
        assert!(supported("int32", Some(SchemaType::Integer)));
        assert!(!supported("int32", Some(SchemaType::String)));
    }
}
