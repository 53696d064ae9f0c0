//! The two entry points the server calls, reproducing kube-apiserver's field manager chain
//! (`managedfields/internal/fieldmanager.go` `NewDefaultFieldManager`): managedFields decoding,
//! the `before-first-apply` manager, timestamps, stripping of identity metadata, the cap of ten
//! update managers, and kubectl's client-side-apply upgrade.

use serde_json::{Map, Value, json};

use crate::conflict::ApplyConflict;
use crate::error::ApplyError;
use crate::fieldset::FieldSet;
use crate::gojson::{self, Flavor};
use crate::managed::{Managed, ManagerId, Operation, Owned};
use crate::path::field;
use crate::schema::{Schema, with_object_meta};
use crate::typed::Typed;
use crate::updater::{Conflicts, Refused, Updater};

/// The annotation kubectl client-side apply keeps its last applied configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// kube-apiserver's limit on the total size of an object's annotations.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The most `Update` managers kept before the oldest merge into `ancient-changes`.
const MAX_UPDATE_MANAGERS: usize = 10;

/// One write: who makes it, through which endpoint, and the type it writes.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    /// The `fieldManager` parameter (kubectl: `kubectl-client-side-apply`, `kubectl`, helm:
    /// `helm`); when it is empty the apiserver uses the user agent's program name, and this
    /// engine `unknown`.
    pub manager: &'a str,
    /// The endpoint's group/version, e.g. `apps/v1` or `v1`.
    pub api_version: &'a str,
    /// `""` for the resource itself, `"status"` (or `"scale"`) for a subresource.
    pub subresource: &'a str,
    /// Fields this endpoint resets (the strategy's `GetResetFields`): `.status` on the main
    /// endpoint of a kind with a status subresource, `.spec` (and for some kinds metadata
    /// fields) on `/status`. They are neither owned nor taken through this endpoint; restoring
    /// their values in the object stays the caller's job.
    pub reset_fields: &'a FieldSet,
    /// The kind's merge semantics; `metadata` is handled by the engine.
    pub schema: &'a dyn Schema,
    /// The current time, RFC 3339 at second precision (`2024-05-01T10:00:00Z`).
    pub now: &'a str,
}

/// The paths no manager ever owns (`stripmeta.go`).
fn strip_set() -> FieldSet {
    let meta = [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ];
    let mut set = FieldSet::new();
    for top in ["apiVersion", "kind", "metadata"] {
        set.insert(&[field(top)]);
    }
    for name in meta {
        set.insert(&[field("metadata"), field(name)]);
    }
    set
}

fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut copy = obj.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    copy
}

fn set_managed_fields(obj: &mut Value, managed: &Managed) {
    let encoded = managed.encode();
    let Value::Object(root) = obj else { return };
    match encoded {
        Some(list) => {
            let meta = root
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert("managedFields".into(), list);
            }
        }
        None => {
            if let Some(Value::Object(meta)) = root.get_mut("metadata") {
                meta.remove("managedFields");
            }
        }
    }
}

struct Engine<'r> {
    req: &'r Request<'r>,
    schema: &'r dyn Schema,
}

