//! Structural schemas of CustomResourceDefinitions for the local control plane: pruning, defaulting, validation with kube-openapi messages, CEL rules (fail closed).
