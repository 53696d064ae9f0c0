//! Ownership bookkeeping of one write, after structured-merge-diff's `merge/update.go`:
//! who loses which fields when an object changes, conflicts, and the pruning of fields an
//! applier stopped applying.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApplyError;
use crate::fieldset::FieldSet;
use crate::gojson;
use crate::managed::{Managed, ManagerId, Owned};
use crate::typed::{Comparison, Typed};

/// Other managers' fields that a write would change, keyed by manager identifier.
pub(crate) type Conflicts = BTreeMap<String, (ManagerId, FieldSet)>;

/// An apply that could not proceed.
pub(crate) enum Refused {
    Conflicts(Conflicts),
    Error(ApplyError),
}

impl From<ApplyError> for Refused {
    fn from(e: ApplyError) -> Self {
        Refused::Error(e)
    }
}

pub(crate) struct Updater<'s> {
    pub(crate) typed: Typed<'s>,
    /// Fields this endpoint wipes (`.status` on the main resource, `.spec` on `/status`); nobody
    /// gains or loses them through it.
    pub(crate) reset: &'s FieldSet,
    pub(crate) api_version: &'s str,
}

impl Updater<'_> {
    /// `Updater.update`: compares `live` and `new`; other managers lose what changed (or, unless
    /// `force`, the write is refused) and what was removed. `workflow` is the writer's own key.
    fn update(
        &self,
        live: &Value,
        new: &Value,
        managed: &mut Managed,
        workflow: Option<&str>,
        force: bool,
    ) -> Result<Comparison, Refused> {
        let mut cmp = self.typed.compare(live, new)?;
        cmp.exclude(self.reset);
        let changed = cmp.modified.union(&cmp.added);
        let mut conflicts = Conflicts::new();
        for (key, owned) in &managed.fields {
            if Some(key.as_str()) == workflow {
                continue;
            }
            let conflict = owned.set.intersection(&changed);
            if !conflict.is_empty() {
                conflicts.insert(key.clone(), (owned.id.clone(), conflict));
            }
        }
        if !force && !conflicts.is_empty() {
            return Err(Refused::Conflicts(conflicts));
        }
        for (key, owned) in managed.fields.iter_mut() {
            if Some(key.as_str()) == workflow {
                continue;
            }
            if let Some((_, conflict)) = conflicts.get(key) {
                owned.set = owned.set.difference(conflict);
            }
            if !cmp.removed.is_empty() {
                owned.set = owned.set.difference(&cmp.removed);
            }
        }
        managed.drop_empty();
        Ok(cmp)
    }

    /// `Updater.Update` for a non-apply write: the fields the writer changed, which other
    /// managers have given up.
    pub(crate) fn update_fields(
        &self,
        live: &Value,
        new: &Value,
        managed: &mut Managed,
    ) -> Result<FieldSet, ApplyError> {
        match self.update(live, new, managed, None, true) {
            Ok(cmp) => Ok(cmp
                .modified
                .union(&cmp.added)
                .recursive_difference(self.reset)),
            Err(Refused::Error(e)) => Err(e),
            // Unreachable with force, but a conflict is not an error of an update.
            Err(Refused::Conflicts(_)) => Ok(FieldSet::new()),
        }
    }

    /// `Updater.Apply`: merges `config` into `live`, records it as `id`'s applied set, prunes
    /// what `id` applied last time and no longer does, and takes fields from other managers
    /// (refusing on conflict unless `force`). `Ok(None)` when the object does not change.
    pub(crate) fn apply(
        &self,
        live: &Value,
        config: &Value,
        managed: &mut Managed,
        id: &ManagerId,
        force: bool,
    ) -> Result<Option<Value>, Refused> {
        self.typed.validate(config, false)?;
        self.typed.validate(live, true)?;
        let merged = self.typed.merge(live, config)?;
        let key = id.key();
        let last = managed.set_of(&key).cloned();
        let set = self
            .typed
            .to_field_set(config)?
            .recursive_difference(self.reset);
        managed.fields.insert(
            key.clone(),
            Owned {
                id: id.clone(),
                set,
                api_version: self.api_version.to_string(),
            },
        );
        let merged = self.prune(merged, managed, last)?;
        self.update(live, &merged, managed, Some(&key), force)?;
        Ok((!gojson::equals(live, &merged)).then_some(merged))
    }

    /// `Updater.prune`: removes what the applier applied last time (`last`) and no longer
    /// applies, unless some manager (the applier's new set included) still owns it or it was
    /// never the applier's.
    fn prune(
        &self,
        merged: Value,
        managed: &Managed,
        last: Option<FieldSet>,
    ) -> Result<Value, ApplyError> {
        let Some(last) = last.filter(|l| !l.is_empty()) else {
            return Ok(merged);
        };
        let t = &self.typed;
        let named = |s: &FieldSet| t.ensure_named_fields_are_members(s);
        let last = named(&last);
        let pruned = t.remove_items(&merged, &last);

        // Add back what anyone owns.
        let owned = managed
            .fields
            .values()
            .fold(FieldSet::new(), |acc, o| acc.union(&o.set));
        let merged_set = named(&t.to_field_set(&merged)?);
        let pruned_set = named(&t.to_field_set(&pruned)?);
        let pruned = t.remove_items(
            &merged,
            &merged_set.difference(&pruned_set.union(&named(&owned))),
        );

        // Remove only what the applier had owned.
        let pruned_set = named(&t.to_field_set(&pruned)?);
        Ok(t.remove_items(
            &merged,
            &merged_set.difference(&pruned_set).intersection(&last),
        ))
    }
}
