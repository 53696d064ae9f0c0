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
