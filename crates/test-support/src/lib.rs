//! Starts the real components that the workspace's tests run against: etcd clusters (3.4 and
//! 3.5), a SeaweedFS S3 server, and kubectl + helm, all installed by `make deps`
//! (`e2e/install-tools.sh`) into `.tools/bin` (or `$ETCD_OPERATOR_TOOLS`).
//!
//! - [`tools`]: finding binaries; a missing one is a loud [`MissingBinary`] error naming the file,
//!   the path and the fix (`make deps`). Tests must fail with it, never skip.
//! - [`addr`]: loopback address blocks and machine-unique port ranges, locked across processes
//!   (cargo-nextest runs each test in its own process) and verified free by binding.
//! - [`etcd`]: [`EtcdCluster`] (member `i` is `m{i}` on `http://127.A.B.i:2379`): clients per
//!   cluster or member, kill/terminate/restart (also as another version), member add/remove,
//!   leader lookup, etcdctl; and the lower-level [`EtcdMember`] (one process from an
//!   [`EtcdMemberConfig`]) for members started by hand.
//! - [`process`]: [`process::ProcessGuard`] (a logged child process, SIGKILLed on drop), log
//!   tails, [`process::TestDir`].
//! - [`s3`]: [`S3Server`], `weed mini` with generated credentials, and its `aws-sdk-s3` client.
//! - [`mod@bench`]: what the parts of `make bench` share: their operator-against-by-hand tables, and
//!   the [`bench::Figure`]s each records for the combined table `bench-report` prints.
//! - [`kube_tools`]: [`KubeClients`], kubectl + helm of one [`KubePair`].
//! - [`monitoring`]: the chart's alert and dashboard queries and the metric names in them.
//!
//! What only the tests that need Kubernetes use (localkube started per test, the RBAC usage check
//! on its audit log, the clients' history and its linearizability check) is the e2e harness,
//! `e2e/harness`: no test of `crates/` or `operators/` starts a kube-apiserver.
//!
//! Every process logs to a file in a temp dir. If a test panics, dropping a component prints the
//! last 40 lines of each of its logs to stderr under the process name; `KEEP_TEST_DIRS=1` keeps the
//! temp dirs and prints their paths. Processes are SIGKILLed on drop.
//!
//! # Example
//!
//! ```no_run
//! use test_support::{EtcdCluster, EtcdVersion, HarnessError, S3Server};
//!
//! # async fn example() -> Result<(), HarnessError> {
//! let cluster = EtcdCluster::start(EtcdVersion::V3_5, 3).await?;
//! let mut client = cluster.client().await?;
//! client.put("key", "value", None).await.map_err(|e| HarnessError::Etcd {
//!     context: "put".into(),
//!     source: e,
//! })?;
//! println!("etcd at {:?}", cluster.endpoints());
//!
//! let s3 = S3Server::start().await?;
//! s3.create_bucket("backups").await?;
//! let objects = s3.client().list_objects_v2().bucket("backups").send().await;
//! assert!(objects.is_ok());
//! # Ok(())
//! # }
//! ```
//!
//! In tests, use `#[tokio::test(flavor = "multi_thread")]` and `.unwrap()`/`?` every harness
//! result, so that a missing component fails the test loudly.

pub mod addr;
pub mod bench;
pub mod error;
pub mod etcd;
pub mod kube_tools;
pub mod monitoring;
pub mod process;
pub mod s3;
pub mod tools;

pub use addr::{AddressBlock, PortLease};
pub use error::HarnessError;
pub use etcd::{ClusterState, EtcdCluster, EtcdMember, EtcdMemberConfig};
pub use kube_tools::KubeClients;
pub use s3::S3Server;
pub use tools::{EtcdVersion, KubePair, MissingBinary, Tools};
