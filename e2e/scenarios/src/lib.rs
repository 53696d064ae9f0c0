//! End-to-end scenarios live in `tests/`: each starts its own local control plane (e2e/localkube),
//! installs the chart with helm and drives real etcd clusters through the operators, checking the
//! outcome with kubectl, kube-rs and etcd's own client. Run them with the workspace
//! (`cargo nextest run --workspace`), which builds the binaries they need.
