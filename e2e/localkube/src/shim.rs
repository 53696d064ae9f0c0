//! `localkube shim --parent PID -- PROGRAM ARGS...`: how localkube starts its children. The shim
//! asks the kernel to kill it when its parent dies (PR_SET_PDEATHSIG survives execve), checks the
//! parent did not die before that, then becomes PROGRAM. So even a SIGKILLed localkube leaves no
//! etcd behind, without any `unsafe` pre-exec hook.

use std::os::unix::process::CommandExt;
use std::process::Command;

pub fn exec(parent: u32, program: &str, args: &[String]) -> std::io::Error {
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        return std::io::Error::other(format!("PR_SET_PDEATHSIG: {e}"));
    }
    let current_parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
    if current_parent != Some(parent) {
        return std::io::Error::other("the parent exited before the shim started");
    }
    Command::new(program).args(args).exec()
}

/// A command that runs `program` through the shim, tied to this process's lifetime.
pub fn command(program: &std::path::Path) -> std::io::Result<tokio::process::Command> {
    let me = std::env::current_exe()?;
    let mut cmd = tokio::process::Command::new(me);
    cmd.arg("shim")
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--")
        .arg(program);
    Ok(cmd)
}
