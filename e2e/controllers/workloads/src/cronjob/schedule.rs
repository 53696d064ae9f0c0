//! Cron schedules as the CronJob controller parses them (`robfig/cron/v3` `ParseStandard`): five
//! fields (minute hour day-of-month month day-of-week) with `*`, `?`, lists, ranges, steps and
//! month/weekday names, or a descriptor (`@yearly`, `@annually`, `@monthly`, `@weekly`,
//! `@daily`, `@midnight`, `@hourly`). Times are found in wall-clock time of the schedule's time
//! zone, so `0 9 * * *` in `Europe/Berlin` stays at 09:00 across DST changes.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// A parsed schedule: one bit per allowed value of each field.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// The day-of-month or day-of-week field was `*`/`?`: then both must match, otherwise
    /// either may (cron's historic OR rule).
    day_star: bool,
}

struct Field {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    min: 0,
    max: 23,
    names: &[],
};
const DAY: Field = Field {
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const WEEKDAY: Field = Field {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

fn value(field: &Field, s: &str) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = field.names.iter().position(|n| *n == lower) {
        return Ok(field.min + u32::try_from(i).unwrap_or(0));
    }
    s.parse::<u32>().map_err(|_| {
        format!("failed to parse int from {s}: strconv.Atoi: parsing {s:?}: invalid syntax")
    })
}

/// One field: its bits and whether it was a bare `*` or `?`.
fn parse_field(field: &Field, expr: &str) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in expr.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                Some(
                    s.parse::<u32>()
                        .map_err(|_| format!("failed to parse int from {s}"))?,
                ),
            ),
            None => (part, None),
        };
        let (mut start, mut end, mut part_star) = if range == "*" || range == "?" {
            (field.min, field.max, true)
        } else if let Some((lo, hi)) = range.split_once('-') {
            (value(field, lo)?, value(field, hi)?, false)
        } else {
            let v = value(field, range)?;
            (v, v, false)
        };
        if step.is_some() && !part_star && !range.contains('-') {
            end = field.max; // "N/step" means "N-max/step"
        }
        let step = step.unwrap_or(1);
        if step > 1 {
            part_star = false;
        }
        if start < field.min {
            return Err(format!(
                "beginning of range ({start}) below minimum ({}): {part}",
                field.min
            ));
        }
        if end > field.max {
            return Err(format!(
                "end of range ({end}) above maximum ({}): {part}",
                field.max
            ));
        }
        if start > end {
            return Err(format!(
                "beginning of range ({start}) beyond end of range ({end}): {part}"
            ));
        }
        if step == 0 {
            return Err(format!("step of range should be a positive number: {part}"));
        }
        while start <= end {
            bits |= 1 << start;
            start += step;
        }
        star |= part_star;
    }
    Ok((bits, star))
}

/// Parse a standard cron expression or descriptor.
pub(crate) fn parse(expr: &str) -> Result<Schedule, String> {
    let expr = expr.trim();
    let expanded = match expr.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *".to_string(),
        "@monthly" => "0 0 1 * *".to_string(),
        "@weekly" => "0 0 * * 0".to_string(),
        "@daily" | "@midnight" => "0 0 * * *".to_string(),
        "@hourly" => "0 * * * *".to_string(),
        other if other.starts_with('@') => return Err(format!("unrecognized descriptor: {expr}")),
        _ => expr.to_string(),
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let (minutes, _) = parse_field(&MINUTE, fields[0])?;
    let (hours, _) = parse_field(&HOUR, fields[1])?;
    let (days, day_of_month_star) = parse_field(&DAY, fields[2])?;
    let (months, _) = parse_field(&MONTH, fields[3])?;
    let (weekdays, weekday_star) = parse_field(&WEEKDAY, fields[4])?;
    Ok(Schedule {
        minutes,
        hours,
        days,
        months,
        weekdays,
        day_star: day_of_month_star || weekday_star,
    })
}

fn has(bits: u64, v: impl Into<i64>) -> bool {
    u32::try_from(v.into()).is_ok_and(|v| v < 64 && bits & (1 << v) != 0)
}

impl Schedule {
    fn day_matches(&self, dt: DateTime) -> bool {
        let dom = has(self.days, dt.day());
        let dow = has(self.weekdays, dt.weekday().to_sunday_zero_offset());
        if self.day_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first activation strictly after `after`, searching up to five years ahead.
    pub(crate) fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let local = after.to_zoned(tz.clone()).datetime();
        let mut dt = local
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(1.minute())
            .ok()?;
        let limit = dt.checked_add(5.years()).ok()?;
        while dt < limit {
            if !has(self.months, dt.month()) {
                dt = dt
                    .date()
                    .first_of_month()
                    .checked_add(1.month())
                    .ok()?
                    .to_datetime(jiff::civil::Time::midnight());
            } else if !self.day_matches(dt) {
                dt = dt
                    .date()
                    .tomorrow()
                    .ok()?
                    .to_datetime(jiff::civil::Time::midnight());
            } else if !has(self.hours, dt.hour()) {
                dt = dt
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(1.hour())
                    .ok()?;
            } else if !has(self.minutes, dt.minute()) {
                dt = dt.checked_add(1.minute()).ok()?;
            } else {
                let at = tz.to_ambiguous_zoned(dt).compatible().ok()?.timestamp();
                if at > after {
                    return Some(at);
                }
                dt = dt.checked_add(1.minute()).ok()?;
            }
        }
        None
    }
}

