//! Validation the CRD schema cannot express, shared by the operators. Pure functions.
//!
//! The schema already refuses what it can (ranges, patterns, enums, CEL rules). What is left
//! needs knowledge of etcd (which versions exist, which upgrade paths are safe) or of the
//! current state (a version to upgrade from, a volume size to grow from). Each error names the
//! field, so it can go into a condition and an event unchanged.

use std::cmp::Ordering;
use std::fmt;

use crate::cluster::{EtcdClusterSpec, StorageSpec};

/// etcd minor versions the operator knows how to run: every minor it is tested on (all support
/// learners and `--initial-cluster-state existing` joins). 3.4 is no longer maintained upstream;
/// it stays accepted so that clusters still on it can be adopted and upgraded to 3.5.
pub const SUPPORTED_MINOR_VERSIONS: &[(u64, u64)] = &[(3, 4), (3, 5), (3, 6), (3, 7)];

/// The version a new cluster runs when `spec.version` is not given (and the one the examples,
/// the chart's notes and the demo use).
pub const DEFAULT_VERSION: &str = "3.6.16";

/// Releases the operator refuses to run, with why. etcd's maintainers advise against
/// 3.5.0–3.5.2 in production: a member killed under write load can come back with data
/// inconsistent with the rest of the cluster (etcd-io/etcd#13766, fixed in 3.5.3). A refused
/// `spec.version` touches nothing; moving such a cluster to 3.5.3 or later is a patch upgrade.
pub const KNOWN_BAD: &[(EtcdVersion, EtcdVersion, &str)] = &[(
    EtcdVersion::new(3, 5, 0),
    EtcdVersion::new(3, 5, 2),
    "etcd 3.5.0-3.5.2 can lose data consistency when a member crashes under write load \
     (etcd-io/etcd#13766, fixed in 3.5.3); use 3.5.3 or later (3.5.35 is tested)",
)];

/// A field of a spec that cannot be acted on, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.version`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// An etcd release version, `MAJOR.MINOR.PATCH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtcdVersion {
    /// Major version.
    pub major: u64,
    /// Minor version.
    pub minor: u64,
    /// Patch version.
    pub patch: u64,
}

impl EtcdVersion {
    /// `MAJOR.MINOR.PATCH`.
    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// Parses `3.5.1` (a leading `v`, as etcd images are tagged, is accepted).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts = text.split('.');
        let mut next = || -> Option<u64> {
            let part = parts.next()?;
            let leading_zero = part.len() > 1 && part.starts_with('0');
            if part.is_empty() || leading_zero || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let version = Self {
            major: next()?,
            minor: next()?,
            patch: next()?,
        };
        parts.next().is_none().then_some(version)
    }

    /// Whether the operator supports this version's minor line.
    pub fn is_supported(self) -> bool {
        SUPPORTED_MINOR_VERSIONS.contains(&(self.major, self.minor))
    }
}

impl fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Parses and checks `spec.version`.
pub fn validate_version(version: &str) -> Result<EtcdVersion, FieldError> {
    let parsed = EtcdVersion::parse(version).ok_or_else(|| {
        FieldError::new(
            "spec.version",
            format!("{version:?} is not a version of the form MAJOR.MINOR.PATCH (e.g. 3.6.16)"),
        )
    })?;
    if !parsed.is_supported() {
        let supported: Vec<String> = SUPPORTED_MINOR_VERSIONS
            .iter()
            .map(|(major, minor)| format!("{major}.{minor}"))
            .collect();
        return Err(FieldError::new(
            "spec.version",
            format!(
                "etcd {parsed} is not supported; supported minor versions: {} ({})",
                supported.join(", "),
                supported_range()
            ),
        ));
    }
    if let Some((_, _, why)) = KNOWN_BAD
        .iter()
        .find(|(first, last, _)| (*first..=*last).contains(&parsed))
    {
        return Err(FieldError::new(
            "spec.version",
            format!("etcd {parsed} is refused: {why}"),
        ));
    }
    Ok(parsed)
}

