//! The compiled form of an `openAPIV3Schema`: one [`Node`] per schema object.
//!
//! The same type serves the structural part (properties, items, additionalProperties) and the
//! value validations under `allOf`/`anyOf`/`oneOf`/`not`, because kube-openapi validates both
//! with one algorithm.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use crate::cel::CelRule;

/// The OpenAPI `type` of a node (`null` is refused at compile time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchemaType {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl SchemaType {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "object" => Self::Object,
            "array" => Self::Array,
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }
}

/// `additionalProperties`: absent, a boolean, or a schema for the values of a map.
#[derive(Debug, Default)]
pub(crate) enum Additional {
    #[default]
    Absent,
    Bool(bool),
    Schema(Box<Node>),
}

/// A compiled `pattern`.
#[derive(Debug)]
pub(crate) struct Pattern {
    /// As written in the CRD: messages quote it.
    pub(crate) source: String,
    pub(crate) regex: Regex,
}

/// One schema object.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub(crate) ty: Option<SchemaType>,
    pub(crate) int_or_string: bool,
    /// The `format`, kept only when the apiserver validates it (others are stripped like
    /// `StripUnsupportedFormatsPostProcess` does).
    pub(crate) format: Option<String>,
    pub(crate) nullable: bool,
    pub(crate) default: Option<Value>,
    pub(crate) preserve_unknown: bool,
    pub(crate) embedded: bool,
    pub(crate) list_type: Option<String>,
    pub(crate) list_map_keys: Vec<String>,
    pub(crate) map_type: Option<String>,

    pub(crate) properties: BTreeMap<String, Node>,
    pub(crate) additional: Additional,
    pub(crate) items: Option<Box<Node>>,

    pub(crate) enumeration: Option<Vec<Value>>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) max_length: Option<i64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) pattern: Option<Pattern>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_items: Option<i64>,
    pub(crate) unique_items: bool,
    pub(crate) max_properties: Option<i64>,
    pub(crate) min_properties: Option<i64>,
    pub(crate) required: Vec<String>,
    pub(crate) all_of: Vec<Node>,
    pub(crate) any_of: Vec<Node>,
    pub(crate) one_of: Vec<Node>,
    pub(crate) not: Option<Box<Node>>,

    /// `x-kubernetes-validations`, compiled.
    pub(crate) rules: Vec<CelRule>,
}

impl Node {
    /// The schema of the values of a map (`additionalProperties: {...}`), if any.
    pub(crate) fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Additional::Schema(s) => Some(s),
            _ => None,
        }
    }

    /// Whether `additionalProperties` is set at all (a schema, `true` or `false`).
    pub(crate) fn has_additional(&self) -> bool {
        !matches!(self.additional, Additional::Absent)
    }

    /// The type name the apiserver reports as the bad value of CEL errors (`sts.Type`).
    pub(crate) fn type_name(&self) -> &'static str {
        self.ty.map(SchemaType::name).unwrap_or("")
    }
}
