//! The EtcdBackup operator (in progress).
