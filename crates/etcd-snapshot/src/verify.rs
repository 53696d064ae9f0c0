//! Incremental verification of an etcd snapshot stream (pure, no I/O).
//!
//! An etcd snapshot is the bbolt DB bytes followed by a 32-byte SHA-256 of those DB bytes. The
//! [`TrailerVerifier`] is fed the stream in chunks of any size (the trailer may straddle chunk
//! boundaries): it hashes everything except the last 32 bytes seen so far (a 32-byte holdback),
//! and at the end compares the held-back trailer with the hash of the DB. It also gives the hash of
//! the whole object (DB + trailer), which is what gets recorded as the artifact's SHA-256 and what a
//! restore checks its download against.
//!
//! One pass of SHA-256 gives both: the whole object's hash goes through the same DB bytes first,
//! so at the end a copy of the DB hash's running state is fed the trailer (SHA-256 is computed
//! block by block from a running state). The second pass cost the backup's process about 0.4 s of
//! CPU per 600 MB (the backup bench's CPU figures, 2.7 → 2.3 s).

use sha2::{Digest, Sha256};

/// Length of the SHA-256 trailer etcd appends to a snapshot.
pub const TRAILER_LEN: usize = 32;

/// A snapshot whose trailer matched its DB bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// SHA-256 of the DB bytes (equal to the trailer).
    pub db_sha256: [u8; 32],
    /// SHA-256 of the whole object: DB bytes followed by the trailer.
    pub object_sha256: [u8; 32],
    /// Size of the whole object (DB + 32-byte trailer), in bytes.
    pub size_bytes: u64,
}

impl Verified {
    /// Size of the DB alone (without the trailer).
    pub fn db_size_bytes(&self) -> u64 {
        self.size_bytes.saturating_sub(TRAILER_LEN as u64)
    }

    /// The whole object's SHA-256 as lowercase hex.
    pub fn object_sha256_hex(&self) -> String {
        hex(&self.object_sha256)
    }
}

/// Why a snapshot stream failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Fewer than 32 bytes arrived: there is not even a trailer.
    #[error(
        "truncated snapshot: {size_bytes} bytes, fewer than the {TRAILER_LEN}-byte SHA-256 trailer"
    )]
    TruncatedSnapshot {
        /// Bytes received in total.
        size_bytes: u64,
    },
    /// The trailer is not the SHA-256 of the bytes before it (corruption or truncation).
    #[error(
        "snapshot checksum mismatch: trailer says {}, DB bytes hash to {} ({size_bytes} bytes received)",
        hex(expected),
        hex(actual)
    )]
    ChecksumMismatch {
        /// The last 32 bytes of the stream (what etcd said the DB hashes to).
        expected: [u8; 32],
        /// The SHA-256 of every byte before those 32.
        actual: [u8; 32],
        /// Bytes received in total.
        size_bytes: u64,
    },
}

impl VerifyError {
    /// PascalCase reason for conditions and events.
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyError::TruncatedSnapshot { .. } => "TruncatedSnapshot",
            VerifyError::ChecksumMismatch { .. } => "ChecksumMismatch",
        }
    }
}

/// Incremental verifier of etcd's SHA-256 trailer; see the module docs.
#[derive(Clone)]
pub struct TrailerVerifier {
    /// Every byte but the last 32 seen: the DB so far (and the whole object's prefix).
    db: Sha256,
    /// The last `held` bytes seen, not yet hashed into `db`.
    holdback: [u8; TRAILER_LEN],
    held: usize,
    total: u64,
}

