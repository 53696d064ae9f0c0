//! Containers: identity and isolation, start errors, exit codes, graceful stop, CRI logs, exec.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use localkube_sandbox::{BindMount, Confinement, ExecError, ExitStatus, Signal, SpawnError};

#[tokio::test]
async fn hostname_mounts_and_env_are_the_pods_not_the_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("etcd-0")).await.unwrap();

    std::fs::write(dir.path().join("hostname"), "etcd-0\n").unwrap();
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::write(secrets.join("token"), "s3cret").unwrap();
    // Targets that do not exist yet: created (as a dir, as a file) for the mount.
    let new_dir = dir.path().join("inside/serviceaccount");
    let new_file = dir.path().join("inside/conf/hostname");
    let host_etc_hostname = std::fs::read_to_string("/etc/hostname").ok();

    let mut spec = sh(
        dir.path(),
        "c",
        &format!(
            "cat /proc/sys/kernel/hostname; cat /etc/hostname; cat {sa}/token; echo; cat {f}; \
             echo x > {sa}/w 2>/dev/null || echo read-only; pwd; echo env:; env | sort; echo ready; sleep 1000",
            sa = new_dir.display(),
            f = new_file.display(),
        ),
    );
    spec.env.push(("POD_NAME".into(), "etcd-0".into()));
    spec.working_dir = Some(secrets.clone());
    spec.mounts = vec![
        BindMount {
            source: dir.path().join("hostname"),
            target: "/etc/hostname".into(),
            read_only: true,
        },
        BindMount {
            source: secrets.clone(),
            target: new_dir.clone(),
            read_only: true,
        },
        BindMount {
            source: dir.path().join("hostname"),
            target: new_file.clone(),
            read_only: false,
        },
    ];
    let log = spec.log_path.clone();
    let mut c = pod.spawn(spec).await.unwrap();
    let lines = lines_until_ready(&log).await;
    let (before, env) = lines.split_at(lines.iter().position(|l| l == "env:").unwrap());
    assert_eq!(
        before,
        [
            "etcd-0",
            "etcd-0",
            "s3cret",
            "etcd-0",
            "read-only",
            secrets.to_str().unwrap()
        ]
    );
    // Exactly the given environment, apart from what the shell itself exports.
    let env: Vec<&str> = env[1..env.len() - 1]
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with("PWD=") && !l.starts_with("SHLVL=") && !l.starts_with("_="))
        .collect();
    assert_eq!(env, ["PATH=/usr/bin:/bin", "POD_NAME=etcd-0"]);
    // On the host: nothing mounted, the files untouched.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mountinfo.contains(new_dir.to_str().unwrap()));
    assert!(!mountinfo.contains(" /etc/hostname "));
    assert_eq!(
        std::fs::read_to_string("/etc/hostname").ok(),
        host_etc_hostname
    );
    assert!(
        std::fs::read_dir(&new_dir).unwrap().next().is_none(),
        "empty mount point on the host"
    );
    assert_eq!(std::fs::read_to_string(&new_file).unwrap(), "");
    assert_ne!(
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim(),
        "etcd-0"
    );

    let status = c.stop(Duration::from_secs(5)).await;
    assert_eq!(
        status,
        ExitStatus {
            exit_code: 143,
            signal: Some(15)
        }
    );
    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}

