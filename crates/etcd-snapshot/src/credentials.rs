//! S3 credentials from a Kubernetes Secret (pure, no I/O: the executor fetches the Secret).
//!
//! The Secret holds `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and optionally
//! `AWS_SESSION_TOKEN` (the names the AWS CLI and SDKs read from the environment, so the same
//! Secret can also be mounted as env). Every error names the Secret and the key, because "access
//! denied" three layers later says nothing about which of them is wrong.

use std::collections::BTreeMap;
use std::fmt;

use etcd_api::common::s3_secret_keys;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

/// Static S3 credentials. `Debug` never prints the secret parts.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    /// Access key ID.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
    /// Session token of temporary credentials.
    pub session_token: Option<String>,
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Why the credentials could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// The Secret named by `spec.s3.credentialsSecretRef` does not exist.
    #[error("S3 credentials Secret {namespace}/{secret} not found")]
    SecretNotFound {
        /// Its namespace (the EtcdBackup's).
        namespace: String,
        /// Its name.
        secret: String,
    },
    /// A required key is absent from the Secret.
    #[error("S3 credentials Secret {namespace}/{secret} has no key {key}")]
    SecretKeyMissing {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret.
        secret: String,
        /// The missing key.
        key: &'static str,
    },
    /// A key is present but empty or not UTF-8.
    #[error("S3 credentials Secret {namespace}/{secret}: key {key} is {why}")]
    SecretKeyInvalid {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret.
        secret: String,
        /// The bad key.
        key: &'static str,
        /// `empty` or `not UTF-8`.
        why: &'static str,
    },
}

impl CredentialsError {
    /// PascalCase reason for status and events.
    pub fn reason(&self) -> &'static str {
        match self {
            CredentialsError::SecretNotFound { .. } => "SecretNotFound",
            CredentialsError::SecretKeyMissing { .. } => "SecretKeyMissing",
            CredentialsError::SecretKeyInvalid { .. } => "SecretKeyInvalid",
        }
    }
}

/// Reads the credentials out of `secret` (in `namespace`; used in messages).
pub fn credentials_from_secret(
    namespace: &str,
    secret: &Secret,
) -> Result<S3Credentials, CredentialsError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let read = |key: &'static str| -> Result<Option<String>, CredentialsError> {
        let Some(ByteString(bytes)) = data.get(key) else {
            return Ok(None);
        };
        let invalid = |why| CredentialsError::SecretKeyInvalid {
            namespace: namespace.to_owned(),
            secret: name.clone(),
            key,
            why,
        };
        let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8"))?;
        // A trailing newline is the classic `echo foo | base64` mistake; it is never part of a key.
        let text = text.trim();
        if text.is_empty() {
            return Err(invalid("empty"));
        }
        Ok(Some(text.to_owned()))
    };
    let required = |key: &'static str| -> Result<String, CredentialsError> {
        read(key)?.ok_or_else(|| CredentialsError::SecretKeyMissing {
            namespace: namespace.to_owned(),
            secret: name.clone(),
            key,
        })
    };
    Ok(S3Credentials {
        access_key_id: required(s3_secret_keys::ACCESS_KEY_ID)?,
        secret_access_key: required(s3_secret_keys::SECRET_ACCESS_KEY)?,
        session_token: read(s3_secret_keys::SESSION_TOKEN)?,
    })
}

