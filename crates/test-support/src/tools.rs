//! Locating the binaries of the test components (etcd, etcdctl, etcdutl, weed, aws, kubectl, helm,
//! promtool, prometheus).
//!
//! They are installed by `make deps` (`e2e/install-tools.sh`) into `<workspace>/.tools/bin`, or into
//! the directory named by `$ETCD_OPERATOR_TOOLS`. A missing binary is a loud [`MissingBinary`]
//! error naming the file, the path looked at and the fix: tests must fail, never skip silently.

use std::fmt;
use std::path::{Path, PathBuf};

/// Environment variable overriding the tools directory.
pub const TOOLS_ENV: &str = "ETCD_OPERATOR_TOOLS";

/// The etcd versions installed for tests: one per minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EtcdVersion {
    /// etcd 3.4.23 (Debian's etcd-server), kept as an upgrade source; it has no etcdutl.
    V3_4,
    /// etcd 3.5.35, built from the Go module proxy (e2e/upstream/etcd-3.5).
    V3_5,
    /// etcd 3.6.16, built from the Go module proxy (e2e/upstream/etcd-3.6); the default.
    V3_6,
    /// etcd 3.7.3, built from the Go module proxy (e2e/upstream/etcd-3.7).
    V3_7,
}

impl EtcdVersion {
    /// All installed versions, oldest first.
    pub const ALL: [EtcdVersion; 4] = [
        EtcdVersion::V3_4,
        EtcdVersion::V3_5,
        EtcdVersion::V3_6,
        EtcdVersion::V3_7,
    ];

    /// The version new clusters run unless a test asks for another (the operator's default).
    pub const DEFAULT: EtcdVersion = EtcdVersion::V3_6;

    /// The exact installed version, e.g. "3.6.16" (the pins of e2e/upstream/etcd-*/go.mod).
    pub fn version_string(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "3.4.23",
            EtcdVersion::V3_5 => "3.5.35",
            EtcdVersion::V3_6 => "3.6.16",
            EtcdVersion::V3_7 => "3.7.3",
        }
    }

    /// The minor version, e.g. "3.6" (also the suffix of the binaries' file names).
    pub fn as_minor(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "3.4",
            EtcdVersion::V3_5 => "3.5",
            EtcdVersion::V3_6 => "3.6",
            EtcdVersion::V3_7 => "3.7",
        }
    }

    /// The next minor, the one a rolling upgrade moves to.
    pub fn next_minor(self) -> Option<EtcdVersion> {
        match self {
            EtcdVersion::V3_4 => Some(EtcdVersion::V3_5),
            EtcdVersion::V3_5 => Some(EtcdVersion::V3_6),
            EtcdVersion::V3_6 => Some(EtcdVersion::V3_7),
            EtcdVersion::V3_7 => None,
        }
    }

    /// Whether this minor ships `etcdutl` (3.5 and later).
    pub fn has_etcdutl(self) -> bool {
        self >= EtcdVersion::V3_5
    }
}

impl fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version_string())
    }
}

/// The kubectl + helm pairs installed for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KubePair {
    /// kubectl 1.37 + helm 4.3.
    Current,
    /// kubectl 1.32 + helm 3.17.
    Previous,
}

impl KubePair {
    /// Both pairs.
    pub const ALL: [KubePair; 2] = [KubePair::Current, KubePair::Previous];

    /// kubectl's minor version, e.g. "1.37".
    pub fn kubectl_minor(self) -> &'static str {
        match self {
            KubePair::Current => "1.37",
            KubePair::Previous => "1.32",
        }
    }

    /// helm's minor version, e.g. "4.3".
    pub fn helm_minor(self) -> &'static str {
        match self {
            KubePair::Current => "4.3",
            KubePair::Previous => "3.17",
        }
    }
}

/// Where a [`Tools`] directory came from (shown in [`MissingBinary`] messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsOrigin {
    /// `$ETCD_OPERATOR_TOOLS`.
    Env,
    /// `<workspace>/.tools/bin`.
    Workspace,
    /// [`Tools::from_dir`].
    Explicit,
}

/// A required binary is not installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} ({file}) not found at {}{}: run `make deps` (or e2e/install-tools.sh) to install the test components",
    path.display(),
    origin_note(*origin)
)]
pub struct MissingBinary {
    /// Human name, e.g. "etcd 3.5".
    pub what: String,
    /// File name, e.g. "etcd-3.5".
    pub file: String,
    /// The full path that was looked at.
    pub path: PathBuf,
    /// Where the directory came from.
    pub origin: ToolsOrigin,
}

