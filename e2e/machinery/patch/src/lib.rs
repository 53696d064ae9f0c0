//! Kubernetes patch semantics for the local control plane: JSON patch as the Go library applies it, JSON merge patch, strategic merge patch for built-in kinds.
