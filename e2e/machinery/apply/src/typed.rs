//! Walks over JSON objects guided by a [`Schema`]: the field set a value sets, the comparison of
//! two values, the apply merge and the removal of owned items. Each mirrors the walker of the same
//! name in structured-merge-diff's `typed` package, including its corner cases (empty maps and
//! lists are leaves, `null` takes the shape of the other side, duplicates in live lists).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::error::ApplyError;
use crate::fieldset::FieldSet;
use crate::gojson;
use crate::limits::MAX_DEPTH;
use crate::path::{PathElement, path_string};
use crate::schema::{ListType, MapType, Schema};

/// Fields added, modified and removed between two versions of an object.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Present only in the new object (including new non-leaf nodes such as a new label map).
    pub added: FieldSet,
    /// Leaves present in both with different values.
    pub modified: FieldSet,
    /// Present only in the old object.
    pub removed: FieldSet,
}

impl Comparison {
    /// Drops `reset` (and everything below its members) from all three sets.
    pub fn exclude(&mut self, reset: &FieldSet) {
        self.added = self.added.recursive_difference(reset);
        self.modified = self.modified.recursive_difference(reset);
        self.removed = self.removed.recursive_difference(reset);
    }
}

/// The shape two values at the same path are walked as.
enum Shape<'v> {
    Leaf,
    Map(
        Option<&'v Map<String, Value>>,
        Option<&'v Map<String, Value>>,
    ),
    List(ListType, &'v [Value], &'v [Value]),
    /// A map on one side and a list or scalar on the other: a type change.
    Mismatch,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    /// Absent or `null`: takes the shape of the other side.
    Wild,
    Scalar,
    List,
    Map,
}

fn kind(v: Option<&Value>) -> Kind {
    match v {
        None | Some(Value::Null) => Kind::Wild,
        Some(Value::Object(_)) => Kind::Map,
        Some(Value::Array(_)) => Kind::List,
        Some(_) => Kind::Scalar,
    }
}

fn invalid(path: &[PathElement], msg: impl std::fmt::Display) -> ApplyError {
    if path.is_empty() {
        ApplyError::Invalid(msg.to_string())
    } else {
        ApplyError::Invalid(format!("{}: {msg}", path_string(path)))
    }
}

/// Walks objects of one type.
pub(crate) struct Typed<'s> {
    pub(crate) schema: &'s dyn Schema,
}

/// Index of a list's items by path element, in first-seen order, with every occurrence kept.
struct ListIndex<'v> {
    order: Vec<PathElement>,
    items: BTreeMap<PathElement, Vec<&'v Value>>,
}

impl<'v> ListIndex<'v> {
    fn get(&self, pe: &PathElement) -> &[&'v Value] {
        self.items.get(pe).map(Vec::as_slice).unwrap_or_default()
    }
}

impl<'s> Typed<'s> {
    fn check_depth(path: &[PathElement]) -> Result<(), ApplyError> {
        if path.len() > MAX_DEPTH {
            return Err(invalid(path, "object nested too deeply"));
        }
        Ok(())
    }