impl<'r> Engine<'r> {
    fn updater(&self) -> Updater<'_> {
        Updater {
            typed: Typed {
                schema: self.schema,
            },
            reset: self.req.reset_fields,
            api_version: self.req.api_version,
        }
    }

    fn id(&self, manager: &str, operation: Operation) -> ManagerId {
        ManagerId::new(
            manager,
            operation,
            self.req.api_version,
            self.req.subresource,
        )
    }

    /// The Update half of the chain (`managedFieldsUpdater`, `stripMeta`, `capManagers`): `id`
    /// gains what changed from `live` to `new`, merged with what it owned before, and its time
    /// moves to now if it gained anything.
    fn record(
        &self,
        live: &Value,
        new: &Value,
        managed: &mut Managed,
        id: &ManagerId,
    ) -> Result<(), ApplyError> {
        // Identity fields are stripped before deciding whether the writer gained anything, so a
        // write that only bumps resourceVersion or generation leaves no trace.
        let gained = self
            .updater()
            .update_fields(live, new, managed)?
            .difference(&strip_set());
        let key = id.key();
        if !gained.is_empty() {
            let set = match managed.set_of(&key) {
                Some(previous) => gained.union(previous),
                None => gained,
            };
            managed.fields.insert(
                key.clone(),
                Owned {
                    id: id.clone(),
                    set,
                    api_version: self.req.api_version.to_string(),
                },
            );
            managed.times.insert(key, self.req.now.to_string());
        }
        cap_update_managers(managed);
        Ok(())
    }

    /// The apply half of the chain below kubectl's last-applied handling.
    fn apply_once(
        &self,
        live: &Value,
        applied: &Value,
        mut managed: Managed,
        force: bool,
    ) -> Result<(Value, Managed), Refused> {
        let mut live = live.clone();
        if managed.fields.is_empty() {
            // skipNonAppliedManager: whatever is there already belongs to `before-first-apply`.
            let mut empty = Map::new();
            for k in ["apiVersion", "kind"] {
                if let Some(v) = live.get(k) {
                    empty.insert(k.into(), v.clone());
                }
            }
            let id = self.id("before-first-apply", Operation::Update);
            self.record(&Value::Object(empty), &live, &mut managed, &id)?;
        }
        let id = self.id(self.req.manager, Operation::Apply);
        let key = id.key();
        let changed = self
            .updater()
            .apply(&live, applied, &mut managed, &id, force)?;
        if let Some(new) = changed {
            managed.times.insert(key.clone(), self.req.now.to_string());
            live = new;
        }
        strip_meta(&mut managed, &key);
        Ok((live, managed))
    }

    /// `lastAppliedManager`: `kubectl apply --server-side` may take over fields from
    /// client-side apply whose values still match the last-applied annotation.
    fn allowed_from_last_applied(&self, live: &Value) -> Option<FieldSet> {
        let text = metadata(live)?
            .get("annotations")?
            .get(LAST_APPLIED_ANNOTATION)?
            .as_str()
            .filter(|s| !s.is_empty())?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(self.req.api_version) {
            return None;
        }
        let typed = Typed {
            schema: self.schema,
        };
        typed.validate(&last, false).ok()?;
        let set = typed.to_field_set(&last).ok()?;
        let cmp = typed.compare(&last, live).ok()?;
        Some(
            set.difference(&cmp.modified)
                .difference(&cmp.added)
                .difference(&cmp.removed),
        )
    }
}

/// Drops the identity fields from `key`'s set, and the manager if nothing is left.
fn strip_meta(managed: &mut Managed, key: &str) {
    if let Some(owned) = managed.fields.get_mut(key) {
        owned.set = owned.set.difference(&strip_set());
    }
    managed.drop_empty();
}

/// `capManagersManager`: beyond ten `Update` managers, the oldest are merged per API version
/// into an `ancient-changes` manager.
fn cap_update_managers(managed: &mut Managed) {
    let mut updaters: Vec<String> = managed
        .fields
        .iter()
        .filter(|(_, o)| o.id.operation == Operation::Update)
        .map(|(k, _)| k.clone())
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    let seconds = |k: &String| {
        managed
            .times
            .get(k)
            .map_or(0, |t| crate::managed::unix_seconds(t))
    };
    updaters.sort_by(|a, b| seconds(a).cmp(&seconds(b)).then_with(|| a.cmp(b)));
    let mut first_of_version: std::collections::BTreeMap<String, String> = Default::default();
    let mut remaining = updaters.len();
    for key in updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(owned) = managed.fields.get(&key).cloned() else {
            continue;
        };
        let version = owned.api_version.clone();
        let bucket_id = ManagerId::new("ancient-changes", Operation::Update, &version, "");
        let bucket = bucket_id.key();
        let Some(first) = first_of_version.get(&version).cloned() else {
            first_of_version.insert(version, key);
            continue;
        };
        if !managed.fields.contains_key(&bucket)
            && let Some(mut moved) = managed.fields.remove(&first)
        {
            moved.id = bucket_id.clone();
            managed.fields.insert(bucket.clone(), moved);
        }
        let union = managed
            .set_of(&bucket)
            .map_or(owned.set.clone(), |b| owned.set.union(b));
        managed.fields.insert(
            bucket.clone(),
            Owned {
                id: bucket_id,
                set: union,
                api_version: version,
            },
        );
        managed.fields.remove(&key);
        remaining -= 1;
        match managed.times.get(&key).cloned() {
            Some(t) => managed.times.insert(bucket, t),
            None => managed.times.remove(&bucket),
        };
    }
}

