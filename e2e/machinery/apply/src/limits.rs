//! Bounds on untrusted input.

/// The deepest path any walk follows. Kubernetes objects nest a few dozen levels at most;
/// serde_json refuses to parse past 128. Anything deeper is rejected instead of risking the stack.
pub(crate) const MAX_DEPTH: usize = 200;
