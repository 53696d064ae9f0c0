//! Field paths spelled exactly like apimachinery's `field.Path.String()`.
//!
//! Go builds paths with `Child` (`a.b`), `Key` (`a[k]`) and `Index` (`a[0]`), and a nil path prints
//! as `<nil>`: the apiserver really answers `<nil>: Invalid value: ...` for a CEL rule on the root of
//! a custom resource, so the nil path is kept as a distinct state instead of an empty string.

use std::fmt;

/// A field path such as `spec.members[0].name`, or the nil path (`<nil>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldPath(Option<String>);

impl FieldPath {
    /// The nil path: Go's `(*field.Path)(nil)`.
    pub(crate) fn nil() -> Self {
        Self(None)
    }

    /// A root path made of one name, like `field.NewPath(name)`.
    pub(crate) fn new(name: &str) -> Self {
        Self(Some(name.to_owned()))
    }

    /// `p.Child(name)`: `a` + `.name` (no dot after the nil path or an empty name).
    pub(crate) fn child(&self, name: &str) -> Self {
        match &self.0 {
            None => Self::new(name),
            Some(s) if name.is_empty() => Self(Some(s.clone())),
            Some(s) if s.is_empty() => Self::new(name),
            Some(s) => Self(Some(format!("{s}.{name}"))),
        }
    }

    /// `p.Key(key)`: `a[key]`.
    pub(crate) fn key(&self, key: &str) -> Self {
        let base = self.0.as_deref().unwrap_or("");
        Self(Some(format!("{base}[{key}]")))
    }

    /// `p.Index(i)`: `a[i]`.
    pub(crate) fn index(&self, i: usize) -> Self {
        let base = self.0.as_deref().unwrap_or("");
        Self(Some(format!("{base}[{i}]")))
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or("<nil>"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spells_paths_like_apimachinery() {
        let p = FieldPath::new("spec.validation.openAPIV3Schema");
        assert_eq!(
            p.child("properties").key("spec").child("type").to_string(),
            "spec.validation.openAPIV3Schema.properties[spec].type"
        );
        assert_eq!(FieldPath::nil().to_string(), "<nil>");
        assert_eq!(
            FieldPath::nil().child("spec").index(2).to_string(),
            "spec[2]"
        );
        assert_eq!(FieldPath::nil().key("a").to_string(), "[a]");
    }
}
