//! kubectl and helm for tests: [`KubeClients::find`] locates the pair (kubectl 1.37 + helm 4.3, or
//! kubectl 1.32 + helm 3.17) and runs their version commands, so tests can assert which one they use.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::HarnessError;
use crate::process::run_output;
use crate::tools::{KubePair, MissingBinary, Tools};

/// The kubectl and helm binaries of one [`KubePair`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeClients {
    pair: KubePair,
    kubectl: PathBuf,
    helm: PathBuf,
}

impl KubeClients {
    /// Finds the pair with the tools of [`Tools::from_env`].
    pub fn find(pair: KubePair) -> Result<KubeClients, MissingBinary> {
        Self::find_in(&Tools::from_env(), pair)
    }

    /// Finds the pair in `tools`.
    pub fn find_in(tools: &Tools, pair: KubePair) -> Result<KubeClients, MissingBinary> {
        Ok(KubeClients {
            pair,
            kubectl: tools.kubectl(pair)?,
            helm: tools.helm(pair)?,
        })
    }

    /// Which pair this is.
    pub fn pair(&self) -> KubePair {
        self.pair
    }

    /// The kubectl binary.
    pub fn kubectl(&self) -> &Path {
        &self.kubectl
    }

    /// The helm binary.
    pub fn helm(&self) -> &Path {
        &self.helm
    }

    /// Runs kubectl with `args` and returns its stdout (an error with its stderr if it fails).
    pub fn run_kubectl(&self, args: &[&str]) -> Result<String, HarnessError> {
        let mut command = Command::new(&self.kubectl);
        command.args(args);
        run_output(command)
    }

    /// Runs helm with `args` and returns its stdout (an error with its stderr if it fails).
    pub fn run_helm(&self, args: &[&str]) -> Result<String, HarnessError> {
        let mut command = Command::new(&self.helm);
        command.args(args);
        run_output(command)
    }

    /// stdout of `kubectl version --client`, e.g. `Client Version: v1.37.1\n...`.
    pub fn kubectl_version(&self) -> Result<String, HarnessError> {
        self.run_kubectl(&["version", "--client"])
    }

    /// stdout of `helm version --short`, e.g. `v4.3.1+gc0d08d0`.
    pub fn helm_version(&self) -> Result<String, HarnessError> {
        self.run_helm(&["version", "--short"])
    }
}
