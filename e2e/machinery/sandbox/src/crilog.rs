//! Container logs in the CRI file format the kubelet reads (`GET pods/<p>/log`):
//! `<RFC 3339 UTC, 9 fractional digits> <stdout|stderr> <F|P> <text>\n`, one record per line.
//! Splitting follows containerd's `redirectLogs`: the newline (and a `\r` before it) is dropped,
//! a line longer than 16 KiB is cut into `P` records of 16 KiB plus a final `F`, and text left
//! without a newline when the stream closes is a `P` record.

use std::time::SystemTime;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// containerd's default `max_container_log_line_size`.
pub(crate) const MAX_LINE: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// `F`: the record ends a line; `P`: more of the same line follows (or it never ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    Full,
    Partial,
}

impl Tag {
    fn as_str(self) -> &'static str {
        match self {
            Tag::Full => "F",
            Tag::Partial => "P",
        }
    }
}

/// Cuts one output stream into log records, across arbitrary read boundaries.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    pending: Vec<u8>,
    max: usize,
}

impl LineSplitter {
    pub(crate) fn new(max: usize) -> Self {
        LineSplitter {
            pending: Vec::new(),
            max,
        }
    }

    /// Records completed by `data`.
    pub(crate) fn push(&mut self, data: &[u8]) -> Vec<(Tag, Vec<u8>)> {
        let mut out = Vec::new();
        for chunk in data.split_inclusive(|&b| b == b'\n') {
            let (body, ends_line) = match chunk.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (chunk, false),
            };
            self.pending.extend_from_slice(body);
            if ends_line {
                if self.pending.last() == Some(&b'\r') {
                    self.pending.pop();
                }
                self.cut_overlong(&mut out);
                out.push((Tag::Full, std::mem::take(&mut self.pending)));
            } else {
                // Keep at most `max` bytes: a line that cannot end within the limit is cut now,
                // so a process printing without newlines cannot grow memory without bound.
                self.cut_overlong(&mut out);
            }
        }
        out
    }

    /// What is left when the stream closes: a `P` record, as containerd writes it.
    pub(crate) fn finish(&mut self) -> Option<(Tag, Vec<u8>)> {
        if self.pending.is_empty() {
            None
        } else {
            Some((Tag::Partial, std::mem::take(&mut self.pending)))
        }
    }

    fn cut_overlong(&mut self, out: &mut Vec<(Tag, Vec<u8>)>) {
        while self.pending.len() > self.max {
            let rest = self.pending.split_off(self.max);
            out.push((Tag::Partial, std::mem::replace(&mut self.pending, rest)));
        }
    }
}

/// `2026-11-22T10:00:00.123456789Z`: always nine digits, so records sort and parse alike.
pub(crate) fn timestamp(at: SystemTime) -> String {
    match jiff::Timestamp::try_from(at) {
        Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
        // Outside jiff's range (years beyond 9999): not a clock this code will see.
        Err(_) => "0001-01-01T00:00:00.000000000Z".to_string(),
    }
}

/// One record line, newline included.
pub(crate) fn record(at: SystemTime, stream: Stream, tag: Tag, text: &[u8]) -> Vec<u8> {
    let mut line = format!("{} {} {} ", timestamp(at), stream.as_str(), tag.as_str()).into_bytes();
    line.extend_from_slice(text);
    line.push(b'\n');
    line
}