/// The supported range, for messages: "3.4-3.7".
pub fn supported_range() -> String {
    match (
        SUPPORTED_MINOR_VERSIONS.first(),
        SUPPORTED_MINOR_VERSIONS.last(),
    ) {
        (Some((a, b)), Some((c, d))) => format!("{a}.{b}-{c}.{d}"),
        _ => String::new(),
    }
}

/// The kind of version change a rolling upgrade performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionChange {
    /// Same version: nothing to roll.
    None,
    /// Same minor, newer patch.
    Patch,
    /// The next minor version.
    Minor,
}

/// Checks that the cluster can move from `current` to `desired` with a rolling upgrade:
/// no downgrade (etcd's data format only moves forward), no skipped minor version (etcd supports
/// mixed clusters of adjacent minors only), no major change.
pub fn check_version_change(
    current: EtcdVersion,
    desired: EtcdVersion,
) -> Result<VersionChange, FieldError> {
    let field = "spec.version";
    match desired.cmp(&current) {
        Ordering::Equal => Ok(VersionChange::None),
        Ordering::Less => Err(FieldError::new(
            field,
            format!("downgrade from {current} to {desired} is not supported"),
        )),
        Ordering::Greater if desired.major != current.major => Err(FieldError::new(
            field,
            format!("upgrade from {current} to {desired} changes the major version"),
        )),
        Ordering::Greater if desired.minor == current.minor => Ok(VersionChange::Patch),
        Ordering::Greater if desired.minor == current.minor + 1 => Ok(VersionChange::Minor),
        Ordering::Greater => Err(FieldError::new(
            field,
            format!(
                "upgrade from {current} to {desired} skips a minor version; upgrade to {}.{}.x first",
                current.major,
                current.minor + 1
            ),
        )),
    }
}

/// A minor upgrade that must wait: etcd's cluster version (the `etcdcluster` of `GET /version`)
/// is not yet the minor the members run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterVersionBehind {
    /// The cluster version etcd reports (`MAJOR.MINOR`), if any.
    pub cluster_version: Option<(u64, u64)>,
    /// The cluster version the next minor needs.
    pub needed: (u64, u64),
}

/// Whether the next step towards `desired` may start, given the members' lowest version
/// `current` and etcd's cluster version. etcd upgrades one minor at a time, and the cluster
/// version moves to the new minor only some seconds after the last member runs it (the leader
/// decides it); a member of the next minor refuses to join a cluster whose cluster version is
/// older than its own minor minus one. So a minor upgrade starts only once the cluster version
/// has reached `current`'s minor, and until etcd reports one (`None`) it waits. Patch changes
/// and no change are never held.
pub fn check_cluster_version(
    current: EtcdVersion,
    desired: EtcdVersion,
    cluster_version: Option<(u64, u64)>,
) -> Result<(), ClusterVersionBehind> {
    let needed = (current.major, current.minor);
    let minor_upgrade = (desired.major, desired.minor) > needed;
    if !minor_upgrade || cluster_version.is_some_and(|cv| cv >= needed) {
        Ok(())
    } else {
        Err(ClusterVersionBehind {
            cluster_version,
            needed,
        })
    }
}

/// Parses etcd's cluster version as `GET /version` reports it (`"3.5.0"`; `"not_decided"`
/// right after start) into `MAJOR.MINOR`.
pub fn parse_cluster_version(text: &str) -> Option<(u64, u64)> {
    let version = EtcdVersion::parse(text)?;
    Some((version.major, version.minor))
}

/// Checks that a snapshot taken from etcd `snapshot` can seed a cluster of `target`: the same
/// minor or the next one (a restore is then an upgrade by one minor, as a rolling upgrade
/// would be). A snapshot of a newer minor is refused (etcd's data format only moves forward),
/// and so is a skipped minor. `field` names the source in the message.
pub fn check_restore_versions(
    field: &str,
    snapshot: EtcdVersion,
    target: EtcdVersion,
) -> Result<(), FieldError> {
    let (from, to) = (
        (snapshot.major, snapshot.minor),
        (target.major, target.minor),
    );
    if to < from {
        return Err(FieldError::new(
            field,
            format!(
                "a snapshot of etcd {snapshot} cannot be restored into etcd {target}: that is a \
                 downgrade; restore into {}.{}.x or later",
                snapshot.major, snapshot.minor
            ),
        ));
    }
    if to.0 != from.0 || to.1 > from.1 + 1 {
        return Err(FieldError::new(
            field,
            format!(
                "a snapshot of etcd {snapshot} cannot be restored into etcd {target}: that skips \
                 a minor version; restore into {}.{}.x or {}.{}.x and upgrade from there",
                snapshot.major,
                snapshot.minor,
                snapshot.major,
                snapshot.minor + 1
            ),
        ));
    }
    Ok(())
}

