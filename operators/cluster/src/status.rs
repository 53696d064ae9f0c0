//! The EtcdCluster status, computed from the observed state and the planned action. Pure.
