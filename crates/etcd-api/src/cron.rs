//! Cron schedules as the CronJob controller reads them (five fields or a macro), in UTC, and the
//! maintenance windows they open. Pure: times are Unix seconds.
//!
//! Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or JAN-DEC), day of
//! week (0-7, 0 and 7 Sunday, or SUN-SAT); each a `*`/`?`, a value, a range `a-b`, any of those
//! with a step `/n`, or a comma-separated list of them. When both day fields are restricted a
//! day matches either (cron's rule). Macros: `@yearly`/`@annually`, `@monthly`, `@weekly`,
//! `@daily`/`@midnight`, `@hourly`.

/// A parsed schedule: which minutes, hours, days and months fire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Day of month restricted (not `*`).
    dom_restricted: bool,
    /// Day of week restricted (not `*`).
    dow_restricted: bool,
}

/// Why a schedule does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronError(pub String);

impl std::fmt::Display for CronError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One field's allowed values as a bit set, and whether it was `*`/`?`.
fn field(
    text: &str,
    what: &str,
    min: u32,
    max: u32,
    names: &[&str],
) -> Result<(u64, bool), CronError> {
    let value = |v: &str| -> Result<u32, CronError> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
            // Month names start at 1, weekday names at 0.
            return u32::try_from(i)
                .map(|i| i + min)
                .map_err(|_| CronError(v.into()));
        }
        let n: u32 = v
            .parse()
            .map_err(|_| CronError(format!("{what}: {v:?} is not a number")))?;
        if n < min || n > max {
            return Err(CronError(format!("{what}: {n} is outside {min}-{max}")));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| CronError(format!("{what}: bad step in {part:?}")))?;
                (range, step)
            }
            None => (part, 1),
        };
        let (low, high) = if range == "*" || range == "?" {
            star = star || step == 1;
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            // `5/15` means from 5 to the end, every 15.
            (v, if step > 1 { max } else { v })
        };
        if low > high {
            return Err(CronError(format!("{what}: empty range {range:?}")));
        }
        let mut v = low;
        while v <= high {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

impl Schedule {
    /// Parses a schedule; the error names what is wrong.
    pub fn parse(text: &str) -> Result<Schedule, CronError> {
        let text = text.trim();
        let expanded = match text {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            return Err(CronError(format!(
                "{} fields, not 5 (minute hour day-of-month month day-of-week)",
                fields.len()
            )));
        };
        let (minutes, _) = field(minute, "minute", 0, 59, &[])?;
        let (hours, _) = field(hour, "hour", 0, 23, &[])?;
        let (days_of_month, dom_star) = field(dom, "day of month", 1, 31, &[])?;
        let (months, _) = field(month, "month", 1, 12, &MONTHS)?;
        let (days_of_week, dow_star) = field(dow, "day of week", 0, 7, &WEEKDAYS)?;
        // Sunday as 7 was folded onto 0 by `field`; bit 7 may be set by a range ending at 7.
        let days_of_week = (days_of_week | (days_of_week >> 7)) & 0x7f;
        let narrow = |bits: u64| u32::try_from(bits).map_err(|_| CronError("out of range".into()));
        Ok(Schedule {
            minutes,
            hours: narrow(hours)?,
            days_of_month: narrow(days_of_month)?,
            months: u16::try_from(months).map_err(|_| CronError("month out of range".into()))?,
            days_of_week: u8::try_from(days_of_week)
                .map_err(|_| CronError("day of week out of range".into()))?,
            dom_restricted: !dom_star,
            dow_restricted: !dow_star,
        })
    }

    /// Whether the schedule fires at the minute starting at `unix_seconds` (rounded down).
    pub fn fires_at(&self, unix_seconds: i64) -> bool {
        let t = Civil::from_unix(unix_seconds);
        let day = {
            let dom = self.days_of_month & (1 << t.day) != 0;
            let dow = self.days_of_week & (1 << t.weekday) != 0;
            match (self.dom_restricted, self.dow_restricted) {
                (true, true) => dom || dow,
                (true, false) => dom,
                (false, true) => dow,
                (false, false) => true,
            }
        };
        day && self.minutes & (1 << t.minute) != 0
            && self.hours & (1 << t.hour) != 0
            && self.months & (1 << t.month) != 0
    }

    /// The start of the window open at `now` (the latest firing minute at most `window_seconds`
    /// back), or `None` when no window is open.
    pub fn open_window(&self, now: i64, window_seconds: i64) -> Option<i64> {
        let minute = now.div_euclid(60) * 60;
        let mut t = minute;
        while now - t < window_seconds.max(1) {
            if self.fires_at(t) {
                return Some(t);
            }
            t -= 60;
        }
        None
    }

    /// The next firing minute after `now`, within `horizon_days` (`None` if it never fires
    /// within them, e.g. `0 0 30 2 *`).
    pub fn next_after(&self, now: i64, horizon_days: i64) -> Option<i64> {
        let mut t = now.div_euclid(60) * 60 + 60;
        let end = now + horizon_days * 86_400;
        while t <= end {
            if self.fires_at(t) {
                return Some(t);
            }
            t += 60;
        }
        None
    }
}

/// A UTC calendar time, to the minute.
struct Civil {
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    /// 0 = Sunday.
    weekday: u32,
}

impl Civil {
    fn from_unix(seconds: i64) -> Civil {
        let days = seconds.div_euclid(86_400);
        let of_day = seconds.rem_euclid(86_400);
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let small = |v: i64| u32::try_from(v).unwrap_or(0);
        Civil {
            month: small(month),
            day: small(day),
            hour: small(of_day / 3600),
            minute: small(of_day % 3600 / 60),
            // 1970-01-01 was a Thursday.
            weekday: small((days + 4).rem_euclid(7)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// 2026-11-26 08:00:00 UTC, a Thursday.
    const THU_0800: i64 = 1_795_680_000;

    #[test]
    fn calendar_conversion() {
        let t = Civil::from_unix(THU_0800);
        assert_eq!(
            (t.month, t.day, t.hour, t.minute, t.weekday),
            (11, 26, 8, 0, 4)
        );
        let epoch = Civil::from_unix(0);
        assert_eq!((epoch.month, epoch.day, epoch.weekday), (1, 1, 4));
        // 2024-02-29 12:34, a Thursday (leap day).
        let leap = Civil::from_unix(1_709_210_040);
        assert_eq!(
            (leap.month, leap.day, leap.hour, leap.minute, leap.weekday),
            (2, 29, 12, 34, 4)
        );
    }

    #[test]
    fn parses_what_cronjobs_accept_and_refuses_the_rest() {
        for ok in [
            "* * * * *",
            "0 */6 * * *",
            "30 2 * * 1-5",
            "0,15,30,45 * 1-7/2 JAN-MAR mon",
            "5 4 * * ?",
            "0 3 * * 7",
            "@daily",
            "@weekly",
        ] {
            assert!(Schedule::parse(ok).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("* * * *", "4 fields"),
            ("60 * * * *", "minute: 60 is outside 0-59"),
            ("0 24 * * *", "hour: 24"),
            ("0 0 0 * *", "day of month: 0"),
            ("0 0 * 13 *", "month: 13"),
            ("0 0 * * 8", "day of week: 8"),
            ("*/0 * * * *", "bad step"),
            ("5-1 * * * *", "empty range"),
            ("x * * * *", "not a number"),
            ("@often", "1 fields"),
        ] {
            let error = Schedule::parse(bad).unwrap_err().0;
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn windows_open_at_the_firing_minute_and_close_after_their_length() {
        // Nightly at 02:00, a two-hour window.
        let nightly = Schedule::parse("0 2 * * *").unwrap();
        let hour = 3600;
        let day_start = THU_0800 - 8 * hour;
        let two = day_start + 2 * hour;
        assert_eq!(nightly.open_window(two, 2 * hour), Some(two));
        assert_eq!(
            nightly.open_window(two + hour + 59 * 60, 2 * hour),
            Some(two)
        );
        assert_eq!(nightly.open_window(two + 2 * hour, 2 * hour), None);
        assert_eq!(nightly.open_window(two - 1, 2 * hour), None);
        assert_eq!(nightly.open_window(THU_0800, 2 * hour), None);
        assert_eq!(nightly.next_after(THU_0800, 2), Some(two + 86_400));
        // Weekends only (Saturday and Sunday).
        let weekend = Schedule::parse("0 0 * * SAT,SUN").unwrap();
        let saturday = day_start + 2 * 86_400;
        assert_eq!(weekend.next_after(THU_0800, 7), Some(saturday));
        assert_eq!(
            weekend.open_window(saturday + 47 * hour, 48 * hour),
            Some(saturday + 86_400)
        );
        // Day of month or day of week when both are restricted: the 1st, or any Monday.
        let either = Schedule::parse("0 0 1 * MON").unwrap();
        let monday = day_start + 4 * 86_400;
        assert_eq!(either.next_after(THU_0800, 10), Some(monday));
        let december_first = day_start + 5 * 86_400;
        assert!(either.fires_at(december_first));
        // Never (the 30th of February): no next window within a year.
        let never = Schedule::parse("0 0 30 2 *").unwrap();
        assert_eq!(never.next_after(THU_0800, 366), None);
        // Sunday as 7.
        assert_eq!(
            Schedule::parse("0 0 * * 7").unwrap(),
            Schedule::parse("0 0 * * 0").unwrap()
        );
    }
}