/// Server-side apply (`PATCH` with `application/apply-patch+yaml`): merges `applied` into `live`
/// (`None` when the apply creates the object) and returns the new object with its
/// managedFields, or the 409 conflict naming the other managers. An apply that changes nothing
/// returns `live` (managedFields may still change: the caller skips the write if the bytes are
/// equal). `applied` must already be parsed from YAML and carry the endpoint's apiVersion/kind
/// (checked by the caller).
///
/// As in structured-merge-diff, fields the applier stops applying are removed when it alone
/// owned them, and a map emptied that way is left as `null` (kube-apiserver's typed conversion
/// then drops such nulls; for custom resources the caller may do the same).
pub fn apply(
    req: &Request<'_>,
    live: Option<&Value>,
    applied: &Value,
    force: bool,
) -> Result<Value, ApplyError> {
    if !applied.is_object() {
        return Err(ApplyError::BadRequest(
            "apply patch must be an object".into(),
        ));
    }
    if metadata(applied)
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    let empty = json!({});
    let live = live.unwrap_or(&empty);
    let managed = Managed::decode(metadata(live).and_then(|m| m.get("managedFields")))
        .map_err(ApplyError::ManagedFields)?;
    let live_bare = without_managed_fields(live);
    let schema = with_object_meta(req.schema);
    let engine = Engine {
        req,
        schema: &schema,
    };

    let outcome = match engine.apply_once(&live_bare, applied, managed.clone(), force) {
        Err(Refused::Conflicts(conflicts)) if req.manager == "kubectl" => {
            match engine.allowed_from_last_applied(&live_bare) {
                Some(allowed) => {
                    let rest: Conflicts = conflicts
                        .into_iter()
                        .filter_map(|(k, (id, set))| {
                            let left: Vec<_> = set
                                .paths()
                                .into_iter()
                                .filter(|p| !allowed.has(p))
                                .collect();
                            (!left.is_empty()).then(|| {
                                (
                                    k,
                                    (id, FieldSet::from_paths(left.iter().map(Vec::as_slice))),
                                )
                            })
                        })
                        .collect();
                    if rest.is_empty() {
                        engine.apply_once(&live_bare, applied, managed, true)
                    } else {
                        Err(Refused::Conflicts(rest))
                    }
                }
                None => Err(Refused::Conflicts(conflicts)),
            }
        }
        other => other,
    };
    let (mut object, managed) = match outcome {
        Ok(done) => done,
        Err(Refused::Conflicts(c)) => return Err(ApplyError::Conflict(ApplyConflict::new(&c))),
        Err(Refused::Error(e)) => return Err(e),
    };
    if req.manager == "kubectl" {
        update_last_applied(&mut object, applied);
    }
    set_managed_fields(&mut object, &managed);
    Ok(object)
}