fn origin_note(origin: ToolsOrigin) -> &'static str {
    match origin {
        ToolsOrigin::Env => " (tools directory taken from $ETCD_OPERATOR_TOOLS)",
        ToolsOrigin::Workspace | ToolsOrigin::Explicit => "",
    }
}

/// The directory holding the test components' binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    dir: PathBuf,
    origin: ToolsOrigin,
}

impl Tools {
    /// `$ETCD_OPERATOR_TOOLS` if set and not empty, else `<workspace root>/.tools/bin`.
    pub fn from_env() -> Tools {
        match std::env::var_os(TOOLS_ENV) {
            Some(dir) if !dir.is_empty() => Tools {
                dir: PathBuf::from(dir),
                origin: ToolsOrigin::Env,
            },
            _ => Tools {
                dir: workspace_root().join(".tools").join("bin"),
                origin: ToolsOrigin::Workspace,
            },
        }
    }

    /// An explicit directory (for tests of the harness itself).
    pub fn from_dir(dir: impl Into<PathBuf>) -> Tools {
        Tools {
            dir: dir.into(),
            origin: ToolsOrigin::Explicit,
        }
    }

    /// The directory looked in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the directory came from.
    pub fn origin(&self) -> ToolsOrigin {
        self.origin
    }

    /// The etcd server of `version` (`etcd-3.4` / `etcd-3.5`).
    pub fn etcd(&self, version: EtcdVersion) -> Result<PathBuf, MissingBinary> {
        let minor = version.as_minor();
        self.find(&format!("etcd {minor}"), &format!("etcd-{minor}"))
    }

    /// etcdctl of `version` (`etcdctl-3.4` / `etcdctl-3.5`).
    pub fn etcdctl(&self, version: EtcdVersion) -> Result<PathBuf, MissingBinary> {
        let minor = version.as_minor();
        self.find(&format!("etcdctl {minor}"), &format!("etcdctl-{minor}"))
    }

    /// etcdutl of `version` (`etcdutl-3.5` / `-3.6` / `-3.7`). etcd 3.4 has none (use
    /// `etcdctl-3.4 snapshot restore` there): asking for it names the file that cannot exist.
    pub fn etcdutl_of(&self, version: EtcdVersion) -> Result<PathBuf, MissingBinary> {
        let minor = version.as_minor();
        self.find(&format!("etcdutl {minor}"), &format!("etcdutl-{minor}"))
    }

    /// etcdutl of the default version ([`EtcdVersion::DEFAULT`]): the one the operator image
    /// ships for snapshot checks and restores.
    pub fn etcdutl(&self) -> Result<PathBuf, MissingBinary> {
        self.etcdutl_of(EtcdVersion::DEFAULT)
    }

    /// SeaweedFS (`weed`).
    pub fn weed(&self) -> Result<PathBuf, MissingBinary> {
        self.find("SeaweedFS", "weed")
    }

    /// The AWS CLI (`aws`).
    pub fn aws(&self) -> Result<PathBuf, MissingBinary> {
        self.find("AWS CLI", "aws")
    }

    /// kubectl of `pair` (`kubectl-1.37` / `kubectl-1.32`).
    pub fn kubectl(&self, pair: KubePair) -> Result<PathBuf, MissingBinary> {
        let minor = pair.kubectl_minor();
        self.find(&format!("kubectl {minor}"), &format!("kubectl-{minor}"))
    }

    /// helm of `pair` (`helm-4.3` / `helm-3.17`).
    pub fn helm(&self, pair: KubePair) -> Result<PathBuf, MissingBinary> {
        let minor = pair.helm_minor();
        self.find(&format!("helm {minor}"), &format!("helm-{minor}"))
    }

    /// Prometheus' promtool (`promtool`, Debian's prometheus package): checks and unit-tests
    /// the chart's alert rules.
    pub fn promtool(&self) -> Result<PathBuf, MissingBinary> {
        self.find("promtool (Debian prometheus)", "promtool")
    }

    /// The Prometheus server (`prometheus`, Debian's prometheus package): scrapes the operators'
    /// `/metrics` and evaluates the alert rules in tests.
    pub fn prometheus(&self) -> Result<PathBuf, MissingBinary> {
        self.find("Prometheus (Debian prometheus)", "prometheus")
    }

    fn find(&self, what: &str, file: &str) -> Result<PathBuf, MissingBinary> {
        let path = self.dir.join(file);
        if is_executable_file(&path) {
            Ok(path)
        } else {
            Err(MissingBinary {
                what: what.to_owned(),
                file: file.to_owned(),
                path,
                origin: self.origin,
            })
        }
    }
}

/// The workspace root (two levels above this crate's manifest directory).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .unwrap_or(manifest)
        .to_path_buf()
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    // metadata() follows symlinks: a dangling link counts as missing.
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
