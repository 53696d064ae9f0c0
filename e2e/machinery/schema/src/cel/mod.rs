//! `x-kubernetes-validations`: CEL rules, compiled when the CRD is registered and evaluated on
//! every create and update of its objects.
//!
//! Parsing and evaluation come from the `cel` crate with the Kubernetes libraries of `kube-cel`.
//! `cel` does not type-check, so the checks the apiserver's checker makes at registration and
//! that matter most are done here on the parsed expression (see [`check`]), failing closed: a
//! rule naming a function, variable or field that cannot be resolved refuses the CRD instead of
//! being skipped.

mod check;
pub(crate) mod eval;
mod field_path;
mod value;

use kube_cel::cel::Program;
use serde_json::Value;

use crate::field_error::{BadValue, FieldError};
use crate::gofmt;
use crate::model::Node;
use crate::path::FieldPath;

pub(crate) use field_path::normalize as normalize_field_path;
pub(crate) use value::parse_duration as parse_go_duration;

/// The reasons a rule may name (`supportedValidationReason`), sorted as Go lists them.
const SUPPORTED_REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// One `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct CelRule {
    pub(crate) rule: String,
    pub(crate) message: String,
    pub(crate) message_expression: String,
    pub(crate) reason: Option<String>,
    pub(crate) field_path: String,
    pub(crate) optional_old_self: Option<bool>,
    /// `fieldPath` in `field.Path` spelling, once validated against the schema.
    pub(crate) normalized_field_path: String,
    pub(crate) program: Option<Program>,
    pub(crate) message_program: Option<Program>,
    pub(crate) uses_old_self: bool,
}

impl CelRule {
    /// The rule as Go's `json.Marshal` prints the internal `apiextensions.ValidationRule`
    /// struct (fields in declaration order, no JSON tags): the bad value of compile errors.
    fn rendered(&self) -> BadValue {
        let mut out = String::from("{\"Rule\":");
        gofmt::json_string(&self.rule, &mut out);
        out.push_str(",\"Message\":");
        gofmt::json_string(&self.message, &mut out);
        out.push_str(",\"MessageExpression\":");
        gofmt::json_string(&self.message_expression, &mut out);
        out.push_str(",\"Reason\":");
        match &self.reason {
            Some(r) => gofmt::json_string(r, &mut out),
            None => out.push_str("null"),
        }
        out.push_str(",\"FieldPath\":");
        gofmt::json_string(&self.field_path, &mut out);
        out.push_str(",\"OptionalOldSelf\":");
        out.push_str(match self.optional_old_self {
            Some(true) => "true",
            Some(false) => "false",
            None => "null",
        });
        out.push('}');
        BadValue::Rendered(out)
    }

    /// `ruleErrorString`: the message if there is one, else the rule.
    pub(crate) fn error_string(&self) -> String {
        if self.message.is_empty() {
            self.rule.trim().to_owned()
        } else {
            self.message.trim().to_owned()
        }
    }
}

