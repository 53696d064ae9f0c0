//! Container logs as the kubelet keeps and serves them: CRI-format files
//! (`<logs>/<ns>_<pod>_<uid>/<container>/<restartCount>.log`, the layout of the kubelet's
//! /var/log/pods) rendered with `tailLines`, `sinceSeconds`, `timestamps` and `limitBytes`.

use std::path::{Path, PathBuf};

/// Where the log of one container instance lives.
pub fn log_path(
    logs_dir: &Path,
    ns: &str,
    pod: &str,
    uid: &str,
    container: &str,
    restart: i64,
) -> PathBuf {
    logs_dir
        .join(format!("{ns}_{pod}_{uid}"))
        .join(container)
        .join(format!("{restart}.log"))
}

/// One line of a CRI log file: `<RFC 3339 nano> <stdout|stderr> <P|F> <text>`.
#[derive(Debug, PartialEq, Eq)]
pub struct CriLine<'a> {
    pub timestamp: &'a str,
    pub text: &'a str,
    /// `F`: the text ends a line (a newline follows on output); `P`: a partial line.
    pub full: bool,
}

pub fn parse_cri_line(line: &str) -> Option<CriLine<'_>> {
    let mut parts = line.splitn(4, ' ');
    let timestamp = parts.next()?;
    let _stream = parts.next()?;
    let tag = parts.next()?;
    let text = parts.next().unwrap_or("");
    Some(CriLine {
        timestamp,
        text,
        full: tag != "P",
    })
}

#[derive(Debug, Default, Clone)]
pub struct LogOptions {
    pub tail_lines: Option<usize>,
    pub since: Option<jiff::Timestamp>,
    pub timestamps: bool,
    pub limit_bytes: Option<usize>,
}

/// Render CRI file content as the client sees it, applying since/tail/timestamps.
pub fn render(content: &str, opts: &LogOptions) -> String {
    let mut lines: Vec<CriLine<'_>> = content
        .lines()
        .filter_map(parse_cri_line)
        .filter(|l| match opts.since {
            Some(since) => l
                .timestamp
                .parse::<jiff::Timestamp>()
                .is_ok_and(|t| t >= since),
            None => true,
        })
        .collect();
    if let Some(n) = opts.tail_lines {
        // Count whole lines: a run of partial lines belongs to the full line that ends it.
        let mut full_seen = 0;
        let mut cut = 0;
        for (i, l) in lines.iter().enumerate().rev() {
            if l.full {
                if full_seen == n {
                    cut = i + 1;
                    break;
                }
                full_seen += 1;
            }
        }
        lines.drain(..cut);
    }
    let mut out = String::new();
    let mut at_line_start = true;
    for l in lines {
        if opts.timestamps && at_line_start {
            out.push_str(l.timestamp);
            out.push(' ');
        }
        out.push_str(l.text);
        if l.full {
            out.push('\n');
        }
        at_line_start = l.full;
    }
    out
}

pub fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "2026-11-22T10:00:00.000000001Z stdout F one\n\
2026-11-22T10:00:01.000000000Z stderr P tw\n\
2026-11-22T10:00:01.000000001Z stderr F o\n\
2026-11-22T10:00:02.000000000Z stdout F three\n";

    #[test]
    fn cri_lines_render_with_partials_joined() {
        assert_eq!(render(FILE, &LogOptions::default()), "one\ntwo\nthree\n");
        let tail = LogOptions {
            tail_lines: Some(2),
            ..Default::default()
        };
        assert_eq!(render(FILE, &tail), "two\nthree\n");
        let ts = LogOptions {
            timestamps: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        assert_eq!(render(FILE, &ts), "2026-11-22T10:00:02.000000000Z three\n");
        let since = LogOptions {
            since: Some("2026-11-22T10:00:01.000000001Z".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(render(FILE, &since), "o\nthree\n");
    }
}
