//! Periodic compaction, as kube-apiserver runs it: every 5 minutes, compact to the revision seen
//! one interval earlier, so watchers and continue tokens older than that get their 410.

use std::time::Duration;

use super::Shared;

pub const INTERVAL: Duration = Duration::from_secs(300);

pub async fn run(server: Shared) {
    let mut previous: Option<i64> = None;
    loop {
        tokio::time::sleep(INTERVAL).await;
        let current = match server.store.current_revision().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "reading the revision for compaction failed");
                continue;
            }
        };
        if let Some(target) = previous.filter(|p| *p > 0) {
            match server.store.compact(target).await {
                Ok(()) => tracing::debug!(revision = target, "compacted"),
                Err(e) => tracing::warn!(revision = target, error = %e, "compaction failed"),
            }
        }
        previous = Some(current);
    }
}
