//! Field selectors: parsing ([`parse_field_selector`]), then resolution against a kind
//! ([`FieldSelector::resolve`], which is where unsupported labels are refused, HTTP 400), then
//! matching objects ([`ResolvedFieldSelector::matches`]).

mod kinds;
mod parse;

use serde_json::Value;

pub use kinds::FieldSchema;
pub use parse::{
    FieldOperator, FieldRequirement, FieldSelector, FieldSelectorError, escape_value,
    parse_field_selector, unescape_value,
};

/// A field selector checked against one kind, ready to test objects of that kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedFieldSelector {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    label: String,
    source: kinds::Source,
    equal: bool,
    value: String,
}

impl FieldSelector {
    /// Checks every label against the kind (upstream `Selector.Transform` with the scheme's
    /// `ConvertFieldLabel`); the first refused label, in sorted term order, is the error.
    pub fn resolve(
        &self,
        schema: &FieldSchema<'_>,
    ) -> Result<ResolvedFieldSelector, FieldSelectorError> {
        let terms = self
            .requirements
            .iter()
            .map(|r| {
                let (label, source) = kinds::source_for(schema, &r.field)?;
                Ok(Term {
                    label,
                    source,
                    equal: r.operator != FieldOperator::NotEquals,
                    value: r.value.clone(),
                })
            })
            .collect::<Result<_, FieldSelectorError>>()?;
        Ok(ResolvedFieldSelector { terms })
    }
}

impl ResolvedFieldSelector {
    /// True when every term holds for `object` (given in the JSON form of the resolved kind's
    /// group). A field the object lacks reads as its Go zero value (`""`, `false`, `0`).
    pub fn matches(&self, object: &Value) -> bool {
        self.terms
            .iter()
            .all(|t| (t.source.value(object) == t.value) == t.equal)
    }

    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }

    /// `RequiresExactMatch` on the canonical label (`spec.host` reads as `spec.nodeName`,
    /// events.k8s.io `regarding.name` as `involvedObject.name`): the value an `=`/`==` term pins,
    /// e.g. `metadata.name`
    /// for kubectl wait, which the server may turn into a single-object read and into the request
    /// name that authorization sees.
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.equal && t.label == label)
            .map(|t| t.value.as_str())
    }
}
