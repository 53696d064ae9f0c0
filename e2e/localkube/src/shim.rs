//! `localkube shim --parent PID [--bind SOURCE:TARGET]... [--new-net] -- PROGRAM ARGS...`: how localkube starts
//! its children. The shim asks the kernel to kill it when its parent dies (PR_SET_PDEATHSIG
//! survives execve), checks the parent did not die before that, then becomes PROGRAM. So even a
//! SIGKILLed localkube leaves no etcd behind, without any `unsafe` pre-exec hook.
//!
//! With `--bind` (repeatable), PROGRAM runs in a mount namespace of its own where each SOURCE is
//! mounted on its TARGET (a directory or a file):
//! how a path a binary hard-codes (kube-controller-manager's host-path provisioner writes under
//! `/tmp/hostpath_pv`) lands in the instance's state directory, so parallel instances do not share
//! it and removing the state directory removes the volumes.
//!
//! With `--new-net`, PROGRAM runs in a network namespace of its own (the real node's: its
//! processes, netfilter tables and routes never touch the host's; the namespace goes when its last
//! process exits).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

pub fn exec(
    parent: u32,
    binds: &[String],
    new_net: bool,
    program: &str,
    args: &[String],
) -> std::io::Error {
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        return std::io::Error::other(format!("PR_SET_PDEATHSIG: {e}"));
    }
    let current_parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
    if current_parent != Some(parent) {
        return std::io::Error::other("the parent exited before the shim started");
    }
    if !binds.is_empty()
        && let Err(e) = private_bind_mounts(binds)
    {
        return std::io::Error::other(format!("--bind {}: {e}", binds.join(" --bind ")));
    }
    if new_net && let Err(e) = unshare(CloneFlags::CLONE_NEWNET) {
        return std::io::Error::other(format!("--new-net: unshare(CLONE_NEWNET): {e}"));
    }
    Command::new(program).args(args).exec()
}

/// A private mount namespace (this process is single-threaded: the shim runs before any thread)
/// in which each `SOURCE:TARGET` is bind-mounted; a directory SOURCE and its TARGET are created on
/// the host if missing (a file SOURCE needs an existing TARGET: /proc/sys files).
fn private_bind_mounts(binds: &[String]) -> Result<(), String> {
    let mut pairs = Vec::new();
    for bind in binds {
        let (source, target) = bind
            .split_once(':')
            .ok_or(format!("{bind}: expected SOURCE:TARGET"))?;
        if !Path::new(source).is_file() {
            for dir in [source, target] {
                std::fs::create_dir_all(dir).map_err(|e| format!("creating {dir}: {e}"))?;
            }
        }
        pairs.push((source, target));
    }
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    // Private propagation: the bind mount stays out of the host's namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    for (source, target) in pairs {
        mount(
            Some(Path::new(source)),
            Path::new(target),
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| format!("bind-mounting {source} on {target}: {e}"))?;
    }
    Ok(())
}

/// A command that runs `program` through the shim, tied to this process's lifetime.
pub fn command(program: &Path) -> std::io::Result<tokio::process::Command> {
    command_with_bind(program, None)
}

/// As [`command`], with `bind = (source, target)` mounted in the program's own mount namespace.
pub fn command_with_bind(
    program: &Path,
    bind: Option<(&Path, &Path)>,
) -> std::io::Result<tokio::process::Command> {
    command_with_binds(program, bind.as_slice(), false)
}

/// As [`command`], with each `(source, target)` mounted in the program's own mount namespace,
/// and with `new_net` in a network namespace of its own.
pub fn command_with_binds(
    program: &Path,
    binds: &[(&Path, &Path)],
    new_net: bool,
) -> std::io::Result<tokio::process::Command> {
    let me = std::env::current_exe()?;
    let mut cmd = tokio::process::Command::new(me);
    cmd.arg("shim")
        .arg("--parent")
        .arg(std::process::id().to_string());
    for (source, target) in binds {
        cmd.arg(format!("--bind={}:{}", source.display(), target.display()));
    }
    if new_net {
        cmd.arg("--new-net");
    }
    cmd.arg("--").arg(program);
    Ok(cmd)
}
