//! The server side of apimachinery's `strategicpatch.StrategicMergeMapPatch` (`mergeMap` with
//! `MergeParallelList` and `IgnoreUnmatchedNulls`), step by step.
//!
//! Besides the directives, the part clients notice is list order. Without
//! `$setElementOrder`, a merged list puts patch items in patch order and slots each
//! server-only item before the first patch item that followed it in the live list; an item
//! that is new to the list therefore lands *before* the server-only items (kubectl's own docs
//! show `kubectl patch` adding a container in front). With `$setElementOrder`, the patch items
//! follow that list instead.

use serde_json::{Map, Value};

use super::schema::{FieldMeta, Node};
use super::{DELETE_FROM_PRIMITIVE_LIST, DIRECTIVE, RETAIN_KEYS, SET_ELEMENT_ORDER};
use crate::error::{PatchError, panics};
use crate::go::{self, GoType};

type Object = Map<String, Value>;
type Result<T> = std::result::Result<T, PatchError>;

static NIL: Value = Value::Null;

/// `mergeMap`: merges `patch` into `original` under the struct tags of `schema`.
pub(crate) fn merge_map(mut original: Object, mut patch: Object, schema: Node) -> Result<Object> {
    if let Some(directive) = patch.get(DIRECTIVE).cloned() {
        return match directive.as_str() {
            // The patch map, nulls and nested directives included, replaces the original.
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Object::new()),
            _ => Err(bad_patch_type(&directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_element_orders(&mut original, &mut patch, schema)?;
    for (key, value) in patch {
        merge_member(&mut original, key, value, schema)?;
    }
    Ok(original)
}

/// One member of the patch map (the loop body of `mergeMap`).
fn merge_member(original: &mut Object, key: String, value: Value, schema: Node) -> Result<()> {
    let (key, delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
        let field = extract_key(&key, DELETE_FROM_PRIMITIVE_LIST)?;
        (if field.is_empty() { key } else { field }, true)
    } else {
        (key, false)
    };
    if value.is_null() {
        // Note: a null `$deleteFromPrimitiveList/f` deletes `f` itself, as in Go.
        original.remove(&key);
        return Ok(());
    }
    let same_type = original
        .get(&key)
        .map(|current| GoType::of(current) == GoType::of(&value));
    if same_type != Some(true) {
        // Absent, or of another type: the patch value wins (deletion lists never add).
        if !delete_list {
            set_from_patch(original, key, value);
        }
        return Ok(());
    }
    let meta = schema.field(&key);
    let Some(current) = original.get_mut(&key) else {
        return Ok(());
    };
    match (current, value) {
        (Value::Object(current), Value::Object(patch)) => {
            *current = if meta.strategy() == "replace" {
                patch
            } else {
                merge_map(std::mem::take(current), patch, meta.node)?
            };
        }
        (Value::Array(current), Value::Array(patch)) => {
            *current = merge_list_field(std::mem::take(current), patch, meta, delete_list)?.list;
        }
        // Two scalars of one type (even under a deletion-list key): the patch value wins.
        (current, value) => *current = value,
    }
    Ok(())
}

/// A value copied from the patch where the original had nothing comparable: nulls are
/// discarded and maps carrying `$patch` vanish (`discardNullValuesFromPatch`,
/// `removeDirectives`); other `$` keys are kept verbatim.
fn set_from_patch(original: &mut Object, key: String, mut value: Value) {
    discard_nulls(&mut value);
    match remove_directives(value) {
        Some(value) => {
            original.insert(key, value);
        }
        None => {
            original.remove(&key);
        }
    }
}

fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// `removeDirectives`: `None` when the value is itself a `$patch` map.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(
            map.into_iter()
                .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                .collect(),
        )),
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// `$retainKeys`: every non-null patch member must be listed; original members that are not
/// listed are dropped.
fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadPatchFormatForRetainKeys);
    };
    for key in &retain {
        go::ensure_hashable(key)?;
    }
    let retained = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    let unlisted = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !k.starts_with(SET_ELEMENT_ORDER)
            && !retained(k)
    });
    if unlisted {
        return Err(PatchError::BadPatchFormatForRetainKeys);
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// `mergePatchIntoOriginal`: merges each list named by a `$setElementOrder/<field>` directive
/// and orders it by that directive (patch items), then by the live list (server-only items).
fn apply_element_orders(original: &mut Object, patch: &mut Object, schema: Node) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.remove(&key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(go::bad_arg_type(GoType::Slice, &order));
        };
        let field = extract_key(&key, SET_ELEMENT_ORDER)?;
        let original_list = list_member(original, &field)?;
        let patch_list = list_member(patch, &field)?;
        let meta = schema.field(&field);
        let patch_items_in = patch_list.as_deref().unwrap_or_default();
        validate_order(patch_items_in, &order, meta.merge_key)?;
        let (merged, live) = match (original_list, patch_list.clone()) {
            (None, None) => continue,
            (Some(live), None) => (live.clone(), live),
            (None, Some(added)) => {
                let added = remove_directives(Value::Array(added))
                    .and_then(|v| match v {
                        Value::Array(items) => Some(items),
                        _ => None,
                    })
                    .unwrap_or_default();
                (added, Vec::new())
            }
            (Some(live), Some(patched)) => {
                let merged = merge_list_field(live.clone(), patched, meta, false)?;
                (merged.list, merged.original_view.unwrap_or(live))
            }
        };
        let (patch_items, server_only) = partition(merged, &order, meta.merge_key)?;
        let kind = slice_element_type(&[&live, patch_items_in])?;
        let ordered = normalize_element_order(
            patch_items,
            server_only,
            &order,
            &live,
            meta.merge_key,
            kind,
        )?;
        original.insert(field.clone(), Value::Array(ordered));
        patch.remove(&field);
    }
    Ok(())
}

