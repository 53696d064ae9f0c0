//! Resource quantities (`100m`, `1.5Gi`, `2e3`) as exact integers, for QoS comparison and the
//! downward API's `resourceFieldRef`. k8s-openapi keeps a `Quantity` as its string.

use thiserror::Error;

/// A parsed quantity in nano-units (10^-9). Every quantity the API accepts fits in an `i128`:
/// the largest suffix, `Ei`, is 2^60 and the API rejects values past 2^63.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Amount {
    nanos: i128,
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)]
pub struct QuantityError;

const NANO: i128 = 1_000_000_000;

impl Amount {
    pub const ZERO: Amount = Amount { nanos: 0 };

    /// Parses the canonical and non-canonical forms kube-apiserver accepts. Digits past the
    /// ninth decimal are rounded up, as `resource.Quantity` rounds up.
    pub fn parse(text: &str) -> Result<Amount, QuantityError> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(QuantityError);
        }
        // digits as an integer, scaled down by 10^fraction_len
        let digits = format!("{whole}{fraction}");
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| QuantityError)?
        };
        let mut exp10: i32 = -(i32::try_from(fraction.len()).map_err(|_| QuantityError)?);
        let mut factor: i128 = 1;
        match suffix {
            "" => {}
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                let power = match suffix {
                    "Ki" => 10,
                    "Mi" => 20,
                    "Gi" => 30,
                    "Ti" => 40,
                    "Pi" => 50,
                    _ => 60,
                };
                factor = 1i128 << power;
            }
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            s if s.starts_with(['e', 'E']) => {
                let e: i32 = s[1..].parse().map_err(|_| QuantityError)?;
                exp10 = exp10.checked_add(e).ok_or(QuantityError)?;
            }
            _ => return Err(QuantityError),
        }
        // nanos = mantissa * factor * 10^(exp10 + 9), rounded up when the exponent is negative
        let scale = exp10.checked_add(9).ok_or(QuantityError)?;
        let base = mantissa.checked_mul(factor).ok_or(QuantityError)?;
        let nanos = if scale >= 0 {
            let pow = 10i128
                .checked_pow(u32::try_from(scale).map_err(|_| QuantityError)?)
                .ok_or(QuantityError)?;
            base.checked_mul(pow).ok_or(QuantityError)?
        } else {
            let divisor = 10i128
                .checked_pow(scale.unsigned_abs())
                .unwrap_or(i128::MAX);
            ceil_div(base, divisor)
        };
        if nanos > i128::from(i64::MAX) * NANO {
            return Err(QuantityError);
        }
        Ok(Amount {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// `Quantity.MilliValue()`: thousandths, rounded up.
    pub fn milli_value(self) -> i128 {
        ceil_div(self.nanos, 1_000_000)
    }

    /// `Quantity.Value()`: units, rounded up.
    pub fn value(self) -> i128 {
        ceil_div(self.nanos, NANO)
    }

    pub fn is_positive(self) -> bool {
        self.nanos > 0
    }

    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        self.nanos
            .checked_add(other.nanos)
            .map(|nanos| Amount { nanos })
    }
}

/// Division rounding towards positive infinity (Go's `math.Ceil` of the quotient).
fn ceil_div(a: i128, b: i128) -> i128 {
    if b == 0 {
        return 0;
    }
    let q = a / b;
    if a % b != 0 && ((a > 0) == (b > 0)) {
        q + 1
    } else {
        q
    }
}

/// `ceil(value / divisor)` as kubelet's `convertResource*ToString` computes it, with CPU in
/// milli-units and everything else in units. A zero divisor yields 0 instead of Go's overflow.
pub fn divide_ceil(value: i128, divisor: i128) -> i128 {
    ceil_div(value, divisor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_api_forms() {
        let cases: &[(&str, i128, i128)] = &[
            // text, milli, value
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("0.5", 500, 1),
            ("1.5", 1500, 2),
            ("250m", 250, 1),
            ("128Mi", 128 * 1024 * 1024 * 1000, 128 * 1024 * 1024),
            ("1Gi", 1024 * 1024 * 1024 * 1000, 1024 * 1024 * 1024),
            ("1G", 1_000_000_000_000, 1_000_000_000),
            ("1k", 1_000_000, 1000),
            ("2e3", 2_000_000, 2000),
            (
                "1E",
                1_000_000_000_000_000_000_000,
                1_000_000_000_000_000_000,
            ),
            ("1n", 1, 1),
            ("0", 0, 0),
            ("-1", -1000, -1),
            ("+2", 2000, 2),
            (".5", 500, 1),
            ("0.0000000001", 1, 1),
        ];
        for (text, milli, value) in cases {
            let q = Amount::parse(text).unwrap();
            assert_eq!(q.milli_value(), *milli, "{text} milli");
            assert_eq!(q.value(), *value, "{text} value");
        }
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        for text in [
            "",
            "abc",
            "1Zi",
            "1.2.3",
            "1e",
            "1e999999999999",
            "1e40",
            "m",
            "--1",
            "9E99",
        ] {
            assert_eq!(Amount::parse(text), Err(QuantityError), "{text}");
        }
    }

    #[test]
    fn equal_amounts_compare_equal_across_forms() {
        assert_eq!(Amount::parse("1").unwrap(), Amount::parse("1000m").unwrap());
        assert_eq!(
            Amount::parse("1Ki").unwrap(),
            Amount::parse("1024").unwrap()
        );
        assert!(Amount::parse("1Mi").unwrap() > Amount::parse("1M").unwrap());
    }
}
