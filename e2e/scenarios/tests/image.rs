//! The operators' image, built without Docker, in every `make test` (issue 23).
//!
//! `image/test_image.py` builds the image twice from the debug binaries the test build made
//! (`image/build.sh debug`), compares the two builds byte for byte, unpacks the image into a
//! root filesystem and runs every binary there only (chroot, as 65532, an empty environment),
//! checks the image against the Dockerfile (and that a drifted Dockerfile is reported), and runs
//! each etcd image's etcd. This test runs it and fails with its output. `make image-test` runs
//! the same script on its own.

use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_image_is_reproducible_runs_every_binary_as_65532_and_matches_the_dockerfile() {
    let uid = Command::new("id").arg("-u").output().expect("id -u runs");
    let uid = String::from_utf8_lossy(&uid.stdout).trim().to_owned();
    assert_eq!(
        uid, "0",
        "the image test unpacks the image and runs its binaries with chroot, which needs root \
         (uid {uid}): run the tests as root, as make test does on the project's machines"
    );
    let root = repo_root();
    for op in ["cluster", "backup", "restore"] {
        let bin = root.join(format!("target/debug/etcd-{op}-operator"));
        assert!(
            bin.exists(),
            "{} is missing: the image packs the debug binaries `cargo build --workspace \
             --all-targets` makes (make test builds them before the tests)",
            bin.display()
        );
    }
    let out = Command::new("python3")
        .arg(root.join("image/test_image.py"))
        .current_dir(&root)
        .env("IMAGE_PROFILE", "debug")
        .output()
        .expect("python3 runs (Debian's python3 is on every project machine)");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "image/test_image.py failed ({}):\n{report}",
        out.status
    );
    // unittest ends with "Ran N tests in ..." and "OK"; a skip would say "OK (skipped=N)".
    let ran: usize = report
        .split("Ran ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        ran >= 8 && report.contains("\nOK") && !report.contains("skipped"),
        "image/test_image.py did not run its tests (8 or more) cleanly:\n{report}"
    );
}
