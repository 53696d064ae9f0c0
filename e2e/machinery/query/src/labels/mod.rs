//! Label selectors: the `labelSelector` query parameter and `metav1.LabelSelector` objects.

mod object;
mod parse;
mod selector;

pub use object::{
    LabelSelectorObject, MalformedSelector, SelectorConversionError, SelectorExpression,
    selector_from_object,
};
pub use parse::{LabelSelectorParseError, parse_label_selector};
pub use selector::{LabelSelector, Labels, Operator, Requirement, RequirementError};
