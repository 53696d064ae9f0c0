//! Bearer tokens for ServiceAccounts (spec §a1): opaque random strings that the server records
//! (a SHA-256 of each under `/localkube/tokens/`, never the token itself), issued through the
//! TokenRequest subresource `serviceaccounts/<sa>/token`. JWTs are not needed: clients treat
//! tokens as opaque.

use axum::http::HeaderMap;
use base64::Engine;
use rand::RngCore;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::api::status::ApiError;
use crate::api::{Shared, User, objects};

const TOKEN_PREFIX: &str = "/localkube/tokens/";
/// TokenRequest's default lifetime (one hour), as kube-apiserver grants.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

fn token_key(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    format!(
        "{TOKEN_PREFIX}{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// The user a bearer token names; `Ok(None)` without an Authorization header, 401 for a token
/// the server did not issue (or that expired).
pub async fn bearer_user(server: &Shared, headers: &HeaderMap) -> Result<Option<User>, ApiError> {
    let Some(value) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    let Some(token) = value
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
    else {
        return Ok(None);
    };
    let stored = server
        .store
        .get(&token_key(token))
        .await
        .map_err(ApiError::internal)?;
    let Some(stored) = stored else {
        return Err(ApiError::unauthorized());
    };
    let record = &stored.object;
    if let Some(exp) = record["expirationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        && exp < jiff::Timestamp::now()
    {
        return Err(ApiError::unauthorized());
    }
    let ns = record["namespace"].as_str().unwrap_or("");
    let sa = record["serviceAccount"].as_str().unwrap_or("");
    Ok(Some(User {
        name: format!("system:serviceaccount:{ns}:{sa}"),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
    }))
}

/// Issue a token for an existing ServiceAccount and answer the TokenRequest.
pub async fn token_request(
    server: &Shared,
    ns: &str,
    sa: &str,
    request: &Value,
) -> Result<Value, ApiError> {
    let sa_type = server
        .registry
        .get("", "v1", "serviceaccounts")
        .ok_or_else(ApiError::no_such_resource)?;
    let account = server
        .store
        .get(&sa_type.key(Some(ns), sa))
        .await
        .map_err(ApiError::internal)?;
    let account = account.ok_or_else(|| ApiError::not_found(&sa_type.group_resource(), sa))?;
    let seconds = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS)
        .max(600);
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let expiration = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let record = json!({
        "namespace": ns,
        "serviceAccount": sa,
        "uid": objects::meta_str(&account.object, "uid").unwrap_or(""),
        "expirationTimestamp": expiration,
    });
    server
        .store
        .create(&token_key(&token), &record, None)
        .await
        .map_err(ApiError::internal)?;
    let mut response = request.clone();
    response["apiVersion"] = json!("authentication.k8s.io/v1");
    response["kind"] = json!("TokenRequest");
    let m = objects::meta_mut(&mut response);
    m.insert("name".into(), json!(sa));
    m.insert("namespace".into(), json!(ns));
    m.insert("creationTimestamp".into(), json!(objects::now_rfc3339()));
    response["spec"]["expirationSeconds"] = json!(seconds);
    if response["spec"].get("audiences").is_none() {
        response["spec"]["audiences"] = json!(["https://kubernetes.default.svc.cluster.local"]);
    }
    response["status"] = json!({ "token": token, "expirationTimestamp": expiration });
    Ok(response)
}
