//! The S3 connection, built and judged in one place for every operator: a client from the
//! connection settings (endpoint, region, path style) and either static credentials (read from
//! a Secret by [`crate::credentials`]) or the ambient AWS chain, and S3 errors sorted into the
//! few kinds the operators report and retry by.

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::credentials::S3Credentials;

/// Where an S3 store is and how to address it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct S3Endpoint<'a> {
    /// Endpoint URL of an S3-compatible store; `None` for AWS.
    pub endpoint: Option<&'a str>,
    /// Region to sign for.
    pub region: &'a str,
    /// Path-style bucket addressing.
    pub force_path_style: bool,
}

/// An S3 client for `endpoint`. With static `credentials` nothing is read from the environment;
/// without, the ambient AWS chain is used (environment variables, as the restore's seed Pod gets
/// them from the credentials Secret, a profile, web identity/IRSA, instance metadata).
pub async fn client(
    endpoint: S3Endpoint<'_>,
    credentials: Option<&S3Credentials>,
) -> aws_sdk_s3::Client {
    let region = Region::new(endpoint.region.to_owned());
    let mut builder = match credentials {
        Some(c) => aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(region)
            .credentials_provider(Credentials::new(
                c.access_key_id.clone(),
                c.secret_access_key.clone(),
                c.session_token.clone(),
                None,
                "etcd-operator-credentials-secret",
            )),
        None => {
            let shared = aws_config::defaults(BehaviorVersion::latest())
                .region(region)
                .load()
                .await;
            aws_sdk_s3::config::Builder::from(&shared)
        }
    };
    if let Some(url) = endpoint.endpoint {
        builder = builder.endpoint_url(url);
    }
    aws_sdk_s3::Client::from_conf(builder.force_path_style(endpoint.force_path_style).build())
}

/// What kind of failure an S3 call ended in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum S3ErrorKind {
    /// No answer, or a server error: connection refused or reset, a timeout, a 5xx. May pass.
    Unavailable,
    /// The bucket does not exist (`NoSuchBucket`).
    BucketNotFound,
    /// The object does not exist (`NoSuchKey`, or a bare 404).
    ObjectNotFound,
    /// The credentials were refused (`InvalidAccessKeyId`, `SignatureDoesNotMatch`,
    /// `AccessDenied`, or a bare 403).
    CredentialsRejected,
    /// Anything else.
    Other,
}

/// Sorts an SDK error into its [`S3ErrorKind`], with the SDK's full description of it.
pub fn classify<E>(err: &SdkError<E>) -> (S3ErrorKind, String)
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let detail = DisplayErrorContext(err).to_string();
    let kind = match err {
        SdkError::TimeoutError(_) => S3ErrorKind::Unavailable,
        // No answer came back, whatever the connector calls it: a refused or reset connection,
        // or one closed before the response (the store killed under a request is `Other` to
        // the connector, seen by the issue 18 fault suite).
        SdkError::DispatchFailure(_) => S3ErrorKind::Unavailable,
        _ => {
            let status = err.raw_response().map(|r| r.status().as_u16());
            match (err.code(), status) {
                (Some("NoSuchKey"), _) | (None, Some(404)) => S3ErrorKind::ObjectNotFound,
                (Some("NoSuchBucket"), _) => S3ErrorKind::BucketNotFound,
                (Some("InvalidAccessKeyId" | "SignatureDoesNotMatch" | "AccessDenied"), _)
                | (None, Some(403)) => S3ErrorKind::CredentialsRejected,
                (_, Some(500..=599)) => S3ErrorKind::Unavailable,
                _ => S3ErrorKind::Other,
            }
        }
    };
    (kind, detail)
}
