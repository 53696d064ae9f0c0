//! A real SeaweedFS S3 server started by the harness: multipart round trip with checksums, and
//! rejection of a wrong secret key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use sha2::{Digest, Sha256};
use test_support::S3Server;

const PART: usize = 16 * 1024 * 1024;
const PARTS: usize = 4;

/// Deterministic-per-seed pseudo-random bytes (xorshift64*), seeded from the clock.
fn pseudo_random(len: usize) -> Vec<u8> {
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn multipart_upload_of_64_mib_round_trips() {
    let server = S3Server::start().await.unwrap();
    assert!(server.endpoint().starts_with("http://127."));
    assert_eq!(server.region(), "us-east-1");
    server.create_bucket("etcd-backups").await.unwrap();
    let s3 = server.client();

    let data = pseudo_random(PART * PARTS);
    let want = Sha256::digest(&data);
    let key = "cluster-a/snapshot.db";
    let upload = s3
        .create_multipart_upload()
        .bucket("etcd-backups")
        .key(key)
        .send()
        .await
        .unwrap();
    let upload_id = upload.upload_id().unwrap();
    let mut parts = Vec::new();
    for (n, chunk) in data.chunks(PART).enumerate() {
        let number = n as i32 + 1;
        let part = s3
            .upload_part()
            .bucket("etcd-backups")
            .key(key)
            .upload_id(upload_id)
            .part_number(number)
            .body(ByteStream::from(chunk.to_vec()))
            .send()
            .await
            .unwrap();
        parts.push(
            CompletedPart::builder()
                .part_number(number)
                .e_tag(part.e_tag().unwrap())
                .build(),
        );
    }
    s3.complete_multipart_upload()
        .bucket("etcd-backups")
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
        .unwrap();

    let listed = s3
        .list_objects_v2()
        .bucket("etcd-backups")
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, vec![key]);

    let object = s3
        .get_object()
        .bucket("etcd-backups")
        .key(key)
        .send()
        .await
        .unwrap();
    assert_eq!(object.content_length(), Some((PART * PARTS) as i64));
    let mut body = object.body;
    let mut hasher = Sha256::new();
    let mut received = 0usize;
    while let Some(chunk) = body.try_next().await.unwrap() {
        received += chunk.len();
        hasher.update(&chunk);
    }
    assert_eq!(received, PART * PARTS);
    assert_eq!(
        hasher.finalize(),
        want,
        "downloaded bytes differ from the upload"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_secret_key_is_rejected() {
    let server = S3Server::start().await.unwrap();
    server.create_bucket("private").await.unwrap();

    let wrong = server.client_with_credentials(server.access_key(), "not-the-secret");
    let err = wrong.list_buckets().send().await.unwrap_err();
    let text = format!("{}", DisplayErrorContext(&err));
    assert!(text.contains("SignatureDoesNotMatch"), "{text}");

    let unknown = server.client_with_credentials("nobody", server.secret_key());
    let err = unknown
        .put_object()
        .bucket("private")
        .key("x")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    let text = format!("{}", DisplayErrorContext(&err));
    assert!(text.contains("InvalidAccessKeyId"), "{text}");

    // The right credentials still work and nothing was written by the rejected client.
    let listed = server
        .client()
        .list_objects_v2()
        .bucket("private")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.key_count(), Some(0));
}
