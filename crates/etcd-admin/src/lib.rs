//! etcd membership and health (in progress).