/// A list member of a map, or an error if the member is something else.
fn list_member(map: &Object, field: &str) -> Result<Option<Vec<Value>>> {
    match map.get(field) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items.clone())),
        Some(other) => Err(go::bad_arg_type(GoType::Slice, other)),
    }
}

/// `validatePatchWithSetOrderList`: the patch list's items (deletions and directive items
/// aside) must appear in `$setElementOrder`, in the same relative order.
fn validate_order(patch: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let kept = if merge_key.is_empty() {
        patch.to_vec()
    } else {
        split_deletions(patch.to_vec())?.0
    };
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if has_directive(&kept[p]) {
            p += 1;
            continue;
        }
        if merge_key_values_equal(&kept[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() && o >= order.len() {
        return Err(PatchError::Internal(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            go::v_list(patch),
            go::v_list(order),
        )));
    }
    Ok(())
}

fn has_directive(item: &Value) -> bool {
    item.as_object().is_some_and(|m| m.contains_key(DIRECTIVE))
}

/// `mergeKeyValueEqual`.
fn merge_key_values_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return go::eq(left, right);
    }
    let Value::Object(left) = left else {
        return Err(go::bad_arg_type(GoType::Map, left));
    };
    let Value::Object(right) = right else {
        return Err(go::bad_arg_type(GoType::Map, right));
    };
    let l = left
        .get(merge_key)
        .ok_or_else(|| go::no_merge_key(left, merge_key))?;
    let r = right
        .get(merge_key)
        .ok_or_else(|| go::no_merge_key(right, merge_key))?;
    go::eq(l, r)
}

/// A merged list, and what Go's caller sees of the original slice afterwards when the merge
/// rewrote its backing array (deduplicating a primitive list against an empty patch).
struct Merged {
    list: Vec<Value>,
    original_view: Option<Vec<Value>>,
}

/// `mergeSliceHandler`: only `merge` lists (and deletion lists) merge; others are replaced by
/// the patch list verbatim.
fn merge_list_field(
    original: Vec<Value>,
    patch: Vec<Value>,
    meta: FieldMeta,
    delete_list: bool,
) -> Result<Merged> {
    if meta.strategy() == "merge" || delete_list {
        merge_slice(original, patch, meta.node, meta.merge_key, delete_list)
    } else {
        Ok(Merged {
            list: patch,
            original_view: None,
        })
    }
}

