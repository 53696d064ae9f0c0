//! The Kubernetes REST API over etcd: routing, authentication, authorization, and the handlers.

pub mod body;
pub mod compaction;
pub mod discovery;
pub mod handlers;
pub mod objects;
pub mod request;
pub mod resources;
pub mod status;
pub mod watch;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Uri};
use bytes::Bytes;
use serde_json::Value;

use crate::store::Store;
use request::Target;
use resources::Registry;
use status::ApiError;

/// Who is asking: from the client certificate or a bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// Shared state of the API server.
pub struct ApiServer {
    pub store: Store,
    pub registry: Registry,
    /// `gitVersion` reported by /version.
    pub version: String,
    /// Whether pods must name an existing ServiceAccount and get its token volume (the
    /// `ServiceAccount` admission plugin). Off with `--api-only`, where no controller creates
    /// ServiceAccounts, as envtest does.
    pub service_account_admission: bool,
    /// Where ClusterIPs come from.
    pub service_cidr: crate::services::ServiceCidr,
    /// Where the node agent writes container logs (`None` without a node agent).
    pub logs_dir: Option<std::path::PathBuf>,
}

pub type Shared = Arc<ApiServer>;

pub fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub fn error_response(err: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(code, &err.to_status());
    if let Some(secs) = err.retry_after_seconds
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, v);
    }
    resp
}

fn text_response(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut resp = Response::new(Body::from(text));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Every request enters here (after TLS and authentication).
pub async fn dispatch(
    server: Shared,
    user: Option<User>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let query = request::parse_query(uri.query());
    let path = uri.path();
    let target = request::parse(method.as_str(), path, &query);
    let Some(user) = user else {
        // Health and version are public (system:public-info-viewer binds system:unauthenticated).
        if let Target::NonResource(p) = &target
            && matches!(
                p.trim_end_matches('/'),
                "/healthz" | "/livez" | "/readyz" | "/version"
            )
        {
            let anonymous = User {
                name: "system:anonymous".into(),
                groups: vec!["system:masters".into()],
            };
            return non_resource(&server, &anonymous, &method, p, &headers).await;
        }
        return error_response(&ApiError::unauthorized());
    };
    if !matches!(target, Target::Resource(_)) {
        let verb = if method == Method::GET || method == Method::HEAD {
            "get"
        } else {
            "post"
        };
        if let Err(e) = crate::authz::authorize_path(&server, &user, verb, path).await {
            return error_response(&e);
        }
    }
    tracing::debug!(user = %user.name, %method, %uri, "request");
    let result = match target {
        Target::NonResource(path) => {
            return non_resource(&server, &user, &method, &path, &headers).await;
        }
        Target::DiscoveryRoot { legacy } => Ok(discovery::root(&server, legacy)),
        Target::DiscoveryGroup { group } => discovery::group(&server, &group),
        Target::DiscoveryGroupVersion { group, version } => {
            discovery::group_version(&server, &group, &version)
        }
        Target::Resource(req) => {
            handlers::handle(&server, &user, &method, req, &query, &headers, body).await
        }
    };
    match result {
        Ok(resp) => resp,
        Err(err) => {
            if err.code >= 500 {
                tracing::warn!(%method, %uri, error = %err, "request failed");
            }
            error_response(&err)
        }
    }
}

async fn non_resource(
    server: &Shared,
    _user: &User,
    method: &Method,
    path: &str,
    _headers: &HeaderMap,
) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        return error_response(&ApiError::method_not_allowed());
    }
    match path.trim_end_matches('/') {
        "/healthz" | "/livez" | "/readyz" => match server.store.current_revision().await {
            Ok(_) => text_response(StatusCode::OK, "ok"),
            Err(_) => text_response(StatusCode::INTERNAL_SERVER_ERROR, "etcd failed"),
        },
        "/version" => json_response(StatusCode::OK, &discovery::version(&server.version)),
        "/openapi/v3" => json_response(StatusCode::OK, &discovery::openapi_index(server)),
        p if p.starts_with("/openapi/v3/") => {
            match discovery::openapi_group_version(server, &p["/openapi/v3/".len()..]) {
                Some(doc) => json_response(StatusCode::OK, &doc),
                None => error_response(&ApiError::no_such_resource()),
            }
        }
        _ => error_response(&ApiError::no_such_resource()),
    }
}

/// Parsed query parameters.
pub type Query = HashMap<String, String>;

impl ApiServer {
    /// An object as clients see it (read-time defaults of custom resources).
    pub fn present(&self, rt: &resources::ResourceType, obj: Value) -> Value {
        crate::strategy::present(rt, obj)
    }
}
