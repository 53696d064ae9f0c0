//! The child side: `localkube sandbox-shim <role> <label>`, a re-exec of localkube that sets up
//! namespaces and mounts and then becomes the pause process or `execve`s the container's program.
//! Doing it in a fresh, single-threaded process (instead of `pre_exec` closures in the
//! multi-threaded agent) is what makes `unshare(CLONE_NEWNS)` and `setns` into a mount namespace
//! legal, and needs no `unsafe`.
//!
//! Every role first ties itself to localkube's life (PR_SET_PDEATHSIG=SIGKILL, then checks the
//! parent did not die before that), and starts its own session, so a terminal's Ctrl-C reaches
//! localkube (which stops pods gracefully) and not the pods directly.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::signal::{SigSet, Signal};

use crate::container::BindMount;
use crate::lookpath::look_path;
use crate::netns::{kill_all_in, netns_id};
use crate::wire::{ContainerRequest, ExecRequest, Failure, PauseRequest, Report, Role};

/// The shim's exit code when it fails before the program runs (the shell's "cannot execute").
const SETUP_FAILED: u8 = 127;

/// Entry point of the hidden `sandbox-shim` subcommand. `args` are the arguments after it:
/// `<role> <label>` (the label only names the pod/container in `ps`). localkube must call this
/// first thing in `main`, before starting the tokio runtime or any thread: `unshare` of a mount
/// namespace and `setns` into one are refused to multi-threaded processes.
pub fn shim_main(args: Vec<OsString>) -> ExitCode {
    let Some(role) = args.first().and_then(|a| a.to_str()).and_then(Role::parse) else {
        eprintln!("usage: sandbox-shim pause|container|exec <label> (request on stdin)");
        return ExitCode::from(2);
    };
    let (request, mut control) = match take_control() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("sandbox-shim: reading the request: {e}");
            return ExitCode::from(SETUP_FAILED);
        }
    };
    let failure = match role {
        Role::Pause => match decode(&request).and_then(|r| pause(r, &mut control)) {
            Ok(()) => return ExitCode::SUCCESS,
            Err(f) => f,
        },
        Role::Container => failed(decode(&request).and_then(container)),
        Role::Exec => failed(decode(&request).and_then(exec)),
    };
    // Only failures get here: a container or exec that succeeds has become its program.
    let report = serde_json::to_vec(&Report::Failed(failure)).unwrap_or_default();
    let _ = control.write_all(&report);
    ExitCode::from(SETUP_FAILED)
}

/// Reads the request (stdin is the control socket, shut for writing by localkube once the request
/// is sent), keeps a close-on-exec copy of the socket for the answer, and puts /dev/null on stdin
/// so the program inherits neither the socket nor a terminal.
fn take_control() -> std::io::Result<(Vec<u8>, UnixStream)> {
    let mut request = Vec::new();
    std::io::stdin().lock().read_to_end(&mut request)?;
    let control = std::io::stdin().as_fd().try_clone_to_owned()?;
    nix::unistd::dup2_stdin(File::open("/dev/null")?)?;
    Ok((request, UnixStream::from(control)))
}

fn failed(result: Result<std::convert::Infallible, Failure>) -> Failure {
    match result {
        Ok(never) => match never {},
        Err(f) => f,
    }
}

fn decode<T: serde::de::DeserializeOwned>(request: &[u8]) -> Result<T, Failure> {
    serde_json::from_slice(request).map_err(|e| Failure::setup("request", e))
}

/// PR_SET_PDEATHSIG survives execve, so the program gets `signal` when localkube dies, even by
/// SIGKILL. If localkube died before the prctl, our parent is already someone else: give up.
fn tie_to_parent(parent: u32, signal: Signal) -> Result<(), Failure> {
    nix::sys::prctl::set_pdeathsig(signal).map_err(|e| Failure::setup("pdeathsig", e))?;
    let now = nix::unistd::getppid().as_raw();
    if u32::try_from(now).ok() != Some(parent) {
        return Err(Failure::setup(
            "pdeathsig",
            format!("localkube (pid {parent}) exited before the shim started"),
        ));
    }
    Ok(())
}

fn new_session() -> Result<(), Failure> {
    nix::unistd::setsid()
        .map(drop)
        .map_err(|e| Failure::setup("setsid", e))
}