/// `mergeSlice`.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    element: Node,
    merge_key: &str,
    delete_list: bool,
) -> Result<Merged> {
    if original.is_empty() && patch.is_empty() {
        return Ok(Merged {
            list: original,
            original_view: None,
        });
    }
    let kind = slice_element_type(&[&original, &patch])?;
    let (merged, live, patch, original_view) = if kind != GoType::Map {
        if delete_list {
            return Ok(Merged {
                list: delete_from_slice(original, &patch)?,
                original_view: None,
            });
        }
        if patch.is_empty() {
            // `append(original, patch...)` reuses original's array, which the
            // deduplication then rewrites in place.
            let (merged, backing) = deduplicate(original)?;
            (merged, backing.clone(), patch, Some(backing))
        } else {
            let live = original.clone();
            let mut both = original;
            both.extend(patch.iter().cloned());
            (deduplicate(both)?.0, live, patch, None)
        }
    } else {
        if merge_key.is_empty() {
            return Err(PatchError::Internal(format!(
                "cannot merge lists without merge key for {}",
                element.go_kind()
            )));
        }
        let length = original.len();
        let (mut list, patch, replaced) = apply_item_directives(original, patch, merge_key)?;
        let live = list.items().to_vec();
        merge_items(&mut list, &patch, merge_key, element)?;
        let view = replaced.unwrap_or_else(|| list.view(length));
        (list.into_items(), live, patch, Some(view))
    };
    let (patch_items, server_only) = partition(merged, &patch, merge_key)?;
    let list = normalize_element_order(patch_items, server_only, &patch, &live, merge_key, kind)?;
    Ok(Merged {
        list,
        original_view,
    })
}

/// `sliceElementType`: all elements of all lists share one Go type, which is not a list.
fn slice_element_type(lists: &[&[Value]]) -> Result<GoType> {
    let mut seen: Option<GoType> = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let current = GoType::of(item);
        match seen {
            // `prevType.Kind()` on the nil type of a leading null element.
            None if current == GoType::Nil => {
                return Err(PatchError::GoPanic(panics::NIL_DEREFERENCE));
            }
            None if current == GoType::Slice => return Err(PatchError::NoListOfLists),
            None => seen = Some(current),
            Some(previous) if previous != current => {
                return Err(PatchError::Internal(format!(
                    "list element types are not identical: {}",
                    go::v_lists(lists)
                )));
            }
            Some(_) => {}
        }
    }
    seen.ok_or_else(|| PatchError::Internal("no elements in any of the given slices".into()))
}

