//! Types the three resources share: object references and S3 locations.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// A reference to an object of a known kind in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
pub struct LocalObjectReference {
    /// Name of the object, in the namespace of the referring object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Where an S3-compatible object store is and how to authenticate to it.
///
/// Shared by backup destinations and restore sources, so a backup's settings can be copied into
/// a restore unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Connection {
    /// Bucket name (3-63 characters: lowercase letters, digits, dots and hyphens, starting and
    /// ending with a letter or digit). The bucket must exist; it is never created.
    #[schemars(
        length(min = 3, max = 63),
        regex(pattern = r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")
    )]
    #[x_kube(validation = kube::core::Rule::new("!self.contains('..')").message("bucket must not contain '..'"))]
    pub bucket: String,

    /// Endpoint URL of an S3-compatible store, e.g. `https://minio.storage:9000`. Empty means
    /// AWS S3 in `region`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = r"^https?://[^\s/]+(/[^\s]*)?$"))]
    pub endpoint: Option<String>,

    /// Region to sign requests for. Defaults to `us-east-1`, which S3-compatible stores accept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9-]+$"))]
    pub region: Option<String>,

    /// Address buckets as `endpoint/bucket/key` instead of `bucket.endpoint/key`. Most
    /// S3-compatible stores (MinIO, SeaweedFS, Ceph) need this.
    #[serde(default)]
    pub force_path_style: bool,

    /// Secret in the same namespace with the keys `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
    /// and optionally `AWS_SESSION_TOKEN`. When unset, the ambient AWS credential chain of the
    /// operator's Pod is used (IRSA, instance profile, environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<LocalObjectReference>,
}

/// Keys read from the S3 credentials Secret.
pub mod s3_secret_keys {
    /// Access key ID (required).
    pub const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
    /// Secret access key (required).
    pub const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
    /// Session token for temporary credentials (optional).
    pub const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";
}

/// The region used when an S3 connection names none.
pub const DEFAULT_S3_REGION: &str = "us-east-1";

impl S3Connection {
    /// The region to sign requests for.
    pub fn region_or_default(&self) -> &str {
        self.region.as_deref().unwrap_or(DEFAULT_S3_REGION)
    }
}
