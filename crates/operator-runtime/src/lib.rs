//! Kubernetes plumbing shared by the operators (in progress).
