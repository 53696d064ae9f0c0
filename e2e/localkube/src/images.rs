//! The node agent's image map (spec §c): which host binaries an image reference stands for.
//! Without `--image-map`, localkube writes a default one to `state/images.yaml`:
//! - the etcd images (`gcr.io/etcd-development/etcd`, `quay.io/coreos/etcd`) at `v3.4.*`,
//!   `v3.5.*`, `v3.6.*` and `v3.7.*` → the installed etcd binaries of that minor (from
//!   `--tools-dir`: 3.4.23, 3.5.35, 3.6.16, 3.7.3), at `/usr/local/bin`, as the upstream images
//!   lay them out (any patch tag runs the installed patch of its minor);
//! - `localkube.io/localkube` → this localkube binary (used by tests for in-cluster clients);
//! - the chart's operator image (`ghcr.io/etcd-operator-rs/etcd-operator`, any tag) → the
//!   operator binaries built next to this localkube binary and each minor's `etcdutl` as
//!   `etcdutl-3.5`, `etcdutl-3.6`, `etcdutl-3.7`, plus `etcdutl` (3.6's, the default), as the
//!   Dockerfile copies them into the image for the restore's seed, at `/usr/local/bin`, running
//!   as the Dockerfile's non-root `USER 65532:65532`;
//! - `busybox` → the host's own tools (a container sees the host's filesystem plus its mounts).
//!
//! A user's file replaces the default entirely; see e2e/README.md for the format.

use std::path::{Path, PathBuf};

use localkube_podspec::image_map::ImageMap;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const ETCD_REPOSITORIES: [&str; 2] = ["gcr.io/etcd-development/etcd", "quay.io/coreos/etcd"];
/// The operators' image as the chart names it by default (charts/etcd-operator/values.yaml).
pub const OPERATOR_REPOSITORY: &str = "ghcr.io/etcd-operator-rs/etcd-operator";
const HOST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub fn load(
    state_dir: &Path,
    tools_dir: Option<&Path>,
    user_map: Option<&Path>,
) -> Result<ImageMap, BoxError> {
    let text = match user_map {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("reading the image map {}: {e}", path.display()))?,
        None => {
            let text = default_map(state_dir, tools_dir)?;
            std::fs::write(state_dir.join("images.yaml"), &text)?;
            text
        }
    };
    Ok(ImageMap::parse(&text)?)
}

/// One directory per etcd minor under `state/images/`, holding `etcd`, `etcdctl` (and
/// `etcdutl` from 3.5 on) from the installed binaries: the names the image has.
fn etcd_bin_dir(state_dir: &Path, tools: &Path, minor: &str) -> Result<Option<PathBuf>, BoxError> {
    let dir = state_dir.join("images").join(format!("etcd-{minor}"));
    std::fs::create_dir_all(&dir)?;
    let mut any = false;
    for tool in ["etcd", "etcdctl", "etcdutl"] {
        let source = tools.join(format!("{tool}-{minor}"));
        let Ok(target) = std::fs::canonicalize(&source) else {
            continue;
        };
        install(&target, &dir.join(tool))?;
        any = true;
    }
    Ok(any.then_some(dir))
}

/// The operator image's `/usr/local/bin`: the operator binaries of `exe_dir` and each minor's
/// etcdutl.
fn operator_bin_dir(
    state_dir: &Path,
    exe_dir: &Path,
    tools: Option<&Path>,
) -> Result<PathBuf, BoxError> {
    let dir = state_dir.join("images").join("operator");
    std::fs::create_dir_all(&dir)?;
    let mut links: Vec<(PathBuf, &str)> = OPERATOR_BINARIES
        .iter()
        .map(|name| (exe_dir.join(name), *name))
        .collect();
    for (file, name) in OPERATOR_ETCDUTLS {
        if let Some(etcdutl) = tools.and_then(|t| std::fs::canonicalize(t.join(file)).ok()) {
            links.push((etcdutl, name));
        }
    }
    for (target, name) in links {
        if target.exists() {
            install(&target, &dir.join(name))?;
        } else {
            // Not built (a test of localkube alone): a container of the image then fails with
            // "executable file not found", as an image without that file would.
            tracing::warn!(binary = %target.display(), "the operator image lacks a binary that is not built");
        }
    }
    Ok(dir)
}