/// `lastAppliedUpdater`: when kubectl applies server-side to an object that still carries the
/// client-side annotation, the annotation follows the applied configuration.
fn update_last_applied(object: &mut Value, applied: &Value) {
    let Some(annotations) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if annotations
        .get(LAST_APPLIED_ANNOTATION)
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return;
    }
    let mut config = applied.clone();
    if let Some(a) = config
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED_ANNOTATION);
    }
    let mut text = String::new();
    gojson::write_value(&mut text, &config, Flavor::Std);
    text.push('\n');
    annotations.insert(LAST_APPLIED_ANNOTATION.into(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

/// Whether a request's managedFields ask to reset tracking (`[]` or `[{}]`).
fn is_reset(list: Option<&Value>) -> bool {
    match list.and_then(Value::as_array).map(Vec::as_slice) {
        Some([]) => true,
        Some([Value::Object(only)]) => only.is_empty(),
        _ => false,
    }
}

/// Records a non-apply write (create, update, JSON/merge/strategic patch) in `new`'s
/// managedFields: the writer becomes an `Update` manager of every field it changed, and other
/// managers lose those fields, so that a later apply conflicts with them.
///
/// `old` is `None` on create. For a built-in kind the caller may instead pass the kind's zero
/// object as Go serializes it (a Pod's is
/// `{"metadata":{"creationTimestamp":null},"spec":{"containers":null},"status":{}}`) to get
/// kube-apiserver's exact sets, which omit `".":{}` under fields that zero object already has.
///
/// Like kube-apiserver's `UpdateNoErrors`, this never fails: on an internal error the old
/// managedFields are kept. managedFields sent in `new` replace the stored ones (clients may
/// edit them, as helm's client-side-apply upgrade does); `[]` clears them; on a subresource
/// they are ignored. An existing object without managedFields is not tracked.
pub fn record_update(req: &Request<'_>, old: Option<&Value>, new: &Value) -> Value {
    let empty = json!({});
    let old = old.unwrap_or(&empty);
    let decode = |obj: &Value| Managed::decode(metadata(obj).and_then(|m| m.get("managedFields")));
    let from_old = || decode(old).unwrap_or_default();
    let mut managed = if !req.subresource.is_empty() {
        from_old()
    } else {
        let sent = metadata(new).and_then(|m| m.get("managedFields"));
        if is_reset(sent) {
            Managed::default()
        } else {
            match decode(new) {
                Ok(m) if !m.fields.is_empty() => m,
                _ => from_old(),
            }
        }
    };
    let mut object = without_managed_fields(new);
    let is_create = metadata(old)
        .and_then(|m| m.get("uid"))
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if managed.fields.is_empty() && !is_create {
        return object;
    }
    let schema = with_object_meta(req.schema);
    let engine = Engine {
        req,
        schema: &schema,
    };
    let id = engine.id(req.manager, Operation::Update);
    let old_bare = without_managed_fields(old);
    match engine.record(&old_bare, &object, &mut managed, &id) {
        Ok(()) => set_managed_fields(&mut object, &managed),
        Err(_) => {
            if let (Some(list), Some(Value::Object(meta))) = (
                metadata(old).and_then(|m| m.get("managedFields")),
                object.get_mut("metadata"),
            ) {
                meta.insert("managedFields".into(), list.clone());
            }
        }
    }
    object
}

/// One decoded managedFields entry, for inspection.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedFieldsEntry {
    /// The field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: Operation,
    /// The API version the fields are expressed in.
    pub api_version: String,
    /// `""` or the subresource written through.
    pub subresource: String,
    /// When the manager last changed the object, if recorded.
    pub time: Option<String>,
    /// The fields it owns.
    pub fields: FieldSet,
}

/// Reads an object's managedFields (what `kubectl get --show-managed-fields` shows), in stored
/// order.
pub fn managed_fields(obj: &Value) -> Result<Vec<ManagedFieldsEntry>, ApplyError> {
    let list = metadata(obj).and_then(|m| m.get("managedFields"));
    // Validates the whole list (errors name the entry's index), then reads it in order.
    Managed::decode(list).map_err(ApplyError::ManagedFields)?;
    let Some(Value::Array(entries)) = list else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries {
        let single = Managed::decode(Some(&Value::Array(vec![entry.clone()])))
            .map_err(ApplyError::ManagedFields)?;
        for (key, owned) in single.fields {
            out.push(ManagedFieldsEntry {
                manager: owned.id.manager,
                operation: owned.id.operation,
                api_version: owned.api_version,
                subresource: owned.id.subresource,
                time: single.times.get(&key).cloned(),
                fields: owned.set,
            });
        }
    }
    Ok(out)
}