/// The pause process. It also answers for the pod when localkube dies: a container's main
/// process gets SIGKILL from its own death signal, but whatever it forked does not inherit that.
/// So the pause process gets SIGTERM instead, and SIGKILLs every process in the pod's network
/// namespace before it exits, the way the end of a pod's PID namespace or cgroup would.
fn pause(req: PauseRequest, control: &mut UnixStream) -> Result<(), Failure> {
    let mut stop = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        stop.add(sig);
    }
    // Blocked, so they wait for `stop.wait()` instead of killing us before the cleanup.
    stop.thread_block()
        .map_err(|e| Failure::setup("sigprocmask", e))?;
    tie_to_parent(req.parent, Signal::SIGTERM)?;
    unshare(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWUTS)
        .map_err(|e| Failure::setup("unshare net/uts", e))?;
    nix::unistd::sethostname(&req.hostname).map_err(|e| Failure::setup("sethostname", e))?;
    new_session()?;
    let ready = serde_json::to_vec(&Report::Ready).unwrap_or_default();
    control
        .write_all(&ready)
        .and_then(|()| control.shutdown(std::net::Shutdown::Write))
        .map_err(|e| Failure::setup("report", e))?;
    // Holds the namespaces until localkube dies (SIGTERM by the death signal) or
    // PodSandbox::destroy SIGKILLs the whole pod.
    let _ = stop.wait();
    if let Ok(pod) = netns_id("self") {
        kill_all_in(pod, Some(std::process::id()));
    }
    Ok(())
}

fn open_ns(pid: u32, kind: &str) -> Result<File, Failure> {
    File::open(format!("/proc/{pid}/ns/{kind}")).map_err(|e| Failure::setup("open namespace", e))
}

fn container(req: ContainerRequest) -> Result<std::convert::Infallible, Failure> {
    tie_to_parent(req.parent, Signal::SIGKILL)?;
    let net = open_ns(req.pause_pid, "net")?;
    let uts = open_ns(req.pause_pid, "uts")?;
    setns(net, CloneFlags::CLONE_NEWNET).map_err(|e| Failure::setup("setns net", e))?;
    setns(uts, CloneFlags::CLONE_NEWUTS).map_err(|e| Failure::setup("setns uts", e))?;
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| Failure::setup("unshare mnt", e))?;
    // Private propagation: our bind mounts stay out of the host, and later host mounts stay out
    // of the pod.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| Failure::setup("make / private", e))?;
    // Every source is opened before the first mount, and mounted through its descriptor: a mount
    // over a directory that holds a later mount's source would otherwise hide that source (an
    // emptyDir at /tmp over a state directory under /tmp). The kubelet's volumes live outside the
    // container's view; this gives the same result.
    let sources = req
        .mounts
        .iter()
        .map(open_source)
        .collect::<Result<Vec<_>, _>>()?;
    for (m, source) in req.mounts.iter().zip(&sources) {
        bind_mount(m, source)?;
    }
    drop(sources);
    let c = &req.confinement;
    if c.read_only_root {
        read_only_root(&req.mounts)?;
    }
    // Like runc: the user is switched after the mounts (which need root) and before the working
    // directory, which must then be reachable by that user.
    become_user(c.uid, c.gid, &c.supplementary_groups)?;
    if c.no_new_privileges {
        nix::sys::prctl::set_no_new_privs().map_err(|e| Failure::setup("no_new_privs", e))?;
    }
    if let Some(dir) = &req.working_dir {
        std::env::set_current_dir(dir)
            .map_err(|e| Failure::setup("working directory", format!("{}: {e}", dir.display())))?;
    }
    new_session()?;
    run(&req.argv, &req.env)
}

/// Bind-mounts `source` on `target`, creating a missing target of the same kind (directory or
/// empty file). Created targets stay on the host file system as empty mount points (there is no
/// container root file system to create them in); the mounts themselves live only in the
/// container's mount namespace.
fn bind_mount(m: &BindMount, source: &OwnedFd) -> Result<(), Failure> {
    let step = |what: &str| {
        format!(
            "mount {} on {}: {what}",
            m.source.display(),
            m.target.display()
        )
    };
    // The descriptor's magic link reaches the opened file even where its path is now hidden.
    let source_path = format!("/proc/self/fd/{}", source.as_raw_fd());
    let source_is_dir = std::fs::metadata(&source_path)
        .map_err(|e| Failure::setup("mount", step(&e.to_string())))?
        .is_dir();
    if !m.target.exists() {
        let created = if source_is_dir {
            std::fs::create_dir_all(&m.target)
        } else {
            m.target
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&m.target)
                        .map(drop)
                })
        };
        created.map_err(|e| Failure::setup("mount", step(&e.to_string())))?;
    }
    let bind = MsFlags::MS_BIND | MsFlags::MS_REC;
    mount(
        Some(source_path.as_str()),
        &m.target,
        None::<&str>,
        bind,
        None::<&str>,
    )
    .map_err(|e| Failure::setup("mount", step(&e.to_string())))?;
    if m.read_only {
        let remount = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        mount(None::<&str>, &m.target, None::<&str>, remount, None::<&str>)
            .map_err(|e| Failure::setup("mount", step(&format!("read-only remount: {e}"))))?;
    }
    Ok(())
}

