//! `intstr.GetScaledValueFromIntOrPercent`: maxSurge / maxUnavailable as integers or percentages
//! of the desired replicas, rounded up (surge) or down (unavailable) as upstream does.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The absolute value of `value` for `total`, or a message like upstream's when a string is not a
/// percentage.
pub(crate) fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid type: string is not a percentage: {s:?}"))?;
            let product = percent * i64::from(total);
            let scaled = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            i32::try_from(scaled)
                .map_err(|_| format!("invalid value for IntOrString: {s:?} out of range"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_like_upstream() {
        let pct = |s: &str| IntOrString::String(s.into());
        let cases = [
            (pct("25%"), 10, true, Ok(3)),
            (pct("25%"), 10, false, Ok(2)),
            (pct("25%"), 3, true, Ok(1)),
            (pct("25%"), 3, false, Ok(0)),
            (pct("100%"), 7, false, Ok(7)),
            (pct("0%"), 7, true, Ok(0)),
            (IntOrString::Int(2), 10, true, Ok(2)),
        ];
        for (value, total, up, want) in cases {
            assert_eq!(
                scaled_value(&value, total, up),
                want,
                "{value:?} {total} {up}"
            );
        }
        assert!(scaled_value(&pct("25"), 10, true).is_err());
        assert!(scaled_value(&pct("abc%"), 10, true).is_err());
    }
}