#[tokio::test]
async fn start_errors_are_reported_before_a_start() {
    let dir = tempfile::tempdir().unwrap();
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("errors")).await.unwrap();

    let mut missing = sh(dir.path(), "missing", "");
    missing.argv = argv(&["etcd-does-not-exist", "--version"]);
    match pod.spawn(missing).await {
        Err(SpawnError::NotFound { program }) => assert_eq!(program, "etcd-does-not-exist"),
        other => panic!("want NotFound, got {other:?}"),
    }
    // The host's PATH does not count: no PATH in env, a program every host has.
    let mut no_path = sh(dir.path(), "no-path", "");
    no_path.env = vec![];
    let err = pod.spawn(no_path).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"exec: "sh": executable file not found in $PATH"#
    );

    let not_exec = dir.path().join("data.txt");
    std::fs::write(&not_exec, "not a program").unwrap();
    let mut spec = sh(dir.path(), "not-exec", "");
    spec.argv = vec![not_exec.display().to_string()];
    match pod.spawn(spec).await {
        Err(SpawnError::NotExecutable { reason, .. }) => assert_eq!(reason, "permission denied"),
        other => panic!("want NotExecutable, got {other:?}"),
    }
    // Executable bits but not a program execve understands.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&not_exec, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut spec = sh(dir.path(), "bad-format", "");
    spec.argv = vec![not_exec.display().to_string()];
    match pod.spawn(spec).await {
        Err(SpawnError::NotExecutable { reason, .. }) => {
            assert!(reason.contains("exec format error"), "{reason}")
        }
        other => panic!("want NotExecutable, got {other:?}"),
    }
    let mut spec = sh(dir.path(), "no-cwd", "true");
    spec.working_dir = Some(dir.path().join("nope"));
    assert!(matches!(
        pod.spawn(spec).await,
        Err(SpawnError::Setup { .. })
    ));
    let mut spec = sh(dir.path(), "no-argv", "");
    spec.argv = vec![];
    assert!(matches!(pod.spawn(spec).await, Err(SpawnError::NoCommand)));

    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}

#[tokio::test]
async fn exit_codes_and_signals() {
    let dir = tempfile::tempdir().unwrap();
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("codes")).await.unwrap();

    let mut ok = pod.spawn(sh(dir.path(), "ok", "exit 0")).await.unwrap();
    assert_eq!(
        ok.wait().await,
        ExitStatus {
            exit_code: 0,
            signal: None
        }
    );
    let mut three = pod.spawn(sh(dir.path(), "three", "exit 3")).await.unwrap();
    assert_eq!(
        three.wait().await,
        ExitStatus {
            exit_code: 3,
            signal: None
        }
    );
    // wait again: same answer.
    assert_eq!(three.wait().await.exit_code, 3);

    let mut killed = pod
        .spawn(sh(dir.path(), "killed", "sleep 1000"))
        .await
        .unwrap();
    assert!(killed.started_at() <= std::time::SystemTime::now());
    // A cancelled wait loses nothing.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), killed.wait())
            .await
            .is_err()
    );
    killed.signal(Signal::SIGKILL).unwrap();
    assert_eq!(
        killed.wait().await,
        ExitStatus {
            exit_code: 137,
            signal: Some(9)
        }
    );
    killed.signal(Signal::SIGTERM).unwrap(); // after exit: a no-op

    // The rest of the process group dies with the main process.
    let mut leader = pod
        .spawn(sh(dir.path(), "leader", "sleep 1000 & echo $!; exit 0"))
        .await
        .unwrap();
    assert_eq!(leader.wait().await.exit_code, 0);
    let child: u32 = stdout_lines(&dir.path().join("leader.log"))[0]
        .parse()
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "the background child to die",
        || async { process_gone(child).then_some(()) },
    )
    .await;

    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}

#[tokio::test]
async fn stop_is_sigterm_then_sigkill_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("stop")).await.unwrap();
    let marker = dir.path().join("terminated");

    let graceful = format!(
        "trap 'echo term > {}; exit 0' TERM; echo ready; while true; do sleep 0.1; done",
        marker.display()
    );
    let mut c = pod
        .spawn(sh(dir.path(), "graceful", &graceful))
        .await
        .unwrap();
    let log = dir.path().join("graceful.log");
    eventually(Duration::from_secs(30), "the trap", || async {
        stdout_lines(&log)
            .contains(&"ready".to_string())
            .then_some(())
    })
    .await;
    let began = Instant::now();
    assert_eq!(
        c.stop(Duration::from_secs(60)).await,
        ExitStatus {
            exit_code: 0,
            signal: None
        }
    );
    // The trap runs within a loop iteration (0.1 s); the bound is far from that for a loaded
    // machine, and far from the 60 s grace period that SIGKILL would end.
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "exited on TERM, not at the deadline: {:?}",
        began.elapsed()
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "term\n");

    let stubborn = "trap '' TERM; echo ready; while true; do sleep 0.1; done";
    let mut c = pod
        .spawn(sh(dir.path(), "stubborn", stubborn))
        .await
        .unwrap();
    let log = dir.path().join("stubborn.log");
    eventually(Duration::from_secs(30), "the trap", || async {
        stdout_lines(&log)
            .contains(&"ready".to_string())
            .then_some(())
    })
    .await;
    let began = Instant::now();
    let grace = Duration::from_millis(800);
    assert_eq!(
        c.stop(grace).await,
        ExitStatus {
            exit_code: 137,
            signal: Some(9)
        }
    );
    assert!(
        began.elapsed() >= grace,
        "killed only after the grace period"
    );

    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}

