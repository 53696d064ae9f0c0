//! Finding a pod's processes: every process of a pod (containers, their children, exec'd
//! commands, the pause process) lives in the pod's network namespace, and only they do, so the
//! namespace is the pod's membership list, the way a cgroup would be for a real runtime.

use std::os::unix::fs::MetadataExt;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// (device, inode) of the network namespace of `pid` (`self` for the caller).
pub(crate) fn netns_id(pid: &str) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(format!("/proc/{pid}/ns/net"))?;
    Ok((m.dev(), m.ino()))
}

/// SIGKILLs every process in `netns` except `spare` (the caller). Rescans because a process
/// may fork while we scan; zombies have no namespaces left, so it converges.
pub(crate) fn kill_all_in(netns: (u64, u64), spare: Option<u32>) {
    for _ in 0..50 {
        let pids: Vec<i32> = pids_in(netns)
            .into_iter()
            .filter(|pid| Some(*pid) != spare)
            .filter_map(|pid| i32::try_from(pid).ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

fn pids_in(netns: (u64, u64)) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| netns_id(&pid.to_string()).is_ok_and(|id| id == netns))
        .collect()
}
