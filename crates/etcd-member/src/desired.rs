//! The desired state of one EtcdCluster: its spec, validated once into the types the planner
//! decides with. Pure.
//!
//! The CRD schema already bounds `spec.size` and the version's form; this is the operator's own
//! check of the same (an object written before a schema change, or by a client that skipped
//! validation), done once, so the planner never converts raw fields again.

use etcd_api::EtcdClusterSpec;
use etcd_api::validation::{self, EtcdVersion, FieldError};

/// `spec.size`: the number of voting members asked for, 1 to 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClusterSize(u8);

impl ClusterSize {
    /// The largest size: seven voters survive three failures; more slow every write down.
    pub const MAX: u8 = 7;

    /// `spec.size`, if it is within 1 to [`ClusterSize::MAX`].
    pub fn new(size: i32) -> Result<Self, FieldError> {
        u8::try_from(size)
            .ok()
            .filter(|s| (1..=Self::MAX).contains(s))
            .map(Self)
            .ok_or_else(|| FieldError {
                field: "spec.size".into(),
                message: format!("{size} is outside 1..{}", Self::MAX),
            })
    }

    /// The voters asked for.
    pub fn voters(self) -> usize {
        usize::from(self.0)
    }
}

/// What the spec asks of the membership, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desired {
    /// `spec.size`.
    pub size: ClusterSize,
    /// `spec.version`.
    pub version: EtcdVersion,
}

impl Desired {
    /// Validates `spec` (every field error at once, as [`validation::validate_cluster_spec`]
    /// reports them) and keeps what the planner needs as types.
    pub fn from_spec(spec: &EtcdClusterSpec) -> Result<Self, Vec<FieldError>> {
        validation::validate_cluster_spec(spec)?;
        let size = ClusterSize::new(spec.size).map_err(|e| vec![e])?;
        let version = validation::validate_version(&spec.version).map_err(|e| vec![e])?;
        Ok(Self { size, version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_outside_one_to_seven_are_refused_naming_the_field() {
        for size in [i32::MIN, -1, 0, 8, 256, i32::MAX] {
            let error = ClusterSize::new(size).unwrap_err();
            assert_eq!(error.field, "spec.size", "{size}");
        }
        for size in 1..=7 {
            assert_eq!(ClusterSize::new(size).unwrap().voters(), size as usize);
        }
    }
}