/// Puts `source`'s content at `path`: a hard link, or a copy across file systems. Not a
/// symlink: a container that runs as another user than root must be able to reach the file,
/// as it can in an image, whatever the directories it was built in allow (a checkout under
/// /root is mode 0700). So an image is the binaries as they were at `localkube up`.
fn install(source: &Path, path: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    if std::fs::hard_link(source, path).is_err() {
        std::fs::copy(source, path)?;
    }
    Ok(())
}

/// The etcdutls of the operator image (the Dockerfile's): installed file → name in the image.
const OPERATOR_ETCDUTLS: [(&str, &str); 4] = [
    ("etcdutl-3.5", "etcdutl-3.5"),
    ("etcdutl-3.6", "etcdutl-3.6"),
    ("etcdutl-3.7", "etcdutl-3.7"),
    ("etcdutl-3.6", "etcdutl"),
];

/// The operator image's `USER` (the Dockerfile's).
const OPERATOR_USER: &str = "65532:65532";

/// The binaries of the operator image (the Dockerfile's).
const OPERATOR_BINARIES: [&str; 3] = [
    "etcd-cluster-operator",
    "etcd-backup-operator",
    "etcd-restore-operator",
];

fn default_map(state_dir: &Path, tools_dir: Option<&Path>) -> Result<String, BoxError> {
    let mut out = String::from("# Written by localkube up (the default image map).\nimages:\n");
    if let Some(tools) = tools_dir {
        for (minor, tags) in [
            ("3.7", "v3.7.*"),
            ("3.6", "v3.6.*"),
            ("3.5", "v3.5.*"),
            ("3.4", "v3.4.*"),
        ] {
            let Some(dir) = etcd_bin_dir(state_dir, tools, minor)? else {
                continue;
            };
            for repo in ETCD_REPOSITORIES {
                out.push_str(&format!(
                    "- repository: {repo}\n  tags: [\"{tags}\"]\n  mounts: [{{hostPath: \"{}\", mountPath: /usr/local/bin}}]\n  entrypoint: [/usr/local/bin/etcd]\n  env: {{PATH: \"{HOST_PATH}\"}}\n",
                    dir.display()
                ));
            }
        }
    }
    let exe = std::env::current_exe()?;
    if let Some(exe_dir) = exe.parent() {
        out.push_str(&format!(
            "- repository: localkube.io/localkube\n  mounts: [{{hostPath: \"{}\", mountPath: /opt/localkube/bin}}]\n  entrypoint: [/opt/localkube/bin/localkube]\n  env: {{PATH: \"/opt/localkube/bin:{HOST_PATH}\"}}\n",
            exe_dir.display()
        ));
        // The chart's default operator image: the workspace's own build of the three operator
        // binaries, which sit next to this localkube binary (same cargo target directory), plus
        // etcdutl, at /usr/local/bin as the Dockerfile installs them, and its `USER 65532:65532`
        // (distroless nonroot). Rebuilt binaries reach containers at the next `localkube up`.
        let dir = operator_bin_dir(state_dir, exe_dir, tools_dir)?;
        out.push_str(&format!(
            "- repository: {OPERATOR_REPOSITORY}\n  mounts: [{{hostPath: \"{}\", mountPath: /usr/local/bin}}]\n  env: {{PATH: \"{HOST_PATH}\"}}\n  user: \"{OPERATOR_USER}\"\n",
            dir.display()
        ));
    }
    out.push_str(&format!(
        "- repository: docker.io/library/busybox\n  cmd: [sh]\n  env: {{PATH: \"{HOST_PATH}\"}}\n"
    ));
    Ok(out)
}
