//! `rbac-usage CHART [VALUES...]`: the verbs and resources each operator used across the e2e
//! runs (the audit events [`e2e_harness::LocalKube`] collected) against what the chart renders
//! for it. Prints one table per operator; exits 1 when a use is not granted (a 403 in
//! production) or a grant is never used (a privilege nobody needs), naming both lists. The few
//! grants production needs on paths no scenario can reach are listed, with why, in
//! [`e2e_harness::rbac_usage::NEEDED_UNREACHED`]. The last step of `make test`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, ExitCode};

use e2e_harness::rbac_usage::{self, Permission, Usage, fmt_permission};
use serde_json::Value;

const OPERATORS: [&str; 4] = ["cluster", "backup", "restore", "scheduled-backup"];

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rbac-usage: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((chart, values)) = args.split_first() else {
        return Err("usage: rbac-usage CHART [VALUES-FILE...]".into());
    };
    let helm = test_support::Tools::from_env().dir().join("helm");
    let mut command = Command::new(&helm);
    command.args(["template", "etcd-operator", chart]);
    for v in values {
        command.args(["-f", v]);
    }
    let out = command
        .output()
        .map_err(|e| format!("running {}: {e}", helm.display()))?;
    if !out.status.success() {
        return Err(format!(
            "helm template failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let rendered = String::from_utf8_lossy(&out.stdout).into_owned();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&rendered)
        .map_err(|e| format!("parsing the rendered chart: {e}"))?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    let mut usage: BTreeMap<String, Usage> = BTreeMap::new();
    for (account, perms) in rbac_usage::granted(&docs) {
        if let Some(op) = rbac_usage::operator_of(&account, &OPERATORS) {
            usage.entry(op).or_default().granted.extend(perms);
        }
    }

    let dir = rbac_usage::audit_dir();
    let mut files = 0;
    let mut events = 0;
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        format!(
            "{}: {e} (no audit events: run the end-to-end tests first)",
            dir.display()
        )
    })?;
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        files += 1;
        for line in text.lines() {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some((account, perms)) = rbac_usage::used_by(&event) else {
                continue;
            };
            if let Some(op) = rbac_usage::operator_of(&account, &OPERATORS) {
                events += 1;
                usage.entry(op).or_default().used.extend(perms);
            }
        }
    }
    if events == 0 {
        return Err(format!(
            "no operator requests in {} audit logs under {}: run the end-to-end tests first",
            files,
            dir.display()
        ));
    }
    println!("RBAC usage: {events} operator requests from {files} audit logs");
    let mut ok = true;
    for (op, u) in &usage {
        println!(
            "\n{op}: used {} / granted {}",
            u.used.len(),
            u.granted.len()
        );
        let all: BTreeSet<&Permission> = u.used.iter().chain(u.granted.iter()).collect();
        for perm in all {
            let mark = match (u.used.contains(perm), u.granted.contains(perm)) {
                (true, true) => "ok".to_string(),
                (true, false) => "USED, NOT GRANTED".to_string(),
                (false, true) => match rbac_usage::needed_unreached(op, perm) {
                    Some(why) => format!("not reached, kept: {why}"),
                    None => "GRANTED, NEVER USED".to_string(),
                },
                (false, false) => unreachable!(),
            };
            println!("  {:<60} {mark}", fmt_permission(perm));
        }
        let missing = u.used_not_granted();
        let unused = u.unexplained_unused(op);
        if !missing.is_empty() || !unused.is_empty() {
            ok = false;
        }
        if !missing.is_empty() || !unused.is_empty() {
            let list = |v: &[&Permission]| {
                v.iter()
                    .map(|p| fmt_permission(p))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            eprintln!(
                "rbac-usage: {op}: used but not granted: [{}]; granted but never used: [{}]",
                list(&missing),
                list(&unused)
            );
        }
    }
    Ok(ok)
}
