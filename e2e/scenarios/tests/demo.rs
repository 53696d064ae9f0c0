//! `make demo` is tested as it runs for a user: `e2e/demo.sh` from start to verdict (local control
//! plane, helm install, a cluster of 3, keys, a backup to SeaweedFS, quorum loss, a restore, the
//! keys checked), on its own loopback address and state directory so it runs beside the other
//! scenarios. It applies examples/{cluster,s3-secret,backup,restore}.yaml unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::workspace;
use test_support::process::TestDir;
use test_support::{AddressBlock, Tools};

#[test]
fn the_demo_runs_green_from_start_to_verdict() {
    let block = AddressBlock::claim().unwrap();
    let state = TestDir::new("demo-").unwrap();
    let state_dir = state.path().join("demo");
    let output = Command::new(workspace().join("e2e/demo.sh"))
        .env("ETCD_OPERATOR_TOOLS", Tools::from_env().dir())
        .env("DEMO_STATE_DIR", &state_dir)
        .env("DEMO_ADDRESS", block.ip(1).to_string())
        .env("DEMO_PORT", "6443")
        .env_remove("KEEP")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("== verdict: PASSED"),
        "the demo failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    // Every step printed what a user types and its duration.
    assert_eq!(stdout.matches("\n== [").count(), 10, "{stdout}");
    assert_eq!(stdout.matches("   ok (").count(), 10, "{stdout}");
    // It stopped what it started and removed its state.
    assert!(!state_dir.exists(), "the demo left {}", state_dir.display());
}