/// An `O_PATH` descriptor of a mount's source (no read permission needed, nothing read).
fn open_source(m: &BindMount) -> Result<OwnedFd, Failure> {
    use nix::fcntl::{OFlag, open};
    open(
        &m.source,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| {
        Failure::setup(
            "mount",
            format!(
                "mount {} on {}: {e}",
                m.source.display(),
                m.target.display()
            ),
        )
    })
}

/// Sets the supplementary groups, then the group, then the user (real, effective and saved):
/// once the uid is not 0 the process has no capabilities left to change any of them back.
fn become_user(uid: u32, gid: u32, groups: &[u32]) -> Result<(), Failure> {
    use nix::unistd::{Gid, Uid};
    let groups: Vec<Gid> = groups.iter().map(|g| Gid::from_raw(*g)).collect();
    nix::unistd::setgroups(&groups).map_err(|e| Failure::setup("setgroups", e))?;
    let gid = Gid::from_raw(gid);
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| Failure::setup("setgid", e))?;
    let uid = Uid::from_raw(uid);
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| Failure::setup("setuid", e))
}

/// `readOnlyRootFilesystem`: every mount of this (private) mount namespace becomes read-only,
/// except the container's own mounts (volumes, /etc/hosts...), which keep their mode, and /dev,
/// /proc and /sys, which a runtime mounts for the container itself. Bind remounts change only
/// this namespace's view: the host's mounts stay as they are.
fn read_only_root(own: &[BindMount]) -> Result<(), Failure> {
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Failure::setup("read-only root", e))?;
    let own: Vec<&Path> = own.iter().map(|m| m.target.as_path()).collect();
    for (point, options) in table.lines().filter_map(mountinfo_point) {
        let point = Path::new(&point);
        let kept = own.iter().any(|t| point.starts_with(t))
            || ["/dev", "/proc", "/sys"]
                .iter()
                .any(|p| point.starts_with(p));
        if kept || options.split(',').any(|o| o == "ro") {
            continue;
        }
        let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        for (option, flag) in [
            ("nosuid", MsFlags::MS_NOSUID),
            ("nodev", MsFlags::MS_NODEV),
            ("noexec", MsFlags::MS_NOEXEC),
            ("noatime", MsFlags::MS_NOATIME),
            ("nodiratime", MsFlags::MS_NODIRATIME),
            ("relatime", MsFlags::MS_RELATIME),
        ] {
            if options.split(',').any(|o| o == option) {
                flags |= flag;
            }
        }
        mount(None::<&str>, point, None::<&str>, flags, None::<&str>).map_err(|e| {
            Failure::setup(
                "read-only root",
                format!("remounting {} read-only: {e}", point.display()),
            )
        })?;
    }
    Ok(())
}

/// The mount point (field 5, octal escapes decoded) and per-mount options (field 6) of a
/// /proc/self/mountinfo line.
fn mountinfo_point(line: &str) -> Option<(String, String)> {
    let mut fields = line.split(' ');
    let point = fields.nth(4)?;
    let options = fields.next()?;
    Some((unescape_octal(point), options.to_owned()))
}

/// The kernel writes space, tab, newline and backslash in mountinfo paths as `\NNN` (octal).
fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match escaped {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The identity of a running process from /proc/<pid>/status: uid, gid, supplementary groups
/// (real ids: a container's process does not change them) and whether no_new_privs is set.
fn process_identity(pid: u32) -> Result<(u32, u32, Vec<u32>, bool), Failure> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| Failure::setup("reading the container's identity", e))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::split_whitespace)
    };
    let first = |name: &str| -> Result<u32, Failure> {
        field(name)
            .and_then(|mut f| f.next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Failure::setup("reading the container's identity", format!("no {name}")))
    };
    let groups = field("Groups:")
        .map(|f| f.filter_map(|g| g.parse().ok()).collect())
        .unwrap_or_default();
    Ok((
        first("Uid:")?,
        first("Gid:")?,
        groups,
        first("NoNewPrivs:")? == 1,
    ))
}

