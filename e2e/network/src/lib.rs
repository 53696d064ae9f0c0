//! Cluster DNS for cluster.local and the userspace ClusterIP proxy of localkube
