//! RFC 3339 text of a protobuf `Timestamp`, in UTC, as Go's `time.RFC3339` (`metav1.Time`) and
//! `RFC3339Micro` (`metav1.MicroTime`) layouts print it.

use crate::DecodeError;

/// Unix seconds of Go's zero `time.Time` (0001-01-01T00:00:00Z), which the JSON writes as `null`.
pub(crate) const GO_ZERO_UNIX_SECONDS: i64 = -62_135_596_800;

const SECONDS_PER_DAY: i64 = 86_400;
const NANOS_PER_SECOND: i128 = 1_000_000_000;
const NANOS_PER_MICRO: i128 = 1_000;

/// Go's `time.Unix(seconds, nanos)` with the nanoseconds first truncated toward zero to whole
/// microseconds (what `MicroTime.Unmarshal` does), as `(seconds, microseconds in 0..1_000_000)`.
pub(crate) fn normalize_micros(seconds: i64, nanos: i32) -> (i64, u32) {
    let truncated = i128::from(nanos) / NANOS_PER_MICRO * NANOS_PER_MICRO;
    let total = i128::from(seconds) * NANOS_PER_SECOND + truncated;
    let whole = total.div_euclid(NANOS_PER_SECOND);
    let micros = total.rem_euclid(NANOS_PER_SECOND) / NANOS_PER_MICRO;
    // |nanos| < 2^31 moves `seconds` by at most 3, so `whole` fits unless `seconds` is within 3 of
    // the i64 range; the saturation only matters for those and they fail the year check anyway.
    let whole = i64::try_from(whole).unwrap_or(if whole < 0 { i64::MIN } else { i64::MAX });
    (whole, u32::try_from(micros).unwrap_or(0))
}

/// `2026-01-02T03:04:05Z`, or `2026-01-02T03:04:05.000006Z` with microseconds. Years outside
/// 0000–9999 have no RFC 3339 form; no client sends them, so they are a malformed body.
pub(crate) fn rfc3339(unix_seconds: i64, micros: Option<u32>) -> Result<String, DecodeError> {
    let days = unix_seconds.div_euclid(SECONDS_PER_DAY);
    let second_of_day = unix_seconds.rem_euclid(SECONDS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return Err(DecodeError::Malformed(format!(
            "timestamp {unix_seconds} is outside years 0000-9999"
        )));
    }
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60,
    );
    let fraction = micros
        .map(|micros| format!(".{micros:06}"))
        .unwrap_or_default();
    Ok(format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z"
    ))
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
/// Callers pass `unix_seconds / 86400`, so `days` stays far from the i64 limits.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_seconds_and_micros_like_go() {
        let cases: &[(i64, Option<u32>, &str)] = &[
            (0, None, "1970-01-01T00:00:00Z"),
            (1_767_323_045, None, "2026-01-02T03:04:05Z"),
            (1_767_323_045, Some(6), "2026-01-02T03:04:05.000006Z"),
            (951_782_400, None, "2000-02-29T00:00:00Z"),
            (-1, None, "1969-12-31T23:59:59Z"),
            (253_402_300_799, None, "9999-12-31T23:59:59Z"),
            (GO_ZERO_UNIX_SECONDS, None, "0001-01-01T00:00:00Z"),
        ];
        for (seconds, micros, want) in cases {
            assert_eq!(
                rfc3339(*seconds, *micros).unwrap(),
                *want,
                "{seconds} {micros:?}"
            );
        }
    }

    #[test]
    fn rejects_years_without_an_rfc3339_form() {
        for seconds in [253_402_300_800, i64::MAX, i64::MIN, -62_167_219_201] {
            assert!(
                matches!(rfc3339(seconds, None), Err(DecodeError::Malformed(_))),
                "{seconds}"
            );
        }
    }

    #[test]
    fn micros_truncate_toward_zero_then_normalize() {
        assert_eq!(normalize_micros(10, 1_999), (10, 1));
        assert_eq!(normalize_micros(10, -1_999), (9, 999_999));
        assert_eq!(normalize_micros(10, 1_500_000_000), (11, 500_000));
        assert_eq!(normalize_micros(i64::MAX, i32::MAX).0, i64::MAX);
    }
}