fn exec(req: ExecRequest) -> Result<std::convert::Infallible, Failure> {
    tie_to_parent(req.parent, Signal::SIGKILL)?;
    // Like `runc exec`: the container's user, groups and no_new_privs.
    let (uid, gid, groups, no_new_privs) = process_identity(req.target_pid)?;
    // Open everything before the first setns: after joining the mount namespace, paths mean the
    // container's view.
    let net = open_ns(req.target_pid, "net")?;
    let uts = open_ns(req.target_pid, "uts")?;
    let mnt = open_ns(req.target_pid, "mnt")?;
    let cwd = File::open(format!("/proc/{}/cwd", req.target_pid))
        .map_err(|e| Failure::setup("open working directory", e))?;
    setns(net, CloneFlags::CLONE_NEWNET).map_err(|e| Failure::setup("setns net", e))?;
    setns(uts, CloneFlags::CLONE_NEWUTS).map_err(|e| Failure::setup("setns uts", e))?;
    setns(mnt, CloneFlags::CLONE_NEWNS).map_err(|e| Failure::setup("setns mnt", e))?;
    become_user(uid, gid, &groups)?;
    if no_new_privs {
        nix::sys::prctl::set_no_new_privs().map_err(|e| Failure::setup("no_new_privs", e))?;
    }
    // Like `runc exec`: the container's working directory.
    nix::unistd::fchdir(&cwd).map_err(|e| Failure::setup("working directory", e))?;
    new_session()?;
    run(&req.argv, &req.env)
}

/// Resolves argv[0] with the container's PATH and becomes it, with exactly `env`.
fn run(argv: &[String], env: &[(String, String)]) -> Result<std::convert::Infallible, Failure> {
    let Some(program) = argv.first() else {
        return Err(Failure::NoCommand);
    };
    let path = look_path(program, env)?;
    check_format(program, &path)?;
    // std's exec (not a raw execve) because it restores SIGPIPE and the signal mask that the
    // Rust runtime changed, so the program starts as it would under a container runtime.
    let err = Command::new(&path)
        .arg0(program)
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .exec();
    Err(exec_failure(program, &path, &err))
}

/// The formats execve runs here: ELF binaries and `#!` scripts. std's exec goes through
/// `execvp`, which would run any other file with x bits as a shell script; runc (Go's
/// syscall.Exec) reports "exec format error" instead, and so do we.
fn check_format(program: &str, path: &Path) -> Result<(), Failure> {
    let mut head = [0u8; 4];
    let Ok(n) = File::open(path).and_then(|mut f| f.read(&mut head)) else {
        // Unreadable but executable: let execve decide.
        return Ok(());
    };
    if head[..n].starts_with(b"\x7fELF") || head[..n].starts_with(b"#!") {
        Ok(())
    } else {
        Err(exec_failure(
            program,
            path,
            &std::io::Error::from_raw_os_error(nix::errno::Errno::ENOEXEC as i32),
        ))
    }
}

fn exec_failure(program: &str, path: &Path, err: &std::io::Error) -> Failure {
    let reason = match err.raw_os_error().map(nix::errno::Errno::from_raw) {
        Some(errno) => errno.desc().to_ascii_lowercase(),
        None => err.to_string(),
    };
    Failure::NotExecutable {
        program: program.to_string(),
        reason: if path.as_os_str() == program {
            reason
        } else {
            format!("{}: {reason}", path.display())
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_decoded_point_and_its_options() {
        let line = "36 35 98:0 /mnt1 /mnt/with\\040space\\134x rw,noatime master:1 - ext3 /dev/root rw,errors=continue";
        assert_eq!(
            mountinfo_point(line),
            Some(("/mnt/with space\\x".to_owned(), "rw,noatime".to_owned()))
        );
        assert_eq!(mountinfo_point("too short"), None);
        // A backslash not followed by three octal digits is kept.
        assert_eq!(unescape_octal("a\\9b\\04"), "a\\9b\\04");
    }
}