impl std::fmt::Debug for TrailerVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrailerVerifier")
            .field("held", &self.held)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl Default for TrailerVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl TrailerVerifier {
    /// A verifier that has seen nothing.
    pub fn new() -> Self {
        TrailerVerifier {
            db: Sha256::new(),
            holdback: [0; TRAILER_LEN],
            held: 0,
            total: 0,
        }
    }

    /// Bytes fed so far.
    pub fn bytes_seen(&self) -> u64 {
        self.total
    }

    /// Feeds the next chunk of the stream (any size, including empty).
    pub fn update(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.total += chunk.len() as u64;
        let available = self.held + chunk.len();
        if available <= TRAILER_LEN {
            self.holdback[self.held..available].copy_from_slice(chunk);
            self.held = available;
            return;
        }
        // Release everything but the last 32 bytes into the DB hash: first from the holdback,
        // then from the chunk.
        let release = available - TRAILER_LEN;
        let from_hold = release.min(self.held);
        self.db.update(&self.holdback[..from_hold]);
        let from_chunk = release - from_hold;
        self.db.update(&chunk[..from_chunk]);
        // New holdback: what remains of the old one, then the rest of the chunk (32 bytes total).
        self.holdback.copy_within(from_hold..self.held, 0);
        let kept = self.held - from_hold;
        self.holdback[kept..].copy_from_slice(&chunk[from_chunk..]);
        self.held = TRAILER_LEN;
    }

    /// Ends the stream: checks that the last 32 bytes are the SHA-256 of everything before them.
    pub fn finish(self) -> Result<Verified, VerifyError> {
        if self.held < TRAILER_LEN {
            return Err(VerifyError::TruncatedSnapshot {
                size_bytes: self.total,
            });
        }
        let mut whole = self.db.clone();
        whole.update(self.holdback);
        let actual: [u8; 32] = self.db.finalize().into();
        if actual != self.holdback {
            return Err(VerifyError::ChecksumMismatch {
                expected: self.holdback,
                actual,
                size_bytes: self.total,
            });
        }
        Ok(Verified {
            db_sha256: actual,
            object_sha256: whole.finalize().into(),
            size_bytes: self.total,
        })
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A pseudo-random DB of `len` bytes followed by its SHA-256.
    fn snapshot(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut db: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let sum = Sha256::digest(&db);
        db.extend_from_slice(&sum);
        db
    }

    fn feed(data: &[u8], chunk: usize) -> Result<Verified, VerifyError> {
        let mut v = TrailerVerifier::new();
        for c in data.chunks(chunk) {
            v.update(c);
        }
        v.finish()
    }

    #[test]
    fn good_stream_any_chunking() {
        for len in [0usize, 1, 31, 32, 33, 100, 10_000] {
            let snap = snapshot(len);
            let db_sum: [u8; 32] = Sha256::digest(&snap[..len]).into();
            let whole: [u8; 32] = Sha256::digest(&snap).into();
            for chunk in [1, 7, 31, 32, 33, 4096, snap.len()] {
                let v =
                    feed(&snap, chunk).unwrap_or_else(|e| panic!("len {len} chunk {chunk}: {e}"));
                assert_eq!(v.db_sha256, db_sum, "len {len} chunk {chunk}");
                assert_eq!(v.object_sha256, whole, "len {len} chunk {chunk}");
                assert_eq!(v.size_bytes, snap.len() as u64);
                assert_eq!(v.db_size_bytes(), len as u64);
            }
        }
    }

    #[test]
    fn irregular_chunks_and_empty_chunks() {
        let snap = snapshot(5000);
        let mut v = TrailerVerifier::new();
        let mut rest = &snap[..];
        let sizes = [0usize, 3, 0, 40, 1, 29, 64, 2, 31, 33, 1000];
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes[i % sizes.len()].min(rest.len());
            v.update(&rest[..n]);
            rest = &rest[n..];
            i += 1;
        }
        assert!(v.finish().is_ok());
    }

    #[test]
    fn corrupted_db_byte() {
        let mut snap = snapshot(10_000);
        snap[5000] ^= 0x01;
        for chunk in [1, 33, 4096, snap.len()] {
            match feed(&snap, chunk) {
                Err(VerifyError::ChecksumMismatch {
                    expected, actual, ..
                }) => {
                    assert_eq!(&expected[..], &snap[10_000..]);
                    assert_ne!(expected, actual);
                }
                other => panic!("chunk {chunk}: {other:?}"),
            }
        }
    }

    #[test]
    fn corrupted_trailer() {
        for pos in [0usize, 15, 31] {
            let mut snap = snapshot(1000);
            snap[1000 + pos] ^= 0x80;
            for chunk in [1, 7, 32, snap.len()] {
                let e = feed(&snap, chunk).unwrap_err();
                assert_eq!(e.reason(), "ChecksumMismatch", "pos {pos} chunk {chunk}");
            }
        }
    }

    #[test]
    fn truncated() {
        let snap = snapshot(1000);
        // Cuts inside the DB, mid-trailer, and just before the end.
        for cut in [33usize, 500, 999, 1000, 1001, 1016, 1031] {
            for chunk in [1, 7, 4096] {
                let e = feed(&snap[..cut], chunk).unwrap_err();
                assert!(
                    matches!(e, VerifyError::ChecksumMismatch { size_bytes, .. } if size_bytes == cut as u64),
                    "cut {cut} chunk {chunk}: {e:?}"
                );
            }
        }
        // Fewer than 32 bytes: not even a trailer.
        for cut in [1usize, 16, 31] {
            for chunk in [1, 7, 4096] {
                assert_eq!(
                    feed(&snap[..cut], chunk).unwrap_err(),
                    VerifyError::TruncatedSnapshot {
                        size_bytes: cut as u64
                    }
                );
            }
        }
    }

    #[test]
    fn empty() {
        let e = TrailerVerifier::new().finish().unwrap_err();
        assert_eq!(e, VerifyError::TruncatedSnapshot { size_bytes: 0 });
        assert_eq!(e.reason(), "TruncatedSnapshot");
    }

    #[test]
    fn exactly_a_trailer_of_an_empty_db() {
        // 32 bytes that are SHA-256("") verify as an empty DB.
        let snap = snapshot(0);
        assert_eq!(snap.len(), 32);
        assert_eq!(feed(&snap, 1).unwrap().db_size_bytes(), 0);
        // 32 other bytes do not.
        assert_eq!(
            feed(&[0u8; 32], 5).unwrap_err().reason(),
            "ChecksumMismatch"
        );
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0x00, 0xab, 0x1f, 0xff]), "00ab1fff");
    }
}