/// Copies a container's stdout and stderr into its log file until both close. Write errors are
/// logged once and the streams still drained, so a full disk never blocks the container on a pipe.
pub(crate) async fn pump<O, E>(
    mut stdout: Option<O>,
    mut stderr: Option<E>,
    mut file: tokio::fs::File,
    log_path: std::path::PathBuf,
) where
    O: AsyncRead + Unpin,
    E: AsyncRead + Unpin,
{
    let mut out_lines = LineSplitter::new(MAX_LINE);
    let mut err_lines = LineSplitter::new(MAX_LINE);
    let mut out_buf = vec![0u8; 32 * 1024];
    let mut err_buf = vec![0u8; 32 * 1024];
    let mut write_failed = false;
    while stdout.is_some() || stderr.is_some() {
        let (stream, read) = tokio::select! {
            r = read_some(&mut stdout, &mut out_buf) => (Stream::Stdout, r),
            r = read_some(&mut stderr, &mut err_buf) => (Stream::Stderr, r),
        };
        let records = match (stream, read) {
            (Stream::Stdout, Ok(n)) if n > 0 => out_lines.push(&out_buf[..n]),
            (Stream::Stderr, Ok(n)) if n > 0 => err_lines.push(&err_buf[..n]),
            (Stream::Stdout, _) => {
                stdout = None;
                out_lines.finish().into_iter().collect()
            }
            (Stream::Stderr, _) => {
                stderr = None;
                err_lines.finish().into_iter().collect()
            }
        };
        if records.is_empty() {
            continue;
        }
        let now = SystemTime::now();
        let bytes: Vec<u8> = records
            .into_iter()
            .flat_map(|(tag, text)| record(now, stream, tag, &text))
            .collect();
        let written = match file.write_all(&bytes).await {
            Ok(()) => file.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written
            && !write_failed
        {
            write_failed = true;
            tracing::warn!(path = %log_path.display(), error = %e, "container log write failed");
        }
    }
}

/// Reads from a stream that is still open; a closed one never completes, so `select!` ignores it.
async fn read_some<R: AsyncRead + Unpin>(
    reader: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match reader {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn split(max: usize, reads: &[&[u8]]) -> Vec<(Tag, String)> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for r in reads {
            out.extend(s.push(r));
        }
        out.extend(s.finish());
        out.into_iter()
            .map(|(t, b)| (t, String::from_utf8(b).unwrap()))
            .collect()
    }

    #[test]
    fn splits_like_containerd() {
        use Tag::{Full as F, Partial as P};
        type Case<'a> = (&'a str, usize, &'a [&'a [u8]], &'a [(Tag, &'a str)]);
        let cases: &[Case] = &[
            ("one line", 16, &[b"hello\n"], &[(F, "hello")]),
            (
                "two lines in one read",
                16,
                &[b"a\nb\n"],
                &[(F, "a"), (F, "b")],
            ),
            (
                "line across reads",
                16,
                &[b"hel", b"lo\nwor", b"ld\n"],
                &[(F, "hello"), (F, "world")],
            ),
            ("crlf is one line end", 16, &[b"dos\r\n"], &[(F, "dos")]),
            ("empty line", 16, &[b"\n"], &[(F, "")]),
            (
                "no newline at exit",
                16,
                &[b"done\nrest"],
                &[(F, "done"), (P, "rest")],
            ),
            ("exactly max is full", 4, &[b"abcd\n"], &[(F, "abcd")]),
            (
                "max+1 is P then F",
                4,
                &[b"abcde\n"],
                &[(P, "abcd"), (F, "e")],
            ),
            (
                "long line cut across reads",
                4,
                &[b"abc", b"defghij\n"],
                &[(P, "abcd"), (P, "efgh"), (F, "ij")],
            ),
            (
                "long unterminated",
                4,
                &[b"abcdefghij"],
                &[(P, "abcd"), (P, "efgh"), (P, "ij")],
            ),
            ("nothing", 4, &[], &[]),
        ];
        for (why, max, reads, want) in cases {
            let want: Vec<(Tag, String)> = want.iter().map(|(t, s)| (*t, s.to_string())).collect();
            assert_eq!(split(*max, reads), want, "{why}");
        }
    }

    #[test]
    fn timestamps_have_nine_digits_in_utc() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        // date -u -d @1795341600 → 2026-11-22T10:00:00Z
        let at = UNIX_EPOCH + Duration::new(1_795_341_600, 123_456_789);
        assert_eq!(timestamp(at), "2026-11-22T10:00:00.123456789Z");
        let at = UNIX_EPOCH + Duration::new(1_795_341_600, 120_000_000);
        assert_eq!(timestamp(at), "2026-11-22T10:00:00.120000000Z");
    }

    #[test]
    fn record_layout() {
        let at = UNIX_EPOCH + Duration::new(1_795_341_600, 5);
        assert_eq!(
            record(at, Stream::Stderr, Tag::Partial, b"x y"),
            b"2026-11-22T10:00:00.000000005Z stderr P x y\n".to_vec()
        );
    }
}