#[tokio::test]
async fn logs_are_cri_records_and_appended() {
    let dir = tempfile::tempdir().unwrap();
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("logs")).await.unwrap();

    let script = "echo out1; echo err1 >&2; echo out2; printf 'no newline'";
    let mut c = pod.spawn(sh(dir.path(), "c", script)).await.unwrap();
    assert_eq!(c.wait().await.exit_code, 0);
    let log = dir.path().join("c.log");
    let records = log_records(&log);
    let of = |stream: &str| -> Vec<(String, String)> {
        records
            .iter()
            .filter(|(s, _, _)| s == stream)
            .map(|(_, t, x)| (t.clone(), x.clone()))
            .collect()
    };
    let pair = |t: &str, x: &str| (t.to_string(), x.to_string());
    assert_eq!(
        of("stdout"),
        [
            pair("F", "out1"),
            pair("F", "out2"),
            pair("P", "no newline")
        ]
    );
    assert_eq!(of("stderr"), [pair("F", "err1")]);
    assert_eq!(records.len(), 4);

    // A line over 16 KiB is cut into a P record of 16 KiB and the F rest.
    let mut long = pod
        .spawn(sh(
            dir.path(),
            "c",
            "head -c 20000 /dev/zero | tr '\\0' a; echo",
        ))
        .await
        .unwrap();
    assert_eq!(long.wait().await.exit_code, 0);
    let records = log_records(&log);
    assert_eq!(records.len(), 6, "appended to the first run's records");
    assert_eq!(
        (records[4].1.as_str(), records[4].2.len()),
        ("P", 16 * 1024)
    );
    assert_eq!(
        (records[5].1.as_str(), records[5].2.len()),
        ("F", 20000 - 16 * 1024)
    );

    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}

/// A mount over a directory that holds a later mount's source does not hide that source (an
/// emptyDir at /tmp while the pod's volumes live under /tmp): sources are opened first.
#[tokio::test]
async fn a_mount_does_not_hide_a_later_mounts_source() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let secret = state.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("token"), "t0ken").unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("hidden")).await.unwrap();
    let sa = state.join("inside/sa");
    let mut spec = sh(
        dir.path(),
        "main",
        &format!(
            "ls {}; cat {}/token; echo; echo ready; sleep 1000",
            state.display(),
            sa.display()
        ),
    );
    spec.mounts = vec![
        // Covers `state`, and with it the next mount's source.
        BindMount {
            source: empty.clone(),
            target: state.clone(),
            read_only: false,
        },
        BindMount {
            source: secret.clone(),
            target: sa.clone(),
            read_only: true,
        },
    ];
    let log = spec.log_path.clone();
    let mut c = pod.spawn(spec).await.unwrap();
    let lines = lines_until_ready(&log).await;
    // `state` shows the empty directory (plus the created mount point), the token is there.
    assert_eq!(lines, ["inside", "t0ken", "ready"]);
    c.stop(Duration::from_secs(5)).await;
    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}

