//! Objects in etcd exactly as kube-apiserver keeps them (`k8s.io/apiserver/pkg/storage/etcd3`):
//! one key per object, JSON values without `resourceVersion`, the resourceVersion being the key's
//! etcd mod revision, and every write a transaction guarded by the revision it was computed from.

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("key already exists")]
    AlreadyExists,
    #[error("the object changed since it was read")]
    Conflict,
    #[error("key not found")]
    NotFound,
    #[error("revision {requested} has been compacted (compacted up to {compacted})")]
    Compacted { requested: i64, compacted: i64 },
    #[error("revision {0} is in the future")]
    FutureRevision(i64),
    #[error("stored value of {key} is not a JSON object: {reason}")]
    Corrupt { key: String, reason: String },
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
}

/// An object read from etcd, `metadata.resourceVersion` already set from the mod revision.
#[derive(Debug, Clone)]
pub struct Stored {
    pub key: String,
    pub object: Value,
    pub mod_revision: i64,
    pub create_revision: i64,
}

/// One page of a range read at a fixed revision.
#[derive(Debug)]
pub struct Page {
    pub items: Vec<Stored>,
    /// The revision the page was read at (the list's resourceVersion).
    pub revision: i64,
    /// More keys follow the last item.
    pub more: bool,
    /// Keys after this page, when etcd counted them.
    pub remaining: i64,
}

#[derive(Clone)]
pub struct Store {
    client: Client,
}

/// The end of the key range that covers every key starting with `prefix`.
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Decode a stored value and set `metadata.resourceVersion`.
pub fn decode(key: &[u8], value: &[u8], mod_revision: i64) -> Result<Value, StoreError> {
    let key_text = String::from_utf8_lossy(key).into_owned();
    let mut object: Value = serde_json::from_slice(value).map_err(|e| StoreError::Corrupt {
        key: key_text.clone(),
        reason: e.to_string(),
    })?;
    let Some(map) = object.as_object_mut() else {
        return Err(StoreError::Corrupt {
            key: key_text,
            reason: "not an object".into(),
        });
    };
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(meta) = metadata.as_object_mut() {
        meta.insert(
            "resourceVersion".into(),
            Value::String(mod_revision.to_string()),
        );
    }
    Ok(object)
}

/// The bytes stored for an object: the object without `metadata.resourceVersion`.
pub fn encode(object: &Value) -> Vec<u8> {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    // Serializing a Value cannot fail.
    serde_json::to_vec(&copy).unwrap_or_default()
}

fn classify(err: etcd_client::Error, requested: i64) -> StoreError {
    let text = err.to_string();
    if text.contains("required revision has been compacted") {
        StoreError::Compacted {
            requested,
            compacted: 0,
        }
    } else if text.contains("required revision is a future revision") {
        StoreError::FutureRevision(requested)
    } else {
        StoreError::Etcd(err)
    }
}

impl Store {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The current etcd revision (a linearizable read).
    pub async fn current_revision(&self) -> Result<i64, StoreError> {
        let resp = self
            .client
            .kv_client()
            .get(
                "/registry/",
                Some(GetOptions::new().with_count_only().with_limit(1)),
            )
            .await?;
        Ok(resp.header().map(|h| h.revision()).unwrap_or(0))
    }

