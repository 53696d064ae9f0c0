//! Linux plumbing of the localkube node agent: a bridge per instance, a network/UTS namespace per
//! pod, containers as processes started through a shim. No Kubernetes types here: the kubelet
//! logic turns Pods into [`SandboxSpec`] and [`ContainerSpec`] and drives these calls.
//!
//! ```text
//! HostNetwork::claim(None, shim)      lkbr<N>, 10.244.N.1/24, lock /run/localkube/net-<N>.lock
//!   .add_service_ip(10.96.N.x)        a /32 on the bridge for the userspace Service proxy
//!   .create_sandbox(spec)             pause process: netns + UTS ns, eth0 = 10.244.N.k/24
//!     .spawn(container)               shim: setns, own mount ns, bind mounts, execve; CRI log
//!     .exec(pid, argv, env, timeout)  shim: the container's namespaces, output in memory
//!     .destroy()
//!   .release()
//! ```
//!
//! Everything started here dies with localkube, even on SIGKILL (PR_SET_PDEATHSIG in the shim);
//! the veth dies with the pod's namespace, and the bridge is rebuilt at the next claim of N.
//! Needs root, `ip` (iproute2) and `nsenter` (util-linux).

mod container;
mod crilog;
mod error;
mod exec;
mod host;
mod ip;
mod ipam;
mod launch;
mod lookpath;
mod netns;
mod sandbox;
mod shim;
mod wire;

pub use container::{BindMount, Confinement, Container, ContainerSpec, ExitStatus};
pub use error::{Error, ExecError, SpawnError};
pub use exec::ExecOutput;
pub use host::HostNetwork;
pub use launch::Shim;
pub use nix::errno::Errno;
pub use nix::sys::signal::Signal;
pub use sandbox::{PodSandbox, SandboxSpec};
pub use shim::shim_main;