/// The security context as the runtime applies it: the user and groups, no_new_privs (also for
/// an exec), and a read-only root that even root cannot write while the container's own
/// mounts stay writable, all without changing anything on the host.
#[tokio::test]
async fn confinement_is_the_user_groups_and_a_read_only_root() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // The test's directories must be reachable by the unprivileged user, as / is in an image.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let open = dir.path().join("open");
    let volume = dir.path().join("volume");
    for d in [&open, &volume] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let target = dir.path().join("inside/data");
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("confined")).await.unwrap();
    let script = |name: &str| {
        format!(
            "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status | tr -d '\\t'; \
             touch {t}/{name} && echo volume-writable; \
             touch {o}/{name} 2>&1 | grep -q 'Read-only file system' && echo root-read-only; \
             echo ready; sleep 1000",
            t = target.display(),
            o = open.display(),
        )
    };
    let start = |name: &str, confinement: Confinement| {
        let mut spec = sh(dir.path(), name, &script(name));
        spec.mounts = vec![BindMount {
            source: volume.clone(),
            target: target.clone(),
            read_only: false,
        }];
        spec.confinement = confinement;
        spec
    };
    let output = |name: &str| {
        let log = dir.path().join(format!("{name}.log"));
        async move { lines_until_ready(&log).await }
    };

    // Root, but the root file system is read-only: only its volume takes the write.
    let mut root = pod
        .spawn(start(
            "root",
            Confinement {
                read_only_root: true,
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    assert_eq!(
        output("root").await,
        [
            "0",
            "0",
            "0",
            "NoNewPrivs:0",
            "volume-writable",
            "root-read-only",
            "ready"
        ]
    );

    // The chart's operators: uid/gid 65532, no privilege escalation, read-write root here.
    let mut user = pod
        .spawn(start(
            "user",
            Confinement {
                uid: 65532,
                gid: 65532,
                supplementary_groups: vec![2000, 3000],
                no_new_privileges: true,
                read_only_root: false,
            },
        ))
        .await
        .unwrap();
    assert_eq!(
        output("user").await,
        [
            "65532",
            "65532",
            "65532 2000 3000",
            "NoNewPrivs:1",
            "volume-writable",
            "ready"
        ]
    );
    // An exec (a probe, `kubectl exec`) runs as the container's user, as runc exec does.
    let exec = pod
        .exec(
            user.pid(),
            argv(&[
                "sh",
                "-c",
                "id -u; grep NoNewPrivs /proc/self/status | tr -d '\\t'",
            ]),
            path_env(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(exec.stdout, "65532\nNoNewPrivs:1\n");

    // The user's file is its own; the read-only root left nothing behind, and the host's view
    // is writable as before.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(volume.join("user")).unwrap().uid(), 65532);
    assert!(volume.join("root").exists());
    assert!(!open.join("root").exists());
    std::fs::write(open.join("host"), "still writable").unwrap();

    root.stop(Duration::from_secs(5)).await;
    user.stop(Duration::from_secs(5)).await;
    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}

#[tokio::test]
async fn exec_runs_in_the_containers_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let net = claim().await;
    let pod = net.create_sandbox(sandbox_spec("exec-pod")).await.unwrap();
    std::fs::write(dir.path().join("hostname"), "from-the-mount\n").unwrap();
    let mut spec = sh(dir.path(), "main", "sleep 1000");
    spec.mounts = vec![BindMount {
        source: dir.path().join("hostname"),
        target: "/etc/hostname".into(),
        read_only: true,
    }];
    spec.working_dir = Some(dir.path().to_path_buf());
    let mut main = pod.spawn(spec).await.unwrap();

    let out = pod
        .exec(
            main.pid(),
            argv(&[
                "sh",
                "-c",
                "cat /etc/hostname; hostname; pwd; echo oops >&2; exit 4",
            ]),
            path_env(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 4);
    assert_eq!(
        out.stdout,
        format!("from-the-mount\nexec-pod\n{}\n", dir.path().display())
    );
    assert_eq!(out.stderr, "oops\n");

    let began = Instant::now();
    let timed_out = pod
        .exec(
            main.pid(),
            argv(&["sleep", "30"]),
            path_env(),
            Duration::from_millis(500),
        )
        .await;
    assert!(
        matches!(timed_out, Err(ExecError::TimedOut { .. })),
        "{timed_out:?}"
    );
    // Given up at its 0.5 s timeout, not when `sleep 30` ends.
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );

    let missing = pod
        .exec(
            main.pid(),
            argv(&["no-such-probe"]),
            path_env(),
            Duration::from_secs(5),
        )
        .await;
    assert!(
        matches!(missing, Err(ExecError::Spawn(SpawnError::NotFound { .. }))),
        "{missing:?}"
    );
    let foreign = pod
        .exec(
            std::process::id(),
            argv(&["true"]),
            path_env(),
            Duration::from_secs(5),
        )
        .await;
    assert!(
        matches!(foreign, Err(ExecError::NotInSandbox { .. })),
        "{foreign:?}"
    );

    main.stop(Duration::from_secs(5)).await;
    pod.destroy().await.unwrap();
    net.release().await.unwrap();
}
