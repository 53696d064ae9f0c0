//! What the localkube node agent derives from a Pod spec, as pure functions: env, command, volume files, resolv.conf and hosts, image map, back-off, probes and pod status
