//! localkube: the Kubernetes API server (and, later, the node agent and controllers) that the
//! end-to-end tests and the demo run against. See e2e/README.md.
