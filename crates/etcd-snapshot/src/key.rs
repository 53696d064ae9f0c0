//! Object keys of snapshots (pure): `<prefix><cluster>/<YYYYMMDDTHHMMSSZ>-rev<revision>-<uid>.db`.
//!
//! Keys are unique per backup (the backup's UID is in them) and parse back into
//! [`SnapshotKey`], whose ordering (time, then revision, then UID) is what retention sorts by —
//! never the key string (`rev99` sorts after `rev100` as a string).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The parts of a snapshot object's name that retention sorts by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotKey {
    /// When the backup was taken, UTC, in whole seconds since the Unix epoch.
    pub unix_seconds: u64,
    /// The etcd revision the snapshot was taken at (or a lower bound of it).
    pub revision: u64,
    /// The UID of the backup object that took it.
    pub uid: String,
}

/// Why a key did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a snapshot key: {key:?}: {why}")]
pub struct KeyParseError {
    /// The key that was given.
    pub key: String,
    /// What was wrong with it.
    pub why: &'static str,
}

impl SnapshotKey {
    /// A key for a backup taken at `time` (truncated to whole seconds; before 1970 counts as 1970).
    pub fn new(time: SystemTime, revision: u64, uid: impl Into<String>) -> SnapshotKey {
        let unix_seconds = time
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        SnapshotKey {
            unix_seconds,
            revision,
            uid: uid.into(),
        }
    }

    /// The time as a [`SystemTime`].
    pub fn time(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.unix_seconds)
    }

    /// The file name: `<YYYYMMDDTHHMMSSZ>-rev<revision>-<uid>.db`.
    pub fn file_name(&self) -> String {
        format!(
            "{}-rev{}-{}.db",
            format_utc(self.unix_seconds),
            self.revision,
            self.uid
        )
    }

    /// The full object key: `<prefix><cluster>/<file name>`. `prefix` is used as given (end it
    /// with `/` to make it a directory).
    pub fn object_key(&self, prefix: &str, cluster: &str) -> String {
        format!("{prefix}{cluster}/{}", self.file_name())
    }

    /// Parses a full object key (or a bare file name): only the part after the last `/` is read.
    pub fn parse(key: &str) -> Result<SnapshotKey, KeyParseError> {
        let err = |why| KeyParseError {
            key: key.to_owned(),
            why,
        };
        let name = key.rsplit('/').next().unwrap_or(key);
        let stem = name
            .strip_suffix(".db")
            .ok_or_else(|| err("no .db suffix"))?;
        let (time, rest) = stem
            .split_once('-')
            .ok_or_else(|| err("no '-' after the time"))?;
        let unix_seconds = parse_utc(time).ok_or_else(|| err("bad time, want YYYYMMDDTHHMMSSZ"))?;
        let rest = rest
            .strip_prefix("rev")
            .ok_or_else(|| err("no 'rev' after the time"))?;
        let (revision, uid) = rest
            .split_once('-')
            .ok_or_else(|| err("no '-' after the revision"))?;
        if revision.is_empty() || !revision.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err("revision is not a decimal number"));
        }
        let revision = revision.parse().map_err(|_| err("revision out of range"))?;
        if uid.is_empty() {
            return Err(err("empty uid"));
        }
        Ok(SnapshotKey {
            unix_seconds,
            revision,
            uid: uid.to_owned(),
        })
    }
}

/// Formats Unix seconds as `YYYYMMDDTHHMMSSZ` (UTC).
pub fn format_utc(unix_seconds: u64) -> String {
    let days = unix_seconds / 86_400;
    let secs = unix_seconds % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Parses `YYYYMMDDTHHMMSSZ` (UTC, year ≥ 1970) into Unix seconds.
pub fn parse_utc(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let part = s.get(r)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, sec) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if y < 1970 || !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec)
}

fn is_leap(y: u64) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 → (year, month, day), for dates from 1970 on (H. Hinnant's algorithm,
/// shifted so that eras start on 0000-03-01 and all arithmetic stays unsigned).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// (year ≥ 1970, month, day) → days since 1970-01-01.
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y % 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn formats_known_times() {
        assert_eq!(format_utc(0), "19700101T000000Z");
        assert_eq!(format_utc(951_782_400), "20000229T000000Z");
        assert_eq!(format_utc(1_700_000_000), "20231114T221320Z");
        assert_eq!(format_utc(4_102_444_799), "20991231T235959Z");
        assert_eq!(format_utc(1_709_164_800), "20240229T000000Z");
    }

    #[test]
    fn format_parse_round_trip_over_many_days() {
        // Every day from 1970 to ~2110, at a varying time of day.
        let mut t = 0u64;
        while t < 4_400_000_000 {
            let s = format_utc(t);
            assert_eq!(parse_utc(&s), Some(t), "{s}");
            t += 86_400 + 3_661;
        }
    }

    #[test]
    fn rejects_bad_times() {
        for s in [
            "",
            "20230229T000000Z",
            "20241301T000000Z",
            "20240100T000000Z",
            "20240101T240000Z",
            "20240101T006000Z",
            "20240101T000060Z",
            "20240101 000000Z",
            "20240101T000000",
            "2024010IT000000Z",
            "19691231T235959Z",
            "+2024101T000000Z",
        ] {
            assert_eq!(parse_utc(s), None, "{s}");
        }
        assert!(parse_utc("20240229T235959Z").is_some());
    }

    #[test]
    fn key_round_trip() {
        let uid = "0b7c6e2a-3f1d-4c59-9a0e-1c2d3e4f5a6b";
        let k = SnapshotKey::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000), 12345, uid);
        let key = k.object_key("backups/", "my-etcd");
        assert_eq!(
            key,
            "backups/my-etcd/20231114T221320Z-rev12345-0b7c6e2a-3f1d-4c59-9a0e-1c2d3e4f5a6b.db"
        );
        assert_eq!(SnapshotKey::parse(&key).unwrap(), k);
        assert_eq!(SnapshotKey::parse(&k.file_name()).unwrap(), k);
        assert_eq!(k.time(), UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    }

    #[test]
    fn rejects_bad_keys() {
        for key in [
            "c/20231114T221320Z-rev1-uid",
            "c/20231114T221320Z-rev1-.db",
            "c/20231114T221320Z-1-uid.db",
            "c/20231114T221320Z-rev-uid.db",
            "c/20231114T221320Z-rev+1-uid.db",
            "c/20231114T221320Z-rev99999999999999999999999-uid.db",
            "c/2023-11-14-rev1-uid.db",
            "c/notes.db",
        ] {
            assert!(SnapshotKey::parse(key).is_err(), "{key}");
        }
    }

    #[test]
    fn sorts_by_time_then_revision_not_by_string() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let k99 = SnapshotKey::new(t, 99, "a").object_key("", "c");
        let k100 = SnapshotKey::new(t, 100, "a").object_key("", "c");
        // As strings, rev100 sorts before rev99: the wrong order.
        assert!(k100 < k99);
        let mut parsed: Vec<SnapshotKey> = [&k100, &k99]
            .iter()
            .map(|k| SnapshotKey::parse(k).unwrap())
            .collect();
        parsed.sort();
        assert_eq!(parsed[0].revision, 99);
        assert_eq!(parsed[1].revision, 100);

        // Time dominates revision (a restored cluster may have a lower revision later).
        let earlier = SnapshotKey::new(t, 500, "x");
        let later = SnapshotKey::new(t + Duration::from_secs(1), 7, "y");
        assert!(earlier < later);
    }
}
