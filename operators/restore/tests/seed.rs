#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `prepare-seed` against a real etcd and a real SeaweedFS: a snapshot of an etcd 3.4 member,
//! stored in S3, is downloaded, checked and restored with etcdutl 3.5 (the one the operator image
//! carries), and an etcd 3.4 seed started on the result serves exactly the keys, at the
//! snapshot's revision, as a new cluster. A second run leaves the data alone; a tampered or
//! missing object leaves nothing behind.

use std::path::Path;
use std::time::Duration;

use etcd_client::GetOptions;
use etcd_restore_operator::seed::{SeedError, SeedOutcome, SeedSpec, prepare_seed};
use sha2::{Digest, Sha256};
use test_support::{
    AddressBlock, ClusterState, EtcdCluster, EtcdMember, EtcdMemberConfig, EtcdVersion, S3Server,
    Tools,
};

const BUCKET: &str = "etcd-backups";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn all_keys(client: &mut etcd_client::Client) -> Vec<(String, String)> {
    let response = client
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    response
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap().to_owned(),
                kv.value_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn spec(s3: &S3Server, key: &str, sha256: Option<String>, data_dir: &Path, peer: &str) -> SeedSpec {
    SeedSpec {
        bucket: BUCKET.into(),
        key: key.into(),
        endpoint: Some(s3.endpoint().to_owned()),
        region: "us-east-1".into(),
        force_path_style: true,
        sha256,
        name: "seed".into(),
        initial_cluster: format!("seed={peer}"),
        initial_advertise_peer_urls: peer.to_owned(),
        initial_cluster_token: "restored-token".into(),
        data_dir: data_dir.to_path_buf(),
        // The operator restores for 3.4 with 3.5's etcdutl (etcd 3.4 has none): `etcdutl_for`.
        etcdutl: Tools::from_env().etcdutl_of(EtcdVersion::V3_5).unwrap(),
        work_dir: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_3_4_snapshot_restores_into_a_new_seed_and_bad_objects_leave_nothing() {
    let (source, s3) = tokio::join!(
        async { EtcdCluster::start(EtcdVersion::V3_4, 1).await.unwrap() },
        async {
            let s3 = S3Server::start().await.unwrap();
            s3.create_bucket(BUCKET).await.unwrap();
            s3
        }
    );
    let mut client = source.client().await.unwrap();
    for i in 0..200 {
        client
            .put(format!("k/{i:03}"), format!("value-{i}"), None)
            .await
            .unwrap();
    }
    let written = all_keys(&mut client).await;
    let revision = client
        .get("k/000", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();

    // The snapshot as etcd streams it (DB + SHA-256 trailer), stored as a backup would.
    let mut stream = client.snapshot().await.unwrap();
    let mut object = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        object.extend_from_slice(chunk.blob());
    }
    let sha256 = hex(&Sha256::digest(&object));
    let s3_client = s3.client();
    s3_client
        .put_object()
        .bucket(BUCKET)
        .key("main/good.db")
        .body(object.clone().into())
        .send()
        .await
        .unwrap();
    let mut tampered = object.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0xff;
    s3_client
        .put_object()
        .bucket(BUCKET)
        .key("main/tampered.db")
        .body(tampered.into())
        .send()
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let volume = dir.path().join("volume");
    std::fs::create_dir_all(&volume).unwrap();
    let data_dir = volume.join("data");
    let block = AddressBlock::claim().unwrap();
    let config = EtcdMemberConfig {
        name: "seed".into(),
        ip: block.ip(1),
        data_dir: data_dir.clone(),
        log_path: dir.path().join("seed.log"),
        initial_cluster: String::new(),
        initial_cluster_state: ClusterState::New,
        initial_cluster_token: "restored-token".into(),
        extra_args: vec![],
    };
    let peer = config.peer_url();

    // A tampered object, then a missing one: refused by name, nothing left in the volume.
    let e = prepare_seed(
        &spec(
            &s3,
            "main/tampered.db",
            Some(sha256.clone()),
            &data_dir,
            &peer,
        ),
        &s3_client,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, SeedError::ChecksumMismatch { .. }), "{e}");
    // Without the recorded checksum etcd's own trailer still catches it.
    let e = prepare_seed(
        &spec(&s3, "main/tampered.db", None, &data_dir, &peer),
        &s3_client,
    )
    .await
    .unwrap_err();
    assert_eq!(e.reason(), "TrailerInvalid", "{e}");
    let e = prepare_seed(
        &spec(
            &s3,
            "main/missing.db",
            Some(sha256.clone()),
            &data_dir,
            &peer,
        ),
        &s3_client,
    )
    .await
    .unwrap_err();
    assert_eq!(e.reason(), "ObjectNotFound", "{e}");
    assert!(!data_dir.join("member").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&volume)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "data")
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");

    // The good object.
    let good = spec(&s3, "main/good.db", Some(sha256.clone()), &data_dir, &peer);
    let SeedOutcome::Restored(info) = prepare_seed(&good, &s3_client).await.unwrap() else {
        panic!("a fresh data directory was not restored");
    };
    assert_eq!(info.revision, revision);
    assert_eq!(info.sha256, sha256);
    assert_eq!(info.size_bytes, object.len() as u64);

    // etcd 3.4 serves it as a new one-member cluster with exactly the keys.
    let mut config = config;
    config.initial_cluster = format!("seed={peer}");
    let mut seed = EtcdMember::spawn(&Tools::from_env(), EtcdVersion::V3_4, config).unwrap();
    seed.wait_ready(None, Duration::from_secs(30))
        .await
        .unwrap();
    let mut seed_client = seed.client().await.unwrap();
    assert_eq!(all_keys(&mut seed_client).await, written);
    let status = seed_client.status().await.unwrap();
    assert_eq!(status.header().unwrap().revision(), revision);
    let members = seed_client.member_list().await.unwrap();
    assert_eq!(members.members().len(), 1);
    assert_ne!(
        members.header().unwrap().cluster_id(),
        source.cluster_id(),
        "the restored cluster is a new cluster"
    );
    seed_client.put("after", "restore", None).await.unwrap();
    seed.terminate(Duration::from_secs(10)).await.unwrap();

    // Run again (the init container after a Pod restart): the member's data is left alone.
    assert_eq!(
        prepare_seed(&good, &s3_client).await.unwrap(),
        SeedOutcome::AlreadyPrepared
    );
    seed.restart(&Tools::from_env(), EtcdVersion::V3_4, ClusterState::New)
        .unwrap();
    seed.wait_ready(None, Duration::from_secs(30))
        .await
        .unwrap();
    let mut seed_client = seed.client().await.unwrap();
    let after = seed_client.get("after", None).await.unwrap();
    assert_eq!(after.kvs()[0].value_str().unwrap(), "restore");
}

/// `len` pseudo-random bytes followed by their SHA-256: what etcd's trailer makes of a DB.
fn snapshot_like(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut object: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let trailer = Sha256::digest(&object);
    object.extend_from_slice(&trailer);
    object
}

/// The seed's ranged download against real SeaweedFS: objects of no piece, one short piece,
/// exactly one piece and more pieces than are fetched at once land in the file byte for byte
/// and are hashed in order; an object rewritten after the first piece was asked is refused
/// (`DownloadFailed`, retried by the restore operator with a fresh start).
#[tokio::test(flavor = "multi_thread")]
async fn ranged_download_reassembles_every_size_and_refuses_an_object_that_changes() {
    use etcd_restore_operator::seed::download::{self, PIECE_BYTES, PIECES_IN_FLIGHT};
    let s3 = S3Server::start().await.unwrap();
    s3.create_bucket(BUCKET).await.unwrap();
    let client = s3.client();
    let dir = tempfile::tempdir().unwrap();
    let piece = PIECE_BYTES as usize;
    let many = (PIECES_IN_FLIGHT + 2) * piece + 12_345;
    // (key, object): S3 answers any range of an empty object with 416.
    let objects = [
        ("empty", Vec::new()),
        ("small", snapshot_like(68, 1)),
        ("one-piece", snapshot_like(piece - 32, 2)),
        ("many-pieces", snapshot_like(many, 3)),
    ];
    for (key, object) in &objects {
        client
            .put_object()
            .bucket(BUCKET)
            .key(*key)
            .body(object.clone().into())
            .send()
            .await
            .unwrap();
        let spec = spec(&s3, key, None, &dir.path().join("data"), "http://x:2380");
        let file = dir.path().join(key);
        let started = download::start(&spec, &client).await.unwrap();
        let verifier = started.finish(&spec, &client, &file).await.unwrap();
        assert_eq!(verifier.bytes_seen(), object.len() as u64, "{key}");
        assert!(
            std::fs::read(&file).unwrap() == *object,
            "{key}: the file differs"
        );
        match verifier.finish() {
            Ok(verified) => assert_eq!(
                verified.object_sha256.as_slice(),
                Sha256::digest(object).as_slice(),
                "{key}"
            ),
            Err(e) => assert!(object.is_empty(), "{key}: {e}"),
        }
    }

    // Rewritten (same size, other bytes) between the first piece and the others.
    let spec = spec(
        &s3,
        "many-pieces",
        None,
        &dir.path().join("data"),
        "http://x:2380",
    );
    let started = download::start(&spec, &client).await.unwrap();
    assert_eq!(started.total_bytes(), Some(many as u64 + 32));
    client
        .put_object()
        .bucket(BUCKET)
        .key("many-pieces")
        .body(snapshot_like(many, 4).into())
        .send()
        .await
        .unwrap();
    let e = started
        .finish(&spec, &client, &dir.path().join("changed"))
        .await
        .unwrap_err();
    assert_eq!(e.reason(), "DownloadFailed", "{e}");
    assert!(
        e.to_string().contains("changed while it was downloaded"),
        "{e}"
    );
}