/// Reads the `x-kubernetes-validations` of a schema object and reports the problems the
/// apiserver finds before compiling (empty rule, bad message, unknown reason, bad fieldPath).
/// `node` is the schema the rules apply to, used to resolve `fieldPath`.
pub(crate) fn read_rules(
    raw: &Value,
    node: &Node,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Vec<CelRule> {
    let Some(list) = raw.get("x-kubernetes-validations") else {
        return Vec::new();
    };
    let base = path.child("x-kubernetes-validations");
    let Some(items) = list.as_array() else {
        errors.push(FieldError::invalid(
            &base,
            BadValue::Json(list.clone()),
            "must be a list of validation rules",
        ));
        return Vec::new();
    };
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = base.index(i);
        let text = |key: &str| {
            item.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let rule = CelRule {
            rule: text("rule"),
            message: text("message"),
            message_expression: text("messageExpression"),
            reason: item
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_owned),
            field_path: text("fieldPath"),
            optional_old_self: item.get("optionalOldSelf").and_then(Value::as_bool),
            normalized_field_path: String::new(),
            program: None,
            message_program: None,
            uses_old_self: false,
        };
        let (trimmed_rule, trimmed_msg) = (rule.rule.trim(), rule.message.trim());
        if trimmed_rule.is_empty() {
            errors.push(FieldError::required(
                &at.child("rule"),
                "rule is not specified",
            ));
        } else if !rule.message.is_empty() && trimmed_msg.is_empty() {
            errors.push(FieldError::invalid(
                &at.child("message"),
                BadValue::string(&rule.message),
                "must be non-empty if specified",
            ));
        } else if has_newlines(trimmed_msg) {
            errors.push(FieldError::invalid(
                &at.child("message"),
                BadValue::string(&rule.message),
                "must not contain line breaks",
            ));
        } else if has_newlines(trimmed_rule) && trimmed_msg.is_empty() {
            errors.push(FieldError::required(
                &at.child("message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !rule.message_expression.is_empty() && rule.message_expression.trim().is_empty() {
            errors.push(FieldError::required(
                &at.child("messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = &rule.reason
            && !SUPPORTED_REASONS.contains(&reason.as_str())
        {
            let supported: Vec<String> =
                SUPPORTED_REASONS.iter().map(|s| (*s).to_owned()).collect();
            errors.push(FieldError::not_supported(
                &at.child("reason"),
                BadValue::string(reason),
                &supported,
            ));
        }
        let mut rule = rule;
        if !rule.field_path.is_empty() {
            let fp = at.child("fieldPath");
            if rule.field_path.trim().is_empty() {
                errors.push(FieldError::invalid(
                    &fp,
                    BadValue::string(&rule.field_path),
                    "must be non-empty if specified",
                ));
            }
            if rule.field_path.contains(['\n', '\r']) {
                errors.push(FieldError::invalid(
                    &fp,
                    BadValue::string(&rule.field_path),
                    "must not contain line breaks",
                ));
            }
            match normalize_field_path(&rule.field_path, node) {
                Ok(normalized) => rule.normalized_field_path = normalized,
                Err(()) => errors.push(FieldError::invalid(
                    &fp,
                    BadValue::string(&rule.field_path),
                    "must be a valid path",
                )),
            }
        }
        rules.push(rule);
    }
    rules
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// Compiles the rules of `node` (whose own rules are `rules`): parses each rule and
/// `messageExpression`, and checks every name they use. `is_resource_root` is true at the root
/// of the object and of embedded resources, where `metadata` is an `ObjectMeta`.
/// `uncorrelatable` is the path of the nearest list or map above whose elements cannot be
/// matched between the old and the new object: `oldSelf` is refused below it.
pub(crate) fn compile_rules(
    rules: &mut [CelRule],
    node: &Node,
    is_resource_root: bool,
    uncorrelatable: Option<&FieldPath>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    for (i, rule) in rules.iter_mut().enumerate() {
        if rule.rule.trim().is_empty() {
            continue;
        }
        let at = path.child("x-kubernetes-validations").index(i);
        match check::compile(&rule.rule, node, is_resource_root, true) {
            Ok(compiled) => {
                rule.uses_old_self = compiled.uses_old_self;
                rule.program = Some(compiled.program);
            }
            Err(detail) => {
                errors.push(FieldError::invalid(
                    &at.child("rule"),
                    rule.rendered(),
                    format!("compilation failed: {detail}"),
                ));
            }
        }
        if !rule.message_expression.trim().is_empty() {
            match check::compile(&rule.message_expression, node, is_resource_root, false) {
                Ok(compiled) => rule.message_program = Some(compiled.program),
                Err(detail) => errors.push(FieldError::invalid(
                    &at.child("messageExpression"),
                    rule.rendered(),
                    format!("messageExpression compilation failed: {detail}"),
                )),
            }
        }
        if rule.program.is_some() {
            if rule.uses_old_self {
                if let Some(list_path) = uncorrelatable {
                    errors.push(FieldError::invalid(
                        &at.child("rule"),
                        BadValue::string(&rule.rule),
                        format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {list_path}"),
                    ));
                }
            } else if let Some(optional) = rule.optional_old_self {
                errors.push(FieldError::invalid(
                    &at.child("optionalOldSelf"),
                    BadValue::Json(Value::Bool(optional)),
                    "may not be set if oldSelf is not used in rule",
                ));
            }
        }
    }
}

/// The names of the CEL functions rules may call: the standard functions of the `cel` crate
/// and the Kubernetes libraries registered by `kube-cel` (a unit test proves each one is
/// registered). Anything else refuses the CRD at registration.
pub(crate) const SUPPORTED_FUNCTIONS: &[&str] = &[
    // cel standard library
    "contains",
    "size",
    "max",
    "min",
    "startsWith",
    "endsWith",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "optional.none",
    "optional.of",
    "optional.ofNonZeroValue",
    "value",
    "hasValue",
    "or",
    "orValue",
    "matches",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    // cel-go extensions and Kubernetes libraries
    "add",
    "asApproximateFloat",
    "asInteger",
    "base64.decode",
    "base64.encode",
    "charAt",
    "cidr",
    "compareTo",
    "containsCIDR",
    "containsIP",
    "distinct",
    "family",
    "find",
    "findAll",
    "first",
    "flatten",
    "format",
    "format.byte",
    "format.date",
    "format.datetime",
    "format.dns1035Label",
    "format.dns1035LabelPrefix",
    "format.dns1123Label",
    "format.dns1123LabelPrefix",
    "format.dns1123Subdomain",
    "format.dns1123SubdomainPrefix",
    "format.labelValue",
    "format.named",
    "format.qualifiedName",
    "format.uri",
    "format.uuid",
    "getEscapedPath",
    "getHost",
    "getHostname",
    "getPort",
    "getQuery",
    "getScheme",
    "indexOf",
    "ip",
    "ip.isCanonical",
    "isCIDR",
    "isCIDRv4",
    "isCIDRv6",
    "isGlobalUnicast",
    "isGreaterThan",
    "isIP",
    "isIPv4",
    "isIPv6",
    "isInteger",
    "isLessThan",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isLoopback",
    "isQuantity",
    "isSemver",
    "isSorted",
    "isURL",
    "isUnspecified",
    "join",
    "jsonpatch.escapeKey",
    "last",
    "lastIndexOf",
    "lists.range",
    "lowerAscii",
    "major",
    "masked",
    "math.abs",
    "math.bitAnd",
    "math.bitNot",
    "math.bitOr",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.bitXor",
    "math.ceil",
    "math.floor",
    "math.greatest",
    "math.isFinite",
    "math.isInf",
    "math.isNaN",
    "math.least",
    "math.round",
    "math.sign",
    "math.sqrt",
    "math.trunc",
    "minor",
    "patch",
    "prefixLength",
    "quantity",
    "replace",
    "reverse",
    "semver",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "sign",
    "slice",
    "sort",
    "split",
    "strings.quote",
    "sub",
    "substring",
    "sum",
    "trim",
    "upperAscii",
    "url",
    "validate",
];

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::KubeCelExt;
    use kube_cel::cel::{Context, ExecutionError};

    #[test]
    fn every_supported_function_is_registered() {
        let ctx = Context::default().with_all();
        for name in SUPPORTED_FUNCTIONS {
            // An unregistered function fails with UndeclaredReference before its arguments are looked at.
            let program = Program::compile(&format!("{name}()")).unwrap();
            if let Err(ExecutionError::UndeclaredReference(r)) = program.execute(&ctx) {
                panic!("{name} is not registered ({r})");
            }
        }
    }
}