/// The schedule's time zone: `spec.timeZone` from the tz database, else UTC (the controller
/// manager's local zone on every real cluster setup this mimics).
pub(crate) fn time_zone(name: Option<&str>) -> Result<TimeZone, String> {
    match name {
        None => Ok(TimeZone::UTC),
        Some(name) => TimeZone::get(name).map_err(|e| format!("unknown time zone {name}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn next_activation_table() {
        let cases = [
            ("* * * * *", "2024-03-01T10:00:00Z", "2024-03-01T10:01:00Z"),
            ("* * * * *", "2024-03-01T10:00:30Z", "2024-03-01T10:01:00Z"),
            (
                "*/15 * * * *",
                "2024-03-01T10:01:00Z",
                "2024-03-01T10:15:00Z",
            ),
            (
                "5/20 * * * *",
                "2024-03-01T10:26:00Z",
                "2024-03-01T10:45:00Z",
            ),
            (
                "0 9-17/4 * * *",
                "2024-03-01T13:00:00Z",
                "2024-03-01T17:00:00Z",
            ),
            ("@hourly", "2024-03-01T10:59:59Z", "2024-03-01T11:00:00Z"),
            ("@daily", "2024-03-01T10:00:00Z", "2024-03-02T00:00:00Z"),
            ("@weekly", "2024-03-01T10:00:00Z", "2024-03-03T00:00:00Z"), // a Sunday
            ("@monthly", "2024-03-01T00:00:00Z", "2024-04-01T00:00:00Z"),
            ("@yearly", "2024-03-01T00:00:00Z", "2025-01-01T00:00:00Z"),
            (
                "0 0 29 feb *",
                "2024-03-01T00:00:00Z",
                "2028-02-29T00:00:00Z",
            ),
            (
                "30 8 * * mon-fri",
                "2024-03-01T09:00:00Z",
                "2024-03-04T08:30:00Z",
            ), // Fri -> Mon
            // Day-of-month OR day-of-week when both are restricted: the 15th or a Monday.
            ("0 0 15 * 1", "2024-03-01T00:00:00Z", "2024-03-04T00:00:00Z"),
            ("0 0 15 * 1", "2024-03-12T00:00:00Z", "2024-03-15T00:00:00Z"),
            // AND when one of them is a star: Mondays only.
            (
                "0 0 * * MON",
                "2024-03-12T00:00:00Z",
                "2024-03-18T00:00:00Z",
            ),
            (
                "0 12 1,15 jan,jul ?",
                "2024-03-01T00:00:00Z",
                "2024-07-01T12:00:00Z",
            ),
        ];
        for (expr, after, want) in cases {
            let s = parse(expr).unwrap();
            assert_eq!(
                s.next_after(utc(after), &TimeZone::UTC),
                Some(utc(want)),
                "{expr} after {after}"
            );
        }
        // 31 February never happens.
        assert_eq!(
            parse("0 0 31 2 *")
                .unwrap()
                .next_after(utc("2024-01-01T00:00:00Z"), &TimeZone::UTC),
            None
        );
    }

    #[test]
    fn time_zones_follow_wall_clock_across_dst() {
        let berlin = time_zone(Some("Europe/Berlin")).unwrap();
        let s = parse("0 9 * * *").unwrap();
        // Winter: 09:00 CET = 08:00Z; summer (after 31 March 2024): 09:00 CEST = 07:00Z.
        assert_eq!(
            s.next_after(utc("2024-03-30T12:00:00Z"), &berlin),
            Some(utc("2024-03-31T07:00:00Z"))
        );
        assert_eq!(
            s.next_after(utc("2024-03-29T12:00:00Z"), &berlin),
            Some(utc("2024-03-30T08:00:00Z"))
        );
        // 02:30 does not exist on 31 March in Berlin: the gap resolves forward to 03:30 CEST.
        let gap = parse("30 2 * * *").unwrap();
        assert_eq!(
            gap.next_after(utc("2024-03-30T12:00:00Z"), &berlin),
            Some(utc("2024-03-31T01:30:00Z"))
        );
        assert!(time_zone(Some("Mars/Olympus")).is_err());
        assert_eq!(time_zone(None).unwrap(), TimeZone::UTC);
    }

    #[test]
    fn bad_expressions_are_refused() {
        for expr in [
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "5-1 * * * *",
            "*/0 * * * *",
            "x * * * *",
            "@every 5m",
            "@reboot",
        ] {
            assert!(parse(expr).is_err(), "{expr}");
        }
    }
}