/// Static credentials from the environment variables a Pod gets from the credentials Secret
/// (`valueFrom.secretKeyRef` passes the bytes as they are, a trailing newline included), read
/// by the rules of [`credentials_from_secret`] so that a Secret a backup can use works for a
/// restore too. `None` when either key is unset or blank: the ambient chain (web identity,
/// instance profile) applies. `var` is `std::env::var(..).ok()` outside tests.
pub fn credentials_from_env(var: impl Fn(&str) -> Option<String>) -> Option<S3Credentials> {
    let read = |key: &str| {
        var(key)
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    Some(S3Credentials {
        access_key_id: read(s3_secret_keys::ACCESS_KEY_ID)?,
        secret_access_key: read(s3_secret_keys::SECRET_ACCESS_KEY)?,
        session_token: read(s3_secret_keys::SESSION_TOKEN),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret(entries: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("s3-creds".into()),
                ..Default::default()
            },
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn reads_keys_and_optional_token() {
        let c = credentials_from_secret(
            "db",
            &secret(&[
                ("AWS_ACCESS_KEY_ID", b"AKIA1"),
                ("AWS_SECRET_ACCESS_KEY", b"s3cr3t\n"),
            ]),
        )
        .unwrap();
        assert_eq!(c.access_key_id, "AKIA1");
        assert_eq!(c.secret_access_key, "s3cr3t");
        assert_eq!(c.session_token, None);
        let c = credentials_from_secret(
            "db",
            &secret(&[
                ("AWS_ACCESS_KEY_ID", b"AKIA1"),
                ("AWS_SECRET_ACCESS_KEY", b"hunter2"),
                ("AWS_SESSION_TOKEN", b"sessiontok3n"),
            ]),
        )
        .unwrap();
        assert_eq!(c.session_token.as_deref(), Some("sessiontok3n"));
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("sessiontok3n") && !debug.contains("hunter2"),
            "{debug}"
        );
        assert!(debug.contains("AKIA1"), "{debug}");
    }

    #[test]
    fn errors_name_the_secret_and_the_key() {
        let cases: Vec<(Secret, &str, &str)> = vec![
            (
                secret(&[("AWS_SECRET_ACCESS_KEY", b"s")]),
                "SecretKeyMissing",
                "S3 credentials Secret db/s3-creds has no key AWS_ACCESS_KEY_ID",
            ),
            (
                secret(&[("AWS_ACCESS_KEY_ID", b"a")]),
                "SecretKeyMissing",
                "S3 credentials Secret db/s3-creds has no key AWS_SECRET_ACCESS_KEY",
            ),
            (
                Secret {
                    data: None,
                    ..secret(&[])
                },
                "SecretKeyMissing",
                "S3 credentials Secret db/s3-creds has no key AWS_ACCESS_KEY_ID",
            ),
            (
                secret(&[
                    ("AWS_ACCESS_KEY_ID", b" \n"),
                    ("AWS_SECRET_ACCESS_KEY", b"s"),
                ]),
                "SecretKeyInvalid",
                "S3 credentials Secret db/s3-creds: key AWS_ACCESS_KEY_ID is empty",
            ),
            (
                secret(&[
                    ("AWS_ACCESS_KEY_ID", b"a"),
                    ("AWS_SECRET_ACCESS_KEY", b"s"),
                    ("AWS_SESSION_TOKEN", &[0xff, 0xfe]),
                ]),
                "SecretKeyInvalid",
                "S3 credentials Secret db/s3-creds: key AWS_SESSION_TOKEN is not UTF-8",
            ),
        ];
        for (secret, reason, message) in cases {
            let err = credentials_from_secret("db", &secret).unwrap_err();
            assert_eq!(err.reason(), reason, "{err}");
            assert_eq!(err.to_string(), message);
        }
        let missing = CredentialsError::SecretNotFound {
            namespace: "db".into(),
            secret: "nope".into(),
        };
        assert_eq!(missing.reason(), "SecretNotFound");
        assert_eq!(
            missing.to_string(),
            "S3 credentials Secret db/nope not found"
        );
    }

    #[test]
    fn environment_credentials_are_read_as_the_secret_is() {
        let env = |entries: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                entries
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let creds = credentials_from_env(env(&[
            ("AWS_ACCESS_KEY_ID", "AKIA\n"),
            ("AWS_SECRET_ACCESS_KEY", " s3cr3t\n"),
        ]))
        .unwrap();
        assert_eq!(creds.access_key_id, "AKIA");
        assert_eq!(creds.secret_access_key, "s3cr3t");
        assert_eq!(creds.session_token, None);
        let with_token = credentials_from_env(env(&[
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SESSION_TOKEN", "t\n"),
        ]))
        .unwrap();
        assert_eq!(with_token.session_token.as_deref(), Some("t"));
        // Nothing set, or a key blank: the ambient chain, not half a credential.
        assert_eq!(credentials_from_env(env(&[])), None);
        assert_eq!(
            credentials_from_env(env(&[
                ("AWS_ACCESS_KEY_ID", "a"),
                ("AWS_SECRET_ACCESS_KEY", "\n")
            ])),
            None
        );
    }
}
