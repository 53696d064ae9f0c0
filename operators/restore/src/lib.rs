//! The EtcdRestore operator (in progress: the seed preparation step first).