    pub async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        self.get_at(key, 0).await
    }

    /// Read one key at `revision` (0 = latest).
    pub async fn get_at(&self, key: &str, revision: i64) -> Result<Option<Stored>, StoreError> {
        let mut options = GetOptions::new();
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let resp = self
            .client
            .kv_client()
            .get(key, Some(options))
            .await
            .map_err(|e| classify(e, revision))?;
        match resp.kvs().first() {
            None => Ok(None),
            Some(kv) => Ok(Some(Stored {
                key: key.to_string(),
                object: decode(kv.key(), kv.value(), kv.mod_revision())?,
                mod_revision: kv.mod_revision(),
                create_revision: kv.create_revision(),
            })),
        }
    }

    /// Read up to `limit` keys (0 = all) under `prefix`, starting at `start` (inclusive; a key
    /// under the prefix) at `revision` (0 = latest).
    pub async fn list(
        &self,
        prefix: &str,
        start: Option<&str>,
        limit: i64,
        revision: i64,
    ) -> Result<Page, StoreError> {
        let from = start.unwrap_or(prefix);
        let mut options = GetOptions::new().with_range(prefix_end(prefix));
        if revision > 0 {
            options = options.with_revision(revision);
        }
        if limit > 0 {
            options = options.with_limit(limit);
        }
        let resp = self
            .client
            .kv_client()
            .get(from, Some(options))
            .await
            .map_err(|e| classify(e, revision))?;
        let header_revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut items = Vec::with_capacity(resp.kvs().len());
        for kv in resp.kvs() {
            items.push(Stored {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                object: decode(kv.key(), kv.value(), kv.mod_revision())?,
                mod_revision: kv.mod_revision(),
                create_revision: kv.create_revision(),
            });
        }
        let remaining = resp.count() - items.len() as i64;
        Ok(Page {
            items,
            revision: if revision > 0 {
                revision
            } else {
                header_revision
            },
            more: resp.more(),
            remaining: remaining.max(0),
        })
    }

    /// Create: succeeds only if the key does not exist (mod_revision == 0).
    pub async fn create(
        &self,
        key: &str,
        object: &Value,
        lease: Option<i64>,
    ) -> Result<Stored, StoreError> {
        let mut put = PutOptions::new();
        if let Some(id) = lease {
            put = put.with_lease(id);
        }
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(key, CompareOp::Equal, 0)])
            .and_then(vec![TxnOp::put(key, encode(object), Some(put))]);
        let resp = self.client.kv_client().txn(txn).await?;
        if !resp.succeeded() {
            return Err(StoreError::AlreadyExists);
        }
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        Ok(self.written(key, object, revision, revision))
    }

    /// Update: succeeds only if the key is still at `expected_mod_revision`.
    pub async fn update(
        &self,
        key: &str,
        expected_mod_revision: i64,
        create_revision: i64,
        object: &Value,
    ) -> Result<Stored, StoreError> {
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(
                key,
                CompareOp::Equal,
                expected_mod_revision,
            )])
            .and_then(vec![TxnOp::put(key, encode(object), None)]);
        let resp = self.client.kv_client().txn(txn).await?;
        if !resp.succeeded() {
            return Err(StoreError::Conflict);
        }
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        Ok(self.written(key, object, revision, create_revision))
    }

    /// Delete: succeeds only if the key is still at `expected_mod_revision`; returns the
    /// revision of the deletion.
    pub async fn delete(&self, key: &str, expected_mod_revision: i64) -> Result<i64, StoreError> {
        let txn = Txn::new()
            .when(vec![Compare::mod_revision(
                key,
                CompareOp::Equal,
                expected_mod_revision,
            )])
            .and_then(vec![TxnOp::delete(key, None)]);
        let resp = self.client.kv_client().txn(txn).await?;
        if !resp.succeeded() {
            return Err(StoreError::Conflict);
        }
        let deleted = resp
            .op_responses()
            .iter()
            .any(|r| matches!(r, TxnOpResponse::Delete(d) if d.deleted() > 0));
        if !deleted {
            return Err(StoreError::NotFound);
        }
        Ok(resp.header().map(|h| h.revision()).unwrap_or(0))
    }

    fn written(&self, key: &str, object: &Value, revision: i64, create_revision: i64) -> Stored {
        let mut object = object.clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".into(),
                Value::String(revision.to_string()),
            );
        }
        Stored {
            key: key.to_string(),
            object,
            mod_revision: revision,
            create_revision,
        }
    }

    /// Compact etcd's history up to `revision` (physical, so the 410 paths are real at once).
    pub async fn compact(&self, revision: i64) -> Result<(), StoreError> {
        self.client
            .kv_client()
            .compact(
                revision,
                Some(etcd_client::CompactionOptions::new().with_physical()),
            )
            .await?;
        Ok(())
    }

    /// An etcd lease for objects with a TTL (events).
    pub async fn grant_lease(&self, ttl_seconds: i64) -> Result<i64, StoreError> {
        Ok(self
            .client
            .lease_client()
            .grant(ttl_seconds, None)
            .await?
            .id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_covers_the_prefix_only() {
        assert_eq!(
            prefix_end("/registry/pods/default/"),
            b"/registry/pods/default0".to_vec()
        );
    }

    #[test]
    fn resource_version_is_never_stored_and_always_read_from_the_revision() {
        let obj =
            serde_json::json!({"kind": "Pod", "metadata": {"name": "p", "resourceVersion": "7"}});
        let bytes = encode(&obj);
        assert!(!String::from_utf8_lossy(&bytes).contains("resourceVersion"));
        let back = decode(b"/registry/pods/default/p", &bytes, 42).unwrap();
        assert_eq!(back["metadata"]["resourceVersion"], "42");
    }
}
