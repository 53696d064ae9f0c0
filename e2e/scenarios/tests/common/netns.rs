//! Processes of this instance's Pods and their network namespaces: what a scenario uses to cut
//! or shape an operator's traffic from outside it (nsenter, nft, tc), as a network fault would.

use super::Env;

/// Runs `program args` in the network namespace of `pid`; its stdout.
pub fn in_netns(pid: u32, program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-n", program])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nsenter -t {pid} -n {program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The PID of this instance's operator process `name` (one of its containers' processes).
pub fn operator_pid(env: &Env, name: &str) -> u32 {
    find_operator_pid(env, name, None)
        .unwrap_or_else(|| panic!("no {name} process under localkube {}", env.lk.pid()))
}

/// The PID of the operator process `name` of the Pod `pod` (its `POD_NAME`).
pub fn operator_pid_of_pod(env: &Env, name: &str, pod: &str) -> u32 {
    find_operator_pid(env, name, Some(pod)).unwrap_or_else(|| {
        panic!(
            "no {name} process of Pod {pod} under localkube {}",
            env.lk.pid()
        )
    })
}

fn find_operator_pid(env: &Env, name: &str, pod: Option<&str>) -> Option<u32> {
    let wanted = pod.map(|pod| format!("POD_NAME={pod}"));
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .map(str::trim);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let of_pod = wanted.as_ref().is_none_or(|wanted| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes())
        });
        if String::from_utf8_lossy(program).ends_with(name)
            && of_pod
            && env.runs_container_process(pid, ppid.unwrap_or_default())
        {
            return Some(pid);
        }
    }
    None
}

/// Runs `nft <commands>` in the network namespace of `pid`.
pub fn nft(pid: u32, commands: &str) {
    in_netns(pid, "nft", &[commands]);
}