/// `deduplicateScalars`: Go's in-place algorithm, which moves the last element into each
/// duplicate's slot. Returns the result and the whole rewritten backing array.
fn deduplicate(mut buffer: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let Some(mut last) = buffer.len().checked_sub(1) else {
        return Ok((Vec::new(), buffer));
    };
    let mut i = 0;
    while i < last {
        let mut j = i + 1;
        while j <= last {
            if go::eq(&buffer[i], &buffer[j])? {
                buffer[j] = buffer[last].clone();
                last -= 1;
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    Ok((buffer[..=last].to_vec(), buffer))
}

/// `deleteFromSlice`: the parallel `$deleteFromPrimitiveList` list removes every equal item.
fn delete_from_slice(current: Vec<Value>, delete: &[Value]) -> Result<Vec<Value>> {
    let mut kept = Vec::with_capacity(current.len());
    for item in current {
        let mut doomed = false;
        for d in delete {
            doomed |= go::eq(d, &item)?;
        }
        if !doomed {
            kept.push(item);
        }
    }
    Ok(kept)
}

/// A Go slice over an array that the caller's view of the original list may share.
///
/// `mergeSlice` deletes with `append(s[:i], s[i+1:]...)` and adds with `append(s, item)`, both
/// in place while there is room, so the caller's slice header over the original array then
/// sees shifted and appended items. `mergePatchIntoOriginal` orders by that view, and Go's
/// results depend on it (e.g. deleting one item while adding another under
/// `$setElementOrder`). Capacity beyond the original length is taken to be zero.
struct SharedSlice {
    array: Vec<Value>,
    len: usize,
}

impl SharedSlice {
    fn new(items: Vec<Value>) -> Self {
        let len = items.len();
        Self { array: items, len }
    }

    fn items(&self) -> &[Value] {
        &self.array[..self.len]
    }

    fn items_mut(&mut self) -> &mut [Value] {
        &mut self.array[..self.len]
    }

    /// `append(s[:i], s[i+1:]...)`: shifts the tail left; the last slot keeps a stale copy.
    fn remove(&mut self, i: usize) {
        for k in i..self.len - 1 {
            self.array[k] = self.array[k + 1].clone();
        }
        self.len -= 1;
    }

    /// `append(s, item)`: reuses a free slot of the array, else grows it.
    fn push(&mut self, item: Value) {
        if self.len < self.array.len() {
            self.array[self.len] = item;
        } else {
            self.array.push(item);
        }
        self.len += 1;
    }

    /// What a slice of the first `length` slots of the array now holds.
    fn view(&self, length: usize) -> Vec<Value> {
        self.array[..length.min(self.array.len())].to_vec()
    }

    fn into_items(mut self) -> Vec<Value> {
        self.array.truncate(self.len);
        self.array
    }
}

/// `mergeSliceWithSpecialElements`: applies `$patch: delete` items, and `$patch: replace`
/// (the list becomes the patch's plain items). Returns the list to merge into, the plain patch
/// items and, after a replace, the original array as the deletions left it.
fn apply_item_directives(
    original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(SharedSlice, Vec<Value>, Option<Vec<Value>>)> {
    let length = original.len();
    let mut original = SharedSlice::new(original);
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let Value::Object(map) = &item else {
            return Err(go::bad_arg_type(GoType::Map, &item));
        };
        let Some(directive) = map.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let key = map
                    .get(merge_key)
                    .ok_or_else(|| go::no_merge_key(map, merge_key))?;
                while let Some(i) = find_by_key(original.items(), merge_key, key)? {
                    original.remove(i);
                }
            }
            // Later `$patch` items are still checked, as in Go.
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(PatchError::Internal(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            _ => return Err(bad_patch_type(directive, map)),
        }
    }
    Ok(if replace {
        let view = original.view(length);
        (SharedSlice::new(plain), Vec::new(), Some(view))
    } else {
        (original, plain, None)
    })
}

/// `mergeSliceWithoutSpecialElements`: an item whose key is in the list merges into the first
/// such item; a new item is appended verbatim (nulls and directives inside it included).
fn merge_items(
    original: &mut SharedSlice,
    patch: &[Value],
    merge_key: &str,
    element: Node,
) -> Result<()> {
    for item in patch {
        let Value::Object(map) = item else {
            return Err(go::bad_arg_type(GoType::Map, item));
        };
        let key = map
            .get(merge_key)
            .ok_or_else(|| go::no_merge_key(map, merge_key))?;
        match find_by_key(original.items(), merge_key, key)? {
            Some(i) => {
                let slot = &mut original.items_mut()[i];
                let current = match std::mem::take(slot) {
                    Value::Object(current) => current,
                    other => return Err(go::bad_arg_type(GoType::Map, &other)),
                };
                *slot = Value::Object(merge_map(current, map.clone(), element)?);
            }
            None => original.push(item.clone()),
        }
    }
    Ok(())
}

/// `findMapInSliceBasedOnKeyValue`: index of the first map whose `merge_key` equals `value`.
fn find_by_key(list: &[Value], merge_key: &str, value: &Value) -> Result<Option<usize>> {
    for (i, item) in list.iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(PatchError::Internal(format!(
                "value for key {i} is not a map"
            )));
        };
        if let Some(candidate) = map.get(merge_key)
            && go::eq(candidate, value)?
        {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// Splits merged items into those named by `by` (the patch or `$setElementOrder` list) and
/// the server-only rest, keeping their order.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut named = Vec::with_capacity(merged.len());
    let mut server_only = Vec::with_capacity(merged.len());
    if merge_key.is_empty() {
        // `partitionPrimitivesByPresentInList` keys a Go map by the items.
        for item in by {
            go::ensure_hashable(item)?;
        }
        for item in merged {
            go::ensure_hashable(&item)?;
            let mut present = false;
            for b in by {
                present |= go::eq(b, &item)?;
            }
            if present {
                named.push(item);
            } else {
                server_only.push(item);
            }
        }
    } else {
        for item in merged {
            let Value::Object(map) = &item else {
                return Err(go::bad_arg_type(GoType::Map, &item));
            };
            let key = map
                .get(merge_key)
                .ok_or_else(|| go::no_merge_key(map, merge_key))?;
            if find_by_key(by, merge_key, key)?.is_some() {
                named.push(item);
            } else {
                server_only.push(item);
            }
        }
    }
    Ok((named, server_only))
}

/// `normalizeElementOrder`: sorts patch items by `patch_order`, server-only items by the live
/// list, then interleaves them (`mergeSortedSlice`).
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    live: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>> {
    let patch_items = sort_by_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = sort_by_order(server_only, live, merge_key, kind)?;
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            // A server-only item goes first only if the live list had it before the patch
            // item; a patch item the live list never had comes first.
            (Some(l), Some(r)) => matches!(
                (index_of(live, l, merge_key, kind)?, index_of(live, r, merge_key, kind)?),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        out.extend(if take_left { left.next() } else { right.next() });
    }
    Ok(out)
}

/// `normalizeSliceOrder`: a stable sort by position in `order`; for maps, `$patch: delete`
/// items go last. Go's comparator treats an item missing from `order` inconsistently; every
/// caller only sorts items that are present, and such an item would go last here.
fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>> {
    let (items, deletions) = if kind == GoType::Map {
        require_merge_key(merge_key, &items)?;
        require_merge_key(merge_key, order)?;
        split_deletions(items)?
    } else {
        (items, Vec::new())
    };
    let mut keyed = Vec::with_capacity(items.len());
    for item in items {
        let position = index_of(order, &item, merge_key, kind)?.unwrap_or(usize::MAX);
        keyed.push((position, item));
    }
    keyed.sort_by_key(|(position, _)| *position);
    Ok(keyed
        .into_iter()
        .map(|(_, item)| item)
        .chain(deletions)
        .collect())
}

/// `validateMergeKeyInLists`.
fn require_merge_key(merge_key: &str, items: &[Value]) -> Result<()> {
    for item in items {
        let Value::Object(map) = item else {
            return Err(go::bad_arg_type(GoType::Map, item));
        };
        if !map.contains_key(merge_key) {
            return Err(go::no_merge_key(map, merge_key));
        }
    }
    Ok(())
}

/// `extractToDeleteItems`: separates `$patch: delete` items.
fn split_deletions(items: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut kept = Vec::with_capacity(items.len());
    let mut deletions = Vec::new();
    for item in items {
        let Value::Object(map) = &item else {
            return Err(go::bad_arg_type(GoType::Map, &item));
        };
        if map.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
            deletions.push(item);
        } else {
            kept.push(item);
        }
    }
    Ok((kept, deletions))
}

/// `index`: position of the first item of `list` with the same merge-key value (maps) or the
/// same value (scalars).
fn index_of(list: &[Value], item: &Value, merge_key: &str, kind: GoType) -> Result<Option<usize>> {
    let probe = key_value(item, merge_key, kind);
    for (i, candidate) in list.iter().enumerate() {
        if go::eq(probe, key_value(candidate, merge_key, kind))? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn key_value<'a>(item: &'a Value, merge_key: &str, kind: GoType) -> &'a Value {
    if kind != GoType::Map {
        return item;
    }
    item.as_object()
        .and_then(|m| m.get(merge_key))
        .unwrap_or(&NIL)
}

/// `extractKey`: `<prefix>/<field>`, or the format error of that directive.
fn extract_key(key: &str, prefix: &str) -> Result<String> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field.to_owned()),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST => {
            Err(PatchError::BadPatchFormatForPrimitiveList)
        }
        _ => Err(PatchError::BadPatchFormatForSetElementOrderList),
    }
}

/// `mergepatch.ErrBadPatchType`.
fn bad_patch_type(directive: &Value, map: &Object) -> PatchError {
    PatchError::Internal(format!(
        "unknown patch type: {} in map: {}",
        go::s(directive),
        go::v_map(map)
    ))
}