    fn shape<'v>(
        &self,
        path: &[PathElement],
        lhs: Option<&'v Value>,
        rhs: Option<&'v Value>,
    ) -> Shape<'v> {
        let (lk, rk) = (kind(lhs), kind(rhs));
        let k = match (lk, rk) {
            (Kind::Wild, Kind::Wild) => return Shape::Leaf,
            (Kind::Wild, k) | (k, Kind::Wild) => k,
            (a, b) if a != b => return Shape::Mismatch,
            (a, _) => a,
        };
        match k {
            Kind::Map => {
                if self.schema.map_type(path) == MapType::Atomic {
                    return Shape::Leaf;
                }
                let (l, r) = (
                    lhs.and_then(Value::as_object),
                    rhs.and_then(Value::as_object),
                );
                if l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty) {
                    return Shape::Leaf;
                }
                Shape::Map(l, r)
            }
            Kind::List => {
                let list_type = self.schema.list_type(path);
                let as_list = |v: Option<&'v Value>| -> &'v [Value] {
                    v.and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                };
                let (l, r) = (as_list(lhs), as_list(rhs));
                if list_type == ListType::Atomic || (l.is_empty() && r.is_empty()) {
                    return Shape::Leaf;
                }
                Shape::List(list_type, l, r)
            }
            Kind::Scalar | Kind::Wild => Shape::Leaf,
        }
    }

    /// The path element naming `item` in a list of `list_type`, or structured-merge-diff's
    /// reason why it has none.
    fn item_element(list_type: &ListType, item: &Value) -> Result<PathElement, String> {
        match list_type {
            ListType::Map(keys) if !keys.is_empty() => {
                let map = match item {
                    Value::Object(m) => m,
                    Value::Null => {
                        return Err("associative list with keys may not have a null element".into());
                    }
                    _ => {
                        return Err(
                            "associative list with keys may not have non-map elements".into()
                        );
                    }
                };
                let fields: Vec<(String, Value)> = keys
                    .iter()
                    .filter_map(|k| {
                        map.get(&k.name)
                            .or(k.default.as_ref())
                            .map(|v| (k.name.clone(), v.clone()))
                    })
                    .collect();
                if fields.is_empty() {
                    let names: Vec<String> =
                        keys.iter().map(|k| gojson::go_quote(&k.name)).collect();
                    return Err(format!(
                        "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                        names.join(" ")
                    ));
                }
                Ok(PathElement::key(fields))
            }
            _ => match item {
                Value::Object(_) => {
                    Err("associative list without keys has an element that's a map type".into())
                }
                Value::Array(_) => {
                    Err("not supported: associative list with lists as elements".into())
                }
                Value::Null => Err(
                    "associative list without keys has an element that's an explicit null".into(),
                ),
                v => Ok(PathElement::Value(v.clone())),
            },
        }
    }

    /// Indexes a granular list, failing on the first invalid item.
    fn index<'v>(
        path: &[PathElement],
        list_type: &ListType,
        items: &'v [Value],
        allow_duplicates: bool,
    ) -> Result<ListIndex<'v>, ApplyError> {
        let mut errors = Vec::new();
        let index = Self::index_all(path, list_type, items, allow_duplicates, &mut errors);
        match errors.into_iter().next() {
            Some(first) => Err(ApplyError::Invalid(first)),
            None => Ok(index),
        }
    }

    /// Indexes a granular list, skipping invalid items and recording why in `errors`.
    fn index_all<'v>(
        path: &[PathElement],
        list_type: &ListType,
        items: &'v [Value],
        allow_duplicates: bool,
        errors: &mut Vec<String>,
    ) -> ListIndex<'v> {
        let mut index = ListIndex {
            order: Vec::new(),
            items: BTreeMap::new(),
        };
        let describe = |msg: String| match invalid(path, msg) {
            ApplyError::Invalid(text) => text,
            other => other.to_string(),
        };
        for (i, item) in items.iter().enumerate() {
            let pe = match Self::item_element(list_type, item) {
                Ok(pe) => pe,
                Err(msg) => {
                    errors.push(describe(format!("element {i}: {msg}")));
                    continue;
                }
            };
            match index.items.get_mut(&pe) {
                Some(_) if !allow_duplicates => {
                    errors.push(describe(format!("duplicate entries for key {pe}")));
                }
                Some(seen) => seen.push(item),
                None => {
                    index.items.insert(pe.clone(), vec![item]);
                    index.order.push(pe);
                }
            }
        }
        index
    }

    /// Checks that every granular list item has a valid path element and, unless
    /// `allow_duplicates` (live objects), that no two items share one. All problems are reported
    /// together, as structured-merge-diff's `ValidationErrors` print them.
    pub(crate) fn validate(&self, v: &Value, allow_duplicates: bool) -> Result<(), ApplyError> {
        let mut errors = Vec::new();
        self.validate_at(&mut Vec::new(), v, allow_duplicates, &mut errors);
        match errors.as_slice() {
            [] => Ok(()),
            [one] => Err(ApplyError::Invalid(one.clone())),
            many => Err(ApplyError::Invalid(format!(
                "errors:\n  {}",
                many.join("\n  ")
            ))),
        }
    }

    fn validate_at(
        &self,
        path: &mut Vec<PathElement>,
        v: &Value,
        allow_duplicates: bool,
        errors: &mut Vec<String>,
    ) {
        if let Err(e) = Self::check_depth(path) {
            errors.push(e.to_string());
            return;
        }
        match v {
            Value::Object(map) if self.schema.map_type(path) == MapType::Granular => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for k in keys {
                    path.push(PathElement::Field(k.clone()));
                    if let Some(child) = map.get(k) {
                        self.validate_at(path, child, allow_duplicates, errors);
                    }
                    path.pop();
                }
            }
            Value::Array(items) => {
                let list_type = self.schema.list_type(path);
                if list_type == ListType::Atomic {
                    return;
                }
                let index = Self::index_all(path, &list_type, items, allow_duplicates, errors);
                for pe in &index.order {
                    for item in index.get(pe) {
                        path.push(pe.clone());
                        self.validate_at(path, item, allow_duplicates, errors);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }

    /// `TypedValue.ToFieldSet`: the fields `v` sets. Declared struct fields with content are not
    /// members themselves; free-form entries, empty maps and nulls are.
    pub(crate) fn to_field_set(&self, v: &Value) -> Result<FieldSet, ApplyError> {
        let mut set = FieldSet::new();
        self.to_set(&mut Vec::new(), v, &mut set)?;
        Ok(set)
    }

    fn to_set(
        &self,
        path: &mut Vec<PathElement>,
        v: &Value,
        set: &mut FieldSet,
    ) -> Result<(), ApplyError> {
        Self::check_depth(path)?;
        match v {
            Value::Object(map) => {
                if self.schema.map_type(path) == MapType::Atomic {
                    set.insert(path);
                    return Ok(());
                }
                for (k, child) in map {
                    let declared = self.schema.is_declared_field(path, k);
                    path.push(PathElement::Field(k.clone()));
                    self.to_set(path, child, set)?;
                    let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                    if empty || !declared {
                        set.insert(path);
                    }
                    path.pop();
                }
            }
            Value::Array(items) => {
                let list_type = self.schema.list_type(path);
                if list_type == ListType::Atomic {
                    set.insert(path);
                    return Ok(());
                }
                let index = Self::index(path, &list_type, items, true)?;
                for pe in &index.order {
                    path.push(pe.clone());
                    // Duplicated items are owned as one marker, never descended into.
                    if let [item] = index.get(pe) {
                        self.to_set(path, item, set)?;
                    }
                    set.insert(path);
                    path.pop();
                }
            }
            _ => set.insert(path),
        }
        Ok(())
    }

    /// `Set.EnsureNamedFieldsAreMembers`: adds the declared fields that only appear as parents,
    /// so that removing items also removes the struct fields that held them.
    pub(crate) fn ensure_named_fields_are_members(&self, set: &FieldSet) -> FieldSet {
        self.ensure_named(&mut Vec::new(), set)
    }

    fn ensure_named(&self, path: &mut Vec<PathElement>, set: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            members: set.members.clone(),
            children: BTreeMap::new(),
        };
        for (pe, child) in &set.children {
            if let PathElement::Field(name) = pe
                && self.schema.is_declared_field(path, name)
            {
                out.members.insert(pe.clone());
            }
            path.push(pe.clone());
            out.children
                .insert(pe.clone(), self.ensure_named(path, child));
            path.pop();
        }
        out
    }

    /// `TypedValue.Compare`: what changed from `lhs` to `rhs`.
    pub(crate) fn compare(&self, lhs: &Value, rhs: &Value) -> Result<Comparison, ApplyError> {
        let mut out = Comparison::default();
        self.compare_at(&mut Vec::new(), Some(lhs), Some(rhs), &mut out)?;
        Ok(out)
    }

    fn compare_at(
        &self,
        path: &mut Vec<PathElement>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        out: &mut Comparison,
    ) -> Result<(), ApplyError> {
        Self::check_depth(path)?;
        match self.shape(path, lhs, rhs) {
            Shape::Leaf => {
                match (lhs, rhs) {
                    (None, Some(_)) => out.added.insert(path),
                    (Some(_), None) => out.removed.insert(path),
                    (Some(l), Some(r)) if !gojson::equals(l, r) => out.modified.insert(path),
                    _ => {}
                }
                return Ok(());
            }
            Shape::Mismatch => {
                // The old shape's content goes, the new one's comes, the node itself changes.
                self.compare_children(path, lhs, None, out)?;
                self.compare_children(path, None, rhs, out)?;
                out.modified.insert(path);
                return Ok(());
            }
            Shape::Map(..) | Shape::List(..) => self.compare_children(path, lhs, rhs, out)?,
        }
        match (lhs, rhs) {
            (None, _) => out.added.insert(path),
            (_, None) => out.removed.insert(path),
            _ => {}
        }
        Ok(())
    }

    fn compare_children(
        &self,
        path: &mut Vec<PathElement>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        out: &mut Comparison,
    ) -> Result<(), ApplyError> {
        match self.shape(path, lhs, rhs) {
            Shape::Map(l, r) => {
                let mut keys: Vec<&String> =
                    l.iter().chain(r.iter()).flat_map(|m| m.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    path.push(PathElement::Field(k.clone()));
                    self.compare_at(
                        path,
                        l.and_then(|m| m.get(k)),
                        r.and_then(|m| m.get(k)),
                        out,
                    )?;
                    path.pop();
                }
            }
            Shape::List(list_type, l, r) => {
                let li = Self::index(path, &list_type, l, true)?;
                let ri = Self::index(path, &list_type, r, true)?;
                let mut all = li.order.clone();
                all.extend(
                    ri.order
                        .iter()
                        .filter(|pe| !li.items.contains_key(pe))
                        .cloned(),
                );
                for pe in all {
                    let (ls, rs) = (li.get(&pe), ri.get(&pe));
                    path.push(pe);
                    if ls.len() <= 1 && rs.len() <= 1 {
                        // The usual case: at most one item per key on each side.
                        self.compare_at(path, ls.first().copied(), rs.first().copied(), out)?;
                    } else if ls.len() >= 2 && rs.len() >= 2 {
                        // Duplicates before and after: compared as one atomic value.
                        let same = ls.len() == rs.len()
                            && ls.iter().zip(rs).all(|(a, b)| gojson::equals(a, b));
                        if !same {
                            out.modified.insert(path);
                        }
                    } else if ls.len() >= 2 {
                        // Duplicates resolved: the single new item is added, the marker removed.
                        if let Some(r) = rs.first() {
                            self.compare_at(path, None, Some(r), out)?;
                        }
                        out.removed.insert(path);
                    } else {
                        // New duplicates: the old single item goes, the marker comes.
                        if let Some(l) = ls.first() {
                            self.compare_at(path, Some(l), None, out)?;
                        }
                        out.added.insert(path);
                    }
                    path.pop();
                }
            }
            Shape::Leaf | Shape::Mismatch => {}
        }
        Ok(())
    }

    /// `TypedValue.Merge` with the apply rule: `rhs` wins on leaves, maps merge per field, sets
    /// and list-maps per item (in `rhs`'s order for shared items).
    pub(crate) fn merge(&self, lhs: &Value, rhs: &Value) -> Result<Value, ApplyError> {
        self.merge_at(&mut Vec::new(), Some(lhs), Some(rhs))
            .map(Option::unwrap_or_default)
    }

    fn merge_at(
        &self,
        path: &mut Vec<PathElement>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
    ) -> Result<Option<Value>, ApplyError> {
        Self::check_depth(path)?;
        let (Some(_), Some(r)) = (lhs, rhs) else {
            return Ok(rhs.or(lhs).cloned());
        };
        match self.shape(path, lhs, rhs) {
            Shape::Leaf | Shape::Mismatch => Ok(Some(r.clone())),
            Shape::Map(lm, rm) => {
                let mut out = Map::new();
                for (k, lv) in lm.into_iter().flatten() {
                    path.push(PathElement::Field(k.clone()));
                    let merged = self.merge_at(path, Some(lv), rm.and_then(|m| m.get(k)))?;
                    path.pop();
                    out.insert(k.clone(), merged.unwrap_or_default());
                }
                for (k, rv) in rm.into_iter().flatten() {
                    if !out.contains_key(k) {
                        out.insert(k.clone(), rv.clone());
                    }
                }
                Ok(Some(Value::Object(out)))
            }
            Shape::List(list_type, ll, rl) => self
                .merge_list(path, &list_type, ll, rl)
                .map(|items| Some(Value::Array(items))),
        }
    }

    /// `mergingWalker.visitListItems`: items only on the left keep their place, shared items
    /// follow the right's order, new items come where the right puts them.
    fn merge_list(
        &self,
        path: &mut Vec<PathElement>,
        list_type: &ListType,
        lhs: &[Value],
        rhs: &[Value],
    ) -> Result<Vec<Value>, ApplyError> {
        let r_index = Self::index(path, list_type, rhs, false)?;
        let l_index = Self::index(path, list_type, lhs, true)?;
        // Element of every left item, in list order (duplicates included).
        let l_pes: Vec<PathElement> = lhs
            .iter()
            .map(|item| Self::item_element(list_type, item))
            .collect::<Result<_, _>>()
            .map_err(|msg| invalid(path, msg))?;
        let r_pes = &r_index.order;
        // A duplicated left item is merged as if it were null.
        let observed_l = |pe: &PathElement| -> Option<&Value> {
            match l_index.get(pe) {
                [] => None,
                [one] => Some(*one),
                _ => Some(&Value::Null),
            }
        };
        let observed_r = |pe: &PathElement| r_index.get(pe).first().copied();
        let mut shared = r_pes.iter().filter(|pe| l_index.items.contains_key(pe));
        let mut next_shared = shared.next();
        let mut merged_r: BTreeSet<&PathElement> = BTreeSet::new();
        let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
        let (mut li, mut ri) = (0, 0);
        while li < l_pes.len() || ri < r_pes.len() {
            if li < l_pes.len() && ri < r_pes.len() {
                let pe = &l_pes[li];
                if *pe == r_pes[ri] {
                    merged_r.insert(pe);
                    out.extend(self.merge_item(path, pe, observed_l(pe), observed_r(pe))?);
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if observed_r(pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                    li += 1;
                    continue;
                }
            }
            if li < l_pes.len() {
                let pe = &l_pes[li];
                if observed_r(pe).is_none() {
                    out.extend(self.merge_item(path, pe, Some(&lhs[li]), None)?);
                    li += 1;
                    continue;
                } else if merged_r.contains(pe) {
                    li += 1;
                }
            }
            if ri < r_pes.len() {
                let pe = &r_pes[ri];
                merged_r.insert(pe);
                out.extend(self.merge_item(path, pe, observed_l(pe), observed_r(pe))?);
                ri += 1;
                if next_shared == Some(pe) {
                    next_shared = shared.next();
                }
            }
        }
        Ok(out)
    }

    fn merge_item(
        &self,
        path: &mut Vec<PathElement>,
        pe: &PathElement,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
    ) -> Result<Option<Value>, ApplyError> {
        path.push(pe.clone());
        let merged = self.merge_at(path, lhs, rhs);
        path.pop();
        merged
    }

    /// `TypedValue.RemoveItems`: `v` without the members of `set` (whole subtrees). A map or
    /// list left empty by the removal becomes `null`, as in structured-merge-diff.
    pub(crate) fn remove_items(&self, v: &Value, set: &FieldSet) -> Value {
        self.remove_at(&mut Vec::new(), v, set)
    }

    fn remove_at(&self, path: &mut Vec<PathElement>, v: &Value, set: &FieldSet) -> Value {
        match v {
            Value::Object(map) => {
                if map.is_empty() || self.schema.map_type(path) == MapType::Atomic {
                    return Value::Null;
                }
                let mut out = Map::new();
                for (k, child) in map {
                    let pe = PathElement::Field(k.clone());
                    if set.members.contains(&pe) {
                        continue;
                    }
                    let kept = match set.child(&pe).filter(|s| !s.is_empty()) {
                        Some(sub) if path.len() < MAX_DEPTH => {
                            path.push(pe);
                            let kept = self.remove_at(path, child, sub);
                            path.pop();
                            kept
                        }
                        _ => child.clone(),
                    };
                    out.insert(k.clone(), kept);
                }
                if out.is_empty() {
                    Value::Null
                } else {
                    Value::Object(out)
                }
            }
            Value::Array(items) => {
                let list_type = self.schema.list_type(path);
                if items.is_empty() || list_type == ListType::Atomic {
                    return Value::Null;
                }
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let Ok(pe) = Self::item_element(&list_type, item) else {
                        out.push(item.clone());
                        continue;
                    };
                    if set.members.contains(&pe) {
                        continue;
                    }
                    match set.child(&pe).filter(|s| !s.is_empty()) {
                        Some(sub) if path.len() < MAX_DEPTH => {
                            path.push(pe);
                            out.push(self.remove_at(path, item, sub));
                            path.pop();
                        }
                        _ => out.push(item.clone()),
                    }
                }
                if out.is_empty() {
                    Value::Null
                } else {
                    Value::Array(out)
                }
            }
            scalar => scalar.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Deduced, MapKey, OpenApiSchema, with_object_meta};
    use serde_json::json;

    fn schema() -> OpenApiSchema {
        OpenApiSchema::new(json!({"properties": {
            "spec": {"properties": {
                "items": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"properties": {"name": {}, "v": {}}}},
                "tags": {"x-kubernetes-list-type": "set"},
                "args": {},
                "sel": {"x-kubernetes-map-type": "atomic"},
                "free": {"additionalProperties": {}}
            }}
        }}))
    }

    fn paths(set: &FieldSet) -> Vec<String> {
        set.paths().iter().map(|p| path_string(p)).collect()
    }

    #[test]
    fn field_sets() {
        let s = schema();
        let meta = with_object_meta(&s);
        let t = Typed { schema: &meta };
        let cases = [
            (
                json!({"spec": {"args": ["a"], "sel": {"a": "b"}}}),
                vec![".spec.args", ".spec.sel"],
            ),
            (
                json!({"spec": {"free": {"x": {"y": 1}}}}),
                vec![".spec.free.x", ".spec.free.x.y"],
            ),
            (
                json!({"spec": {"tags": ["b", "a"]}}),
                vec![r#".spec.tags[="a"]"#, r#".spec.tags[="b"]"#],
            ),
            (
                json!({"spec": {"items": [{"name": "n"}]}}),
                vec![r#".spec.items[name="n"]"#, r#".spec.items[name="n"].name"#],
            ),
            (
                json!({"spec": {"items": [{"name": "n"}, {"name": "n", "v": 1}]}}),
                vec![r#".spec.items[name="n"]"#],
            ),
            (
                json!({"spec": {"free": {}, "args": null}}),
                vec![".spec.args", ".spec.free"],
            ),
            (json!({"spec": {"tags": []}}), vec![]),
            (
                json!({"metadata": {"name": "x", "labels": {"a": "b"}}}),
                vec![".metadata.name", ".metadata.labels.a"],
            ),
        ];
        for (v, want) in cases {
            assert_eq!(paths(&t.to_field_set(&v).unwrap()), want, "{v}");
        }
    }

    #[test]
    fn comparisons() {
        let s = schema();
        let t = Typed { schema: &s };
        let cases = [
            (
                json!({"spec": {"args": ["a"]}}),
                json!({"spec": {"args": ["b"]}}),
                (vec![], vec![".spec.args"], vec![]),
            ),
            (
                json!({}),
                json!({"spec": {"free": {"x": 1}}}),
                (vec![".spec", ".spec.free", ".spec.free.x"], vec![], vec![]),
            ),
            (
                json!({"spec": {"free": {"x": 1}}}),
                json!({"spec": {"free": {"x": 1.0}}}),
                (vec![], vec![], vec![]),
            ),
            (
                json!({"spec": {"tags": ["a"]}}),
                json!({"spec": {"tags": ["b"]}}),
                (
                    vec![r#".spec.tags[="b"]"#],
                    vec![],
                    vec![r#".spec.tags[="a"]"#],
                ),
            ),
            (
                json!({"spec": {"free": {}}}),
                json!({"spec": {"free": null}}),
                (vec![], vec![".spec.free"], vec![]),
            ),
            (
                json!({"spec": {"free": 1}}),
                json!({"spec": {"free": {"x": 1}}}),
                (vec![".spec.free.x"], vec![".spec.free"], vec![]),
            ),
        ];
        for (l, r, (added, modified, removed)) in cases {
            let c = t.compare(&l, &r).unwrap();
            let own = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
            assert_eq!(
                (paths(&c.added), paths(&c.modified), paths(&c.removed)),
                (own(added), own(modified), own(removed)),
                "{l} -> {r}"
            );
        }
    }

    #[test]
    fn merges() {
        let s = schema();
        let t = Typed { schema: &s };
        let cases = [
            (
                json!({"spec": {"args": ["a", "b"]}}),
                json!({"spec": {"args": ["c"]}}),
                json!({"spec": {"args": ["c"]}}),
            ),
            (
                json!({"spec": {"sel": {"a": 1}}}),
                json!({"spec": {"sel": {"b": 2}}}),
                json!({"spec": {"sel": {"b": 2}}}),
            ),
            (
                json!({"spec": {"free": {"a": 1}}}),
                json!({"spec": {"free": {"b": 2}}}),
                json!({"spec": {"free": {"a": 1, "b": 2}}}),
            ),
            (
                json!({"spec": {"tags": ["a", "b"]}}),
                json!({"spec": {"tags": ["c", "a"]}}),
                json!({"spec": {"tags": ["c", "a", "b"]}}),
            ),
            (
                json!({"spec": {"free": {"a": 1}}}),
                json!({"spec": {"free": null}}),
                json!({"spec": {"free": {"a": 1}}}),
            ),
            (
                json!({"spec": {"free": 1}}),
                json!({"spec": {"free": null}}),
                json!({"spec": {"free": null}}),
            ),
            (
                json!({"spec": {"items": [{"name": "a", "v": 1}, {"name": "b", "v": 1}]}}),
                json!({"spec": {"items": [{"name": "b", "v": 2}]}}),
                json!({"spec": {"items": [{"name": "a", "v": 1}, {"name": "b", "v": 2}]}}),
            ),
        ];
        for (l, r, want) in cases {
            assert_eq!(t.merge(&l, &r).unwrap(), want, "{l} + {r}");
        }
    }

    #[test]
    fn removals() {
        let s = schema();
        let t = Typed { schema: &s };
        let v = json!({"spec": {"free": {"x": 1}, "items": [{"name": "a", "v": 1}, {"name": "b"}], "keep": 1}});
        let remove = |paths: &[Vec<PathElement>]| {
            t.remove_items(&v, &FieldSet::from_paths(paths.iter().map(Vec::as_slice)))
        };
        let f = crate::path::field;
        let key = |n: &str| PathElement::key(vec![("name".into(), json!(n))]);
        assert_eq!(
            remove(&[
                vec![f("spec"), f("free"), f("x")],
                vec![f("spec"), f("items"), key("a")]
            ]),
            json!({"spec": {"free": null, "items": [{"name": "b"}], "keep": 1}})
        );
        assert_eq!(
            remove(&[vec![f("spec"), f("items"), key("b"), f("name")]]),
            json!({"spec": {"free": {"x": 1}, "items": [{"name": "a", "v": 1}, null], "keep": 1}})
        );
    }

    #[test]
    fn key_defaults_fill_missing_key_fields() {
        struct Ports;
        impl Schema for Ports {
            fn list_type(&self, _: &[PathElement]) -> ListType {
                ListType::Map(vec![
                    MapKey::new("containerPort"),
                    MapKey {
                        name: "protocol".into(),
                        default: Some(json!("TCP")),
                    },
                ])
            }
        }
        let t = Typed { schema: &Ports };
        let set = t
            .to_field_set(&json!({"ports": [{"containerPort": 80}]}))
            .unwrap();
        assert!(
            paths(&set)
                .contains(&r#".ports[containerPort=80,protocol="TCP"].containerPort"#.to_string())
        );
        let d = Typed { schema: &Deduced };
        assert_eq!(
            paths(&d.to_field_set(&json!({"a": [1, 2]})).unwrap()),
            [".a"]
        );
    }
}
