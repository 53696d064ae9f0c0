//! The etcd side: `Maintenance.Snapshot` as a [`Stream`] of chunks for
//! [`stream_to_s3`](crate::upload::stream_to_s3).

use futures_util::Stream;

/// One message of etcd's snapshot stream: its bytes are read in place (`AsRef<[u8]>`), not
/// copied out of the message first.
#[derive(Debug)]
pub struct SnapshotChunk(etcd_client::SnapshotResponse);

impl AsRef<[u8]> for SnapshotChunk {
    fn as_ref(&self) -> &[u8] {
        self.0.blob()
    }
}

/// Starts a snapshot of the member `client` is connected to and returns its chunks: the DB bytes
/// followed by etcd's 32-byte SHA-256 trailer (etcd sends the trailer as the last message).
///
/// etcd 3.5 puts no header in snapshot responses, so the snapshot's revision is not known from the
/// stream: take it from a `Status` call just before (a lower bound) for the object key. A broken
/// connection ends the stream with an error; a stream that simply stops early is caught by the
/// trailer verification.
pub async fn snapshot_stream(
    client: &mut etcd_client::Client,
) -> Result<
    impl Stream<Item = Result<SnapshotChunk, etcd_client::Error>> + Send + 'static,
    etcd_client::Error,
> {
    let streaming = client.snapshot().await?;
    Ok(futures_util::stream::unfold(
        Some(streaming),
        |state| async move {
            let mut streaming = state?;
            match streaming.message().await {
                Ok(Some(response)) => Some((Ok(SnapshotChunk(response)), Some(streaming))),
                Ok(None) => None,
                // Yield the error once, then end.
                Err(e) => Some((Err(e), None)),
            }
        },
    ))
}
