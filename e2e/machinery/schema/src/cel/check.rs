//! The registration-time checks of a CEL expression that the `cel` crate does not make:
//! every function is supported, every variable is declared, and every field selected on
//! `self`/`oldSelf` exists in the schema. Problems are reported in cel-go's layout:
//!
//! ```text
//! ERROR: <input>:1:17: undeclared reference to 'bogusFn' (in container '')
//!  | self.foo.bogusFn()
//!  | ................^
//! ```

use kube_cel::cel::Program;
use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::SUPPORTED_FUNCTIONS;
use super::value::escape_field_name;
use crate::model::{Node, SchemaType};

/// A parsed expression that passed the checks.
pub(super) struct Compiled {
    pub(super) program: Program,
    pub(super) uses_old_self: bool,
}

/// One problem, located by the text it is about.
struct Issue {
    /// Byte offset in the source the caret points at.
    offset: usize,
    message: String,
}

/// Parses and checks `source`, evaluated with `self` bound to a value of `node` (and `oldSelf`
/// to the previous one). `is_rule` is false for a `messageExpression`, whose use of `oldSelf`
/// does not make the rule a transition rule.
pub(super) fn compile(
    source: &str,
    node: &Node,
    is_resource_root: bool,
    is_rule: bool,
) -> Result<Compiled, String> {
    let program = Program::compile(source).map_err(|errors| {
        errors
            .errors
            .iter()
            .map(|e| render(source, line_col_offset(source, e.pos.0, e.pos.1), &e.msg))
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    let mut checker = Checker {
        source,
        issues: Vec::new(),
        uses_old_self: false,
        is_resource_root,
        root: node,
    };
    checker.walk(program.expression(), &mut Vec::new());
    if checker.issues.is_empty() {
        return Ok(Compiled {
            program,
            uses_old_self: checker.uses_old_self && is_rule,
        });
    }
    checker.issues.sort_by_key(|i| i.offset);
    Err(checker
        .issues
        .iter()
        .map(|i| render(source, i.offset, &i.message))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// What a sub-expression is known to be, for field checks.
#[derive(Clone, Copy)]
enum Known<'a> {
    /// A value of this schema.
    Schema(&'a Node),
    /// The `metadata` of a resource root: an `ObjectMeta` with `name` and `generateName` only.
    ObjectMeta,
    /// Anything else.
    Unknown,
}

struct Checker<'a> {
    source: &'a str,
    issues: Vec<Issue>,
    uses_old_self: bool,
    is_resource_root: bool,
    root: &'a Node,
}

impl<'a> Checker<'a> {
    fn walk(&mut self, e: &IdedExpr, scope: &mut Vec<String>) {
        match &e.expr {
            Expr::Ident(name) => self.ident(name, scope),
            Expr::Select(select) => {
                // The operand is checked first, then the field against what the operand is.
                self.walk(&select.operand, scope);
                if let Known::Schema(_) | Known::ObjectMeta = self.known(&select.operand, scope) {
                    self.field(&select.operand, &select.field, scope);
                }
            }
            Expr::Call(call) => {
                // In `math.abs(x)` the target `math` is a namespace, not a variable.
                let namespaced = matches!(call.target.as_deref(), Some(IdedExpr { expr: Expr::Ident(prefix), .. })
                    if !scope.contains(prefix) && SUPPORTED_FUNCTIONS.contains(&format!("{prefix}.{}", call.func_name).as_str()));
                if let Some(target) = call.target.as_deref().filter(|_| !namespaced) {
                    self.walk(target, scope);
                }
                for arg in &call.args {
                    self.walk(arg, scope);
                }
                self.function(&call.func_name, call.target.as_deref());
            }
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range, scope);
                self.walk(&c.accu_init, scope);
                let before = scope.len();
                scope.push(c.iter_var.clone());
                if let Some(v2) = &c.iter_var2 {
                    scope.push(v2.clone());
                }
                scope.push(c.accu_var.clone());
                self.walk(&c.loop_cond, scope);
                self.walk(&c.loop_step, scope);
                self.walk(&c.result, scope);
                scope.truncate(before);
            }
            Expr::List(list) => {
                for el in &list.elements {
                    self.walk(el, scope);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(m) => {
                            self.walk(&m.key, scope);
                            self.walk(&m.value, scope);
                        }
                        EntryExpr::StructField(f) => self.walk(&f.value, scope),
                    }
                }
            }
            Expr::Struct(s) => {
                // Protobuf message construction: no message types are declared for CRD rules.
                self.issue_at_text(
                    &s.type_name,
                    format!(
                        "undeclared reference to '{}' (in container '')",
                        s.type_name
                    ),
                );
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn ident(&mut self, name: &str, scope: &[String]) {
        if scope.iter().any(|s| s == name) || name.starts_with('@') {
            return;
        }
        match name {
            "self" => {}
            "oldSelf" => self.uses_old_self = true,
            _ => self.issue_at_word(
                name,
                format!("undeclared reference to '{name}' (in container '')"),
            ),
        }
    }

    fn function(&mut self, name: &str, target: Option<&IdedExpr>) {
        let is_operator =
            name.starts_with('_') || name.starts_with('@') || name == "!_" || name == "-_";
        if is_operator {
            return;
        }
        if let Some(IdedExpr {
            expr: Expr::Ident(prefix),
            ..
        }) = target
            && SUPPORTED_FUNCTIONS.contains(&format!("{prefix}.{name}").as_str())
        {
            return;
        }
        if SUPPORTED_FUNCTIONS.contains(&name) {
            return;
        }
        // cel-go points at the opening parenthesis of the call.
        let offset = find_call(self.source, name).unwrap_or(0);
        self.issues.push(Issue {
            offset,
            message: format!("undeclared reference to '{name}' (in container '')"),
        });
    }

    /// What `e` is, as far as field checks are concerned.
    fn known(&self, e: &IdedExpr, scope: &[String]) -> Known<'a> {
        match &e.expr {
            Expr::Ident(name)
                if (name == "self" || name == "oldSelf") && !scope.iter().any(|s| s == name) =>
            {
                Known::Schema(self.root)
            }
            Expr::Select(select) if !select.test => match self.known(&select.operand, scope) {
                Known::Schema(node) => {
                    let at_resource_root = std::ptr::eq(node, self.root) && self.is_resource_root;
                    if (at_resource_root || node.embedded) && select.field == "metadata" {
                        return Known::ObjectMeta;
                    }
                    match declared_fields(node) {
                        Some(fields) => fields
                            .into_iter()
                            .find(|(escaped, _)| *escaped == select.field)
                            .and_then(|(_, child)| child)
                            .map_or(Known::Unknown, Known::Schema),
                        None => Known::Unknown,
                    }
                }
                _ => Known::Unknown,
            },
            _ => Known::Unknown,
        }
    }

    /// Checks that `field` exists on what `operand` is.
    fn field(&mut self, operand: &IdedExpr, field: &str, scope: &[String]) {
        match self.known(operand, scope) {
            Known::ObjectMeta => {
                if field != "name" && field != "generateName" {
                    self.issue_at_text(&format!(".{field}"), format!("undefined field '{field}'"));
                }
            }
            Known::Schema(node) => {
                let at_resource_root = std::ptr::eq(node, self.root) && self.is_resource_root;
                if (at_resource_root || node.embedded)
                    && matches!(field, "apiVersion" | "kind" | "metadata")
                {
                    return;
                }
                if let Some(fields) = declared_fields(node)
                    && !fields.iter().any(|(escaped, _)| escaped == field)
                {
                    self.issue_at_text(&format!(".{field}"), format!("undefined field '{field}'"));
                }
            }
            Known::Unknown => {}
        }
    }

    fn issue_at_word(&mut self, word: &str, message: String) {
        let offset = find_word(self.source, word).unwrap_or(0);
        self.issues.push(Issue { offset, message });
    }

    fn issue_at_text(&mut self, text: &str, message: String) {
        let offset = self.source.find(text).unwrap_or(0);
        self.issues.push(Issue { offset, message });
    }
}

/// The CEL field names of an object schema whose fields are all known (no map, no preserved
/// unknown fields), with the schema of each; `None` when any field name may exist.
fn declared_fields(node: &Node) -> Option<Vec<(String, Option<&Node>)>> {
    let is_object =
        node.ty == Some(SchemaType::Object) || (node.ty.is_none() && !node.properties.is_empty());
    if !is_object
        || node.properties.is_empty()
        || node.has_additional()
        || node.preserve_unknown
        || node.embedded
    {
        return None;
    }
    Some(
        node.properties
            .iter()
            .map(|(name, child)| (escape_field_name(name), Some(child)))
            .collect(),
    )
}

/// Byte offset of the `(` of the first call of `name` in `source`.
fn find_call(source: &str, name: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = source[from..].find(name) {
        let start = from + found;
        let end = start + name.len();
        let rest = &source[end..];
        let trimmed = rest.trim_start();
        let boundary_before = source[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_ident_char(c));
        if boundary_before && trimmed.starts_with('(') {
            return Some(end + (rest.len() - trimmed.len()));
        }
        from = end;
    }
    None
}

/// Byte offset of the first whole-word occurrence of `word`.
fn find_word(source: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = source[from..].find(word) {
        let start = from + found;
        let end = start + word.len();
        let before_ok = source[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_ident_char(c) && c != '.');
        let after_ok = source[end..]
            .chars()
            .next()
            .is_none_or(|c| !is_ident_char(c));
        if before_ok && after_ok {
            return Some(start);
        }
        from = end;
    }
    None
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The byte offset of a 1-based (line, column) position as the `cel` parser reports it.
fn line_col_offset(source: &str, line: isize, col: isize) -> usize {
    let mut offset = 0;
    for (i, l) in source.split('\n').enumerate() {
        if i as isize + 1 == line {
            let col = usize::try_from(col.max(1) - 1).unwrap_or(0);
            return offset + l.char_indices().nth(col).map_or(l.len(), |(b, _)| b);
        }
        offset += l.len() + 1;
    }
    source.len()
}

/// One issue in cel-go's `ToDisplayString` layout.
fn render(source: &str, offset: usize, message: &str) -> String {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or("");
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source.get(line_start..offset).unwrap_or("").chars().count();
    let line = source[line_start..]
        .split('\n')
        .next()
        .unwrap_or("")
        .replace('\t', " ");
    let dots = ".".repeat(col.min(line.chars().count()));
    format!(
        "ERROR: <input>:{line_no}:{}: {message}\n | {line}\n | {dots}^",
        col + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(schema: serde_json::Value) -> Node {
        crate::compile::compile_node_for_tests(&schema)
    }

    #[test]
    fn unknown_function_is_reported_at_its_parenthesis() {
        let n = node(json!({"type": "object", "properties": {"foo": {"type": "string"}}}));
        let err = compile("self.foo.bogusFn()", &n, false, true)
            .err()
            .unwrap();
        assert_eq!(
            err,
            "ERROR: <input>:1:17: undeclared reference to 'bogusFn' (in container '')\n | self.foo.bogusFn()\n | ................^"
        );
    }

    #[test]
    fn undefined_fields_and_variables() {
        let n = node(
            json!({"type": "object", "properties": {"a-b": {"type": "object", "properties": {"c": {"type": "integer"}}}}}),
        );
        assert!(
            compile(
                "self.a__dash__b.c > 0 && has(self.a__dash__b.c)",
                &n,
                false,
                true
            )
            .is_ok()
        );
        let err = compile("self.a__dash__b.d > 0", &n, false, true)
            .err()
            .unwrap();
        assert!(err.contains("undefined field 'd'"), "{err}");
        let err = compile("x > 0", &n, false, true).err().unwrap();
        assert!(err.contains("undeclared reference to 'x'"), "{err}");
        assert!(compile("[1, 2].all(x, x > 0)", &n, false, true).is_ok());
        assert!(compile("self.metadata.name == 'a'", &n, true, true).is_ok());
        assert!(
            compile("self.metadata.labels == {}", &n, true, true)
                .err()
                .unwrap()
                .contains("undefined field 'labels'")
        );
    }

    #[test]
    fn old_self_use_is_recorded_and_kubernetes_functions_are_accepted() {
        let n = node(json!({"type": "object", "properties": {"s": {"type": "string"}}}));
        assert!(
            compile("self.s == oldSelf.s", &n, false, true)
                .unwrap()
                .uses_old_self
        );
        assert!(
            !compile("self.s.matches('^a$')", &n, false, true)
                .unwrap()
                .uses_old_self
        );
        assert!(
            compile(
                "quantity(self.s).isGreaterThan(quantity('1Gi')) && math.abs(-1) == 1",
                &n,
                false,
                true
            )
            .is_ok()
        );
        assert!(compile("cel.bind(x, 1, x > 0)", &n, false, true).is_err());
    }

    #[test]
    fn parse_errors_use_cel_go_layout() {
        let n = Node::default();
        let err = compile("self.a >", &n, false, true).err().unwrap();
        assert!(err.starts_with("ERROR: <input>:1:"), "{err}");
        assert!(err.contains("\n | self.a >\n | "), "{err}");
    }
}