/// Parses a Kubernetes quantity (`8Gi`, `500M`, `1.5Gi`, `1e9`, `1073741824`) into bytes,
/// rounding fractions up as Kubernetes does for storage. `None` for anything else.
pub fn quantity_to_bytes(quantity: &str) -> Option<u128> {
    const SUFFIXES: &[(&str, u128)] = &[
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
    ];
    let quantity = quantity.trim();
    // Suffixes first: `E` (exa) would otherwise read as an exponent.
    let (number, multiplier, exponent) = if let Some((suffix, multiplier)) = SUFFIXES
        .iter()
        .find(|(suffix, _)| quantity.ends_with(suffix))
    {
        (&quantity[..quantity.len() - suffix.len()], *multiplier, 0)
    } else if let Some((number, exp)) = quantity.split_once(['e', 'E']) {
        (number, 1, exp.parse::<u32>().ok()?)
    } else {
        (quantity, 1, 0)
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || !all_digits(fraction) || fraction.len() > 18 {
        return None;
    }
    let scale = 10u128.checked_pow(fraction.len() as u32)?;
    let mantissa = format!("{whole}{fraction}").parse::<u128>().ok()?;
    let numerator = mantissa
        .checked_mul(multiplier)?
        .checked_mul(10u128.checked_pow(exponent)?)?;
    Some(numerator.div_ceil(scale))
}

/// Checks a storage change against the storage the members were created with. Volumes can grow
/// (where the StorageClass allows expansion) but never shrink; the class cannot change (the
/// schema refuses that too, this covers objects written before the rule existed).
pub fn check_storage_change(
    current: &StorageSpec,
    desired: &StorageSpec,
) -> Result<(), FieldError> {
    if current.storage_class_name != desired.storage_class_name {
        return Err(FieldError::new(
            "spec.storage.storageClassName",
            format!(
                "cannot change from {:?} to {:?}: existing members' volumes cannot move to another class",
                current.storage_class_name, desired.storage_class_name
            ),
        ));
    }
    let current_size = quantity_to_bytes(&current.size.0);
    let desired_size = quantity_to_bytes(&desired.size.0);
    match (current_size, desired_size) {
        (_, None) => Err(FieldError::new(
            "spec.storage.size",
            format!("{:?} is not a valid quantity", desired.size.0),
        )),
        (Some(current_bytes), Some(desired_bytes)) if desired_bytes < current_bytes => {
            Err(FieldError::new(
                "spec.storage.size",
                format!(
                    "cannot shrink member volumes from {} to {}",
                    current.size.0, desired.size.0
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Everything about an EtcdCluster spec that can be checked without observing the cluster.
/// Returns every problem, not only the first, so a user fixes them in one go.
pub fn validate_cluster_spec(spec: &EtcdClusterSpec) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    if !(1..=7).contains(&spec.size) {
        errors.push(FieldError::new(
            "spec.size",
            format!("{} is outside 1..7", spec.size),
        ));
    }
    if let Err(error) = validate_version(&spec.version) {
        errors.push(error);
    }
    match quantity_to_bytes(&spec.storage.size.0) {
        None => errors.push(FieldError::new(
            "spec.storage.size",
            format!("{:?} is not a valid quantity", spec.storage.size.0),
        )),
        Some(0) => errors.push(FieldError::new(
            "spec.storage.size",
            "must be larger than 0",
        )),
        Some(_) => {}
    }
    // The CEL rule checks the shape; the ranges (minute 0-59, ...) are checked here. (A bad
    // `spec.backup.schedule` does not stop the members' care: the backup schedule's step
    // reports it on its own, see the cluster operator's scheduled_backup.rs.)
    if let Some(schedule) = spec
        .maintenance
        .as_ref()
        .and_then(|m| m.defrag.as_ref())
        .and_then(|d| d.schedule.as_deref())
        && let Err(error) = crate::cron::Schedule::parse(schedule)
    {
        errors.push(FieldError::new(
            "spec.maintenance.defrag.schedule",
            format!("{schedule:?} is not a cron schedule: {error}"),
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn v(text: &str) -> EtcdVersion {
        EtcdVersion::parse(text).unwrap()
    }

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(
            EtcdVersion::parse("3.5.1"),
            Some(EtcdVersion {
                major: 3,
                minor: 5,
                patch: 1
            })
        );
        assert_eq!(EtcdVersion::parse("v3.4.23"), Some(v("3.4.23")));
        for bad in [
            "",
            "3.5",
            "3.5.1.0",
            "3.5.x",
            "3..1",
            "03.5.1",
            "3.5.1-rc.0",
            " 3.5.1",
            "v",
        ] {
            assert_eq!(EtcdVersion::parse(bad), None, "{bad:?} must not parse");
        }
        assert_eq!(
            v("3.10.0").cmp(&v("3.9.9")),
            Ordering::Greater,
            "numeric, not string order"
        );
        assert_eq!(v("3.5.1").to_string(), "3.5.1");
    }

    #[test]
    fn version_field_errors_name_the_field() {
        let unsupported = "supported minor versions: 3.4, 3.5, 3.6, 3.7 (3.4-3.7)";
        let bad_35 = "is refused: etcd 3.5.0-3.5.2 can lose data consistency when a member \
                      crashes under write load (etcd-io/etcd#13766, fixed in 3.5.3); use 3.5.3 \
                      or later (3.5.35 is tested)";
        let table: &[(&str, Result<&str, String>)] = &[
            ("3.4.23", Ok("3.4.23")),
            ("3.5.3", Ok("3.5.3")),
            ("3.5.35", Ok("3.5.35")),
            ("3.6.0", Ok("3.6.0")),
            ("3.6.16", Ok("3.6.16")),
            ("v3.7.3", Ok("3.7.3")),
            ("3.5.0", Err(format!("etcd 3.5.0 {bad_35}"))),
            ("3.5.1", Err(format!("etcd 3.5.1 {bad_35}"))),
            ("3.5.2", Err(format!("etcd 3.5.2 {bad_35}"))),
            (
                "3.5",
                Err("\"3.5\" is not a version of the form MAJOR.MINOR.PATCH (e.g. 3.6.16)".into()),
            ),
            (
                "3.3.27",
                Err(format!("etcd 3.3.27 is not supported; {unsupported}")),
            ),
            (
                "3.8.0",
                Err(format!("etcd 3.8.0 is not supported; {unsupported}")),
            ),
            (
                "4.0.0",
                Err(format!("etcd 4.0.0 is not supported; {unsupported}")),
            ),
        ];
        for (input, want) in table {
            let got = validate_version(input);
            match want {
                Ok(version) => assert_eq!(got, Ok(v(version)), "{input}"),
                Err(message) => assert_eq!(
                    got.unwrap_err().to_string(),
                    format!("spec.version: {message}"),
                    "{input}"
                ),
            }
        }
        assert_eq!(validate_version(DEFAULT_VERSION), Ok(v("3.6.16")));
    }

    #[test]
    fn upgrade_paths() {
        let cases = [
            ("3.5.1", "3.5.1", Ok(VersionChange::None)),
            ("3.5.1", "3.5.9", Ok(VersionChange::Patch)),
            ("3.4.23", "3.5.1", Ok(VersionChange::Minor)),
            ("3.5.9", "3.6.0", Ok(VersionChange::Minor)),
            ("3.5.35", "3.6.16", Ok(VersionChange::Minor)),
            ("3.6.16", "3.7.3", Ok(VersionChange::Minor)),
            ("3.5.2", "3.5.35", Ok(VersionChange::Patch)),
            (
                "3.5.35",
                "3.7.3",
                Err(
                    "spec.version: upgrade from 3.5.35 to 3.7.3 skips a minor version; upgrade to 3.6.x first",
                ),
            ),
            (
                "3.6.16",
                "3.5.35",
                Err("spec.version: downgrade from 3.6.16 to 3.5.35 is not supported"),
            ),
            (
                "3.7.3",
                "3.6.16",
                Err("spec.version: downgrade from 3.7.3 to 3.6.16 is not supported"),
            ),
            (
                "3.5.1",
                "3.4.23",
                Err("spec.version: downgrade from 3.5.1 to 3.4.23 is not supported"),
            ),
            (
                "3.5.2",
                "3.5.1",
                Err("spec.version: downgrade from 3.5.2 to 3.5.1 is not supported"),
            ),
            (
                "3.4.23",
                "3.6.0",
                Err(
                    "spec.version: upgrade from 3.4.23 to 3.6.0 skips a minor version; upgrade to 3.5.x first",
                ),
            ),
            (
                "3.6.0",
                "4.0.0",
                Err("spec.version: upgrade from 3.6.0 to 4.0.0 changes the major version"),
            ),
        ];
        for (from, to, expected) in cases {
            let got = check_version_change(v(from), v(to)).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_owned), "{from} -> {to}");
        }
    }

    #[test]
    fn cluster_version_gates_minor_upgrades() {
        let behind = |cv, needed| {
            Err(ClusterVersionBehind {
                cluster_version: cv,
                needed,
            })
        };
        let cases = [
            // Members on 3.5 and etcd agrees: 3.6 may start.
            ("3.5.35", "3.6.16", Some((3, 5)), Ok(())),
            // Every member runs 3.5 but etcd still says 3.4 (seconds after the last restart).
            (
                "3.5.35",
                "3.6.16",
                Some((3, 4)),
                behind(Some((3, 4)), (3, 5)),
            ),
            ("3.5.35", "3.6.16", None, behind(None, (3, 5))),
            (
                "3.6.16",
                "3.7.3",
                Some((3, 5)),
                behind(Some((3, 5)), (3, 6)),
            ),
            ("3.6.16", "3.7.3", Some((3, 6)), Ok(())),
            // Mid-upgrade: one member already on 3.6, the cluster version stays 3.5.
            ("3.5.35", "3.6.16", Some((3, 5)), Ok(())),
            // Patch upgrades and no change are never held, whatever etcd reports.
            ("3.5.3", "3.5.35", None, Ok(())),
            ("3.6.16", "3.6.16", Some((3, 5)), Ok(())),
        ];
        for (from, to, cv, want) in cases {
            assert_eq!(
                check_cluster_version(v(from), v(to), cv),
                want,
                "{from} -> {to} at {cv:?}"
            );
        }
        assert_eq!(parse_cluster_version("3.5.0"), Some((3, 5)));
        assert_eq!(parse_cluster_version("not_decided"), None);
        assert_eq!(parse_cluster_version(""), None);
    }

    #[test]
    fn restore_version_pairs() {
        let field = "spec.source.backupRef";
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("3.5.35", "3.5.35", None),
            ("3.5.35", "3.5.3", None),
            ("3.4.23", "3.5.35", None),
            ("3.5.35", "3.6.16", None),
            ("3.6.16", "3.7.3", None),
            (
                "3.6.16",
                "3.5.35",
                Some(
                    "a snapshot of etcd 3.6.16 cannot be restored into etcd 3.5.35: that is a \
                     downgrade; restore into 3.6.x or later",
                ),
            ),
            (
                "3.4.23",
                "3.6.16",
                Some(
                    "a snapshot of etcd 3.4.23 cannot be restored into etcd 3.6.16: that skips a \
                     minor version; restore into 3.4.x or 3.5.x and upgrade from there",
                ),
            ),
            (
                "3.5.35",
                "3.7.3",
                Some(
                    "a snapshot of etcd 3.5.35 cannot be restored into etcd 3.7.3: that skips a \
                     minor version; restore into 3.5.x or 3.6.x and upgrade from there",
                ),
            ),
        ];
        for (snapshot, target, want) in cases {
            let got =
                check_restore_versions(field, v(snapshot), v(target)).map_err(|e| e.to_string());
            assert_eq!(
                got,
                want.map_or(Ok(()), |m| Err(format!("{field}: {m}"))),
                "{snapshot} -> {target}"
            );
        }
    }

    #[test]
    fn quantities() {
        let cases = [
            ("1Gi", Some(1u128 << 30)),
            ("8Gi", Some(8u128 << 30)),
            ("512Mi", Some(512u128 << 20)),
            ("1.5Gi", Some(3u128 << 29)),
            ("500M", Some(500_000_000)),
            ("1k", Some(1000)),
            ("1073741824", Some(1 << 30)),
            ("1e9", Some(1_000_000_000)),
            ("2E", Some(2_000_000_000_000_000_000)),
            ("1Ei", Some(1 << 60)),
            ("0.1", Some(1)),
            ("0", Some(0)),
            ("", None),
            ("Gi", None),
            ("1GB", None),
            ("-1Gi", None),
            ("1.2.3", None),
            ("abc", None),
        ];
        for (text, expected) in cases {
            assert_eq!(quantity_to_bytes(text), expected, "{text:?}");
        }
    }

    fn storage(size: &str, class: Option<&str>) -> StorageSpec {
        StorageSpec {
            size: Quantity(size.into()),
            storage_class_name: class.map(str::to_owned),
            ..StorageSpec::default()
        }
    }

    #[test]
    fn storage_may_grow_but_not_shrink_or_change_class() {
        assert_eq!(
            check_storage_change(&storage("1Gi", None), &storage("1Gi", None)),
            Ok(())
        );
        assert_eq!(
            check_storage_change(&storage("1Gi", None), &storage("1024Mi", None)),
            Ok(())
        );
        assert_eq!(
            check_storage_change(&storage("1Gi", None), &storage("2Gi", None)),
            Ok(())
        );
        assert_eq!(
            check_storage_change(&storage("8Gi", None), &storage("4Gi", None))
                .unwrap_err()
                .to_string(),
            "spec.storage.size: cannot shrink member volumes from 8Gi to 4Gi"
        );
        assert_eq!(
            check_storage_change(&storage("1Gi", Some("fast")), &storage("1Gi", Some("slow")))
                .unwrap_err()
                .field,
            "spec.storage.storageClassName"
        );
        assert_eq!(
            check_storage_change(&storage("1Gi", None), &storage("lots", None))
                .unwrap_err()
                .to_string(),
            "spec.storage.size: \"lots\" is not a valid quantity"
        );
    }

    #[test]
    fn cluster_spec_reports_every_problem() {
        let spec = EtcdClusterSpec {
            repository: "r".into(),
            storage: storage("0", None),
            ..EtcdClusterSpec::new(9, "3.3.0")
        };
        let errors: Vec<String> = validate_cluster_spec(&spec)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "spec.size: 9 is outside 1..7",
                "spec.version: etcd 3.3.0 is not supported; supported minor versions: 3.4, 3.5, 3.6, 3.7 (3.4-3.7)",
                "spec.storage.size: must be larger than 0",
            ]
        );
        let good = EtcdClusterSpec {
            size: 3,
            version: DEFAULT_VERSION.into(),
            storage: storage("1Gi", None),
            ..spec
        };
        assert_eq!(validate_cluster_spec(&good), Ok(()));
        // A defragmentation schedule out of range is refused naming the field.
        let bad_window = EtcdClusterSpec {
            maintenance: Some(crate::MaintenanceSpec {
                defrag: Some(crate::DefragSpec {
                    schedule: Some("60 2 * * *".into()),
                    ..crate::DefragSpec::default()
                }),
                compact_on_no_space: false,
            }),
            ..good.clone()
        };
        let errors: Vec<String> = validate_cluster_spec(&bad_window)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "spec.maintenance.defrag.schedule: \"60 2 * * *\" is not a cron schedule: minute: 60 is outside 0-59"
            ]
        );
    }
}
