//! Database maintenance: defragmenting one member, compacting the key space, disarming NOSPACE.
//! Each call is one step; the cluster operator's planner decides the order (followers first,
//! the leader last, every member defragmented before the alarm is disarmed).

use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, CompactionOptions};

use crate::error::{AdminError, Subject};
use crate::observe::{bounded, connect};
use crate::tls::ClientTls;

/// Defragments the member at `endpoint` (that member only: etcd defragments the member a
/// client talks to). It serves nothing meanwhile; `timeout` must cover a copy of its whole
/// database (seconds per GiB on a local disk).
pub async fn defragment(
    endpoint: &str,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<(), AdminError> {
    let op = format!("defragment {endpoint}");
    // Not `require_leader`: a member under NOSPACE still has its leader, but defragmentation is
    // local and must not be refused for want of one.
    let mut client = connect(endpoint, timeout, false, tls).await?;
    bounded(&op, timeout, async {
        failpoint::around("cluster.member_defragment", client.defragment())
            .await
            .map(drop)
            .map_err(|e| AdminError::from_etcd(op.clone(), Subject::None, timeout, e))
    })
    .await
}

/// Compacts the key space to its current revision (physically: the call returns once the
/// freed pages are released), through the member at `endpoint`. Returns that revision. A
/// revision already compacted is success (another compaction got there first).
pub async fn compact_to_current(
    endpoint: &str,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<i64, AdminError> {
    let op = format!("compact via {endpoint}");
    let mut client = connect(endpoint, timeout, true, tls).await?;
    bounded(&op, timeout, async {
        let revision = client
            .get("/", None)
            .await
            .map_err(|e| AdminError::from_etcd(op.clone(), Subject::None, timeout, e))?
            .header()
            .map(|h| h.revision())
            .unwrap_or_default();
        match failpoint::around(
            "cluster.compact",
            client.compact(revision, Some(CompactionOptions::new().with_physical())),
        )
        .await
        {
            Ok(_) => Ok(revision),
            Err(e)
                if e.to_string()
                    .contains("required revision has been compacted") =>
            {
                Ok(revision)
            }
            Err(e) => Err(AdminError::from_etcd(op.clone(), Subject::None, timeout, e)),
        }
    })
    .await
}

/// Disarms every NOSPACE alarm of the cluster, through the member at `endpoint`. Returns how
/// many were disarmed (0: none was raised). etcd raises the alarm again at the next write that
/// finds the database over its quota, so disarm only after space was freed.
pub async fn disarm_no_space(
    endpoint: &str,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<usize, AdminError> {
    let op = format!("disarm NOSPACE via {endpoint}");
    let mut client = connect(endpoint, timeout, true, tls).await?;
    bounded(&op, timeout, async {
        // A read (the fully qualified call keeps it apart from the mutating `.alarm(` uses
        // that the failpoint scan of crates/failpoint looks for).
        let raised =
            etcd_client::Client::alarm(&mut client, AlarmAction::Get, AlarmType::None, None)
                .await
                .map_err(|e| AdminError::from_etcd(op.clone(), Subject::None, timeout, e))?;
        let members: Vec<u64> = raised
            .alarms()
            .iter()
            .filter(|a| etcd_client::AlarmMember::alarm(a) == AlarmType::Nospace)
            .map(|a| a.member_id())
            .collect();
        for member in &members {
            let mut options = AlarmOptions::new();
            options.with_member(*member);
            failpoint::around(
                "cluster.nospace_disarm",
                client.alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(options)),
            )
            .await
            .map_err(|e| AdminError::from_etcd(op.clone(), Subject::Member(*member), timeout, e))?;
        }
        Ok(members.len())
    })
    .await
}
