//! Shared by the integration tests: the shim binary, container specs, polling with deadlines.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use localkube_sandbox::{ContainerSpec, HostNetwork, SandboxSpec, Shim};

pub fn shim() -> Shim {
    Shim {
        program: PathBuf::from(env!("CARGO_BIN_EXE_localkube-sandbox-shim")),
        leading_args: vec![],
    }
}

pub async fn claim() -> HostNetwork {
    HostNetwork::claim(None, shim()).await.unwrap()
}

pub fn sandbox_spec(name: &str) -> SandboxSpec {
    SandboxSpec {
        id: format!("test_{name}"),
        hostname: name.to_string(),
    }
}

pub fn path_env() -> Vec<(String, String)> {
    vec![("PATH".into(), "/usr/bin:/bin".into())]
}

/// `sh -c script` with only PATH set, logging to `<dir>/<name>.log`.
pub fn sh(dir: &Path, name: &str, script: &str) -> ContainerSpec {
    ContainerSpec {
        name: name.into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: path_env(),
        working_dir: None,
        mounts: vec![],
        log_path: dir.join(format!("{name}.log")),
        confinement: Default::default(),
    }
}

pub fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Polls `check` until it returns Some, failing the test after `within`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The CRI records of a log file as (stream, tag, text), after checking each timestamp.
pub fn log_records(path: &Path) -> Vec<(String, String, String)> {
    let content = std::fs::read_to_string(path).unwrap_or_default();
    content
        .lines()
        .map(|line| {
            let mut parts = line.splitn(4, ' ');
            let ts = parts.next().unwrap();
            assert_eq!(ts.len(), "2026-11-22T10:00:00.123456789Z".len(), "{line:?}");
            assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T' && ts.as_bytes()[19] == b'.');
            let stream = parts.next().unwrap().to_string();
            let tag = parts.next().unwrap().to_string();
            let text = parts.next().unwrap_or("").to_string();
            (stream, tag, text)
        })
        .collect()
}

/// The lines a container wrote to stdout (full records only).
pub fn stdout_lines(path: &Path) -> Vec<String> {
    log_records(path)
        .into_iter()
        .filter(|(s, t, _)| s == "stdout" && t == "F")
        .map(|(_, _, text)| text)
        .collect()
}

/// The container's stdout lines once it has printed `ready` (failing the test after 30 s).
pub async fn lines_until_ready(log: &Path) -> Vec<String> {
    eventually(
        Duration::from_secs(30),
        "the container's output",
        || async {
            let lines = stdout_lines(log);
            lines.contains(&"ready".to_string()).then_some(lines)
        },
    )
    .await
}

/// Link names on the host whose name starts with `lkbr<N>` exactly or `lkv<N>x`.
pub fn links_of(index: u8) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["-br", "link"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|n| n.split('@').next().unwrap().to_string())
        .filter(|n| *n == format!("lkbr{index}") || n.starts_with(&format!("lkv{index}x")))
        .collect()
}

/// Gone or a zombie: a process that no longer runs.
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}
