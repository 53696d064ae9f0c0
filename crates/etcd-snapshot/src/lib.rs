//! The streaming core of the backup (and restore) operators, and their only S3 adapter.
//!
//! - [`verify`]: incremental verification of the SHA-256 trailer etcd appends to a snapshot, and
//!   the SHA-256 of the whole object (pure).
//! - [`key`]: object keys `<prefix><cluster>/<YYYYMMDDTHHMMSSZ>-rev<revision>-<uid>.db` and their
//!   parser, for retention sorted by time then revision (pure).
//! - [`upload`]: [`stream_to_s3`], a snapshot stream straight into an S3 multipart upload with
//!   bounded memory, completed only if the trailer verifies, aborted on any failure, never
//!   overwriting an object.
//! - [`etcd`]: [`snapshot_stream`], etcd's `Maintenance.Snapshot` as a stream of chunks.
//! - [`s3`]: the one S3 adapter's connection side, for the backup and the restore alike: the
//!   client built from the connection settings and credentials, and S3 errors classified.
//! - [`credentials`]: static S3 credentials read from a Kubernetes Secret (pure).
//!
//! ```no_run
//! # async fn example(etcd: &mut etcd_client::Client, s3: &aws_sdk_s3::Client)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use etcd_snapshot::{DEFAULT_PART_SIZE, SnapshotKey, snapshot_stream, stream_to_s3};
//! let revision = etcd.status().await?.header().map_or(0, |h| h.revision());
//! let key = SnapshotKey::new(std::time::SystemTime::now(), revision as u64, "backup-uid")
//!     .object_key("etcd/", "my-cluster");
//! let source = snapshot_stream(etcd).await?;
//! let artifact = stream_to_s3(s3, "backups", &key, Default::default(), source, DEFAULT_PART_SIZE).await?;
//! println!("{} {} bytes sha256 {}", artifact.uri, artifact.size_bytes, artifact.sha256);
//! # Ok(())
//! # }
//! ```

pub mod credentials;
pub mod etcd;
pub mod key;
pub mod s3;
pub mod upload;
pub mod verify;

pub use etcd::{SnapshotChunk, snapshot_stream};
pub use key::{KeyParseError, SnapshotKey};
pub use upload::{
    Artifact, DEFAULT_PART_SIZE, MIN_PART_SIZE, PARTS_IN_FLIGHT, UploadError, UploadTiming,
    stream_to_s3,
};
pub use verify::{TrailerVerifier, Verified, VerifyError};
