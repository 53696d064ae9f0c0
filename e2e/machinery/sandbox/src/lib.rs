//! Linux plumbing of the localkube node agent: a bridge per instance, a network/UTS namespace per pod, containers as processes started through a shim
