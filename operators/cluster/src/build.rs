//! The Kubernetes objects of a cluster, built from the EtcdCluster alone. Pure.
