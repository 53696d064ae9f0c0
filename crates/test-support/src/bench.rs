//! What the parts of `make bench` share: the tables a bench prints about its rounds (an operator
//! side against the same steps by hand), and the headline [`Figure`]s each part records for the
//! combined table that `bench-report` prints at the end of `make bench`.
//!
//! The flow: `make bench` empties `target/bench/results.jsonl` and exports its path as
//! [`RESULTS_ENV`]; each bench prints its own detailed tables and calls [`record`], which appends
//! its figures there as JSON lines; `bench-report` reads the file ([`parse_results`]) and prints
//! one markdown table ([`combined_table`]) of every [`Part`], naming a part without figures as
//! missing. Without [`RESULTS_ENV`], [`record`] does nothing.
//!
//! Everything here is pure except [`record`] and [`append`], which write the file.

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Environment variable naming the file [`record`] appends to (an absolute path: cargo runs
/// each bench in its package's directory).
pub const RESULTS_ENV: &str = "BENCH_RESULTS";

/// A part of `make bench`; [`Part::ALL`] is the order of the combined table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// `e2e/scenarios/benches/cluster.rs`: formation and a killed member.
    Cluster,
    /// `operators/backup/benches/backup.rs`: the backup path and its peak RSS.
    Backup,
    /// `e2e/scenarios/benches/restore.rs`: EtcdRestore after quorum loss.
    Restore,
    /// `e2e/scenarios/benches/scale.rs`: one operator replica reconciling many EtcdClusters.
    Scale,
    /// `e2e/scenarios/benches/repair.rs`: a member's data lost → a healthy replacement.
    Repair,
}

impl Part {
    /// Every part, in the order of the combined table.
    pub const ALL: [Part; 5] = [
        Part::Cluster,
        Part::Backup,
        Part::Restore,
        Part::Scale,
        Part::Repair,
    ];

    /// The name in the table's first column.
    pub fn name(self) -> &'static str {
        match self {
            Part::Cluster => "cluster",
            Part::Backup => "backup",
            Part::Restore => "restore",
            Part::Scale => "scale",
            Part::Repair => "repair",
        }
    }

    /// The command that measures this part (named when its figures are missing).
    pub fn command(self) -> &'static str {
        match self {
            Part::Cluster => "cargo bench -p e2e-scenarios --bench cluster",
            Part::Backup => "cargo bench -p etcd-backup-operator --bench backup",
            Part::Restore => "cargo bench -p e2e-scenarios --bench restore",
            Part::Scale => "cargo bench -p e2e-scenarios --bench scale",
            Part::Repair => "cargo bench -p e2e-scenarios --bench repair",
        }
    }
}

/// The unit of a figure and of its baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// Wall time.
    #[serde(rename = "s")]
    Seconds,
    /// Memory (peak RSS).
    #[serde(rename = "MiB")]
    Mebibytes,
    /// A rate of objects (requests, events) per second.
    #[serde(rename = "obj/s")]
    ObjectsPerSecond,
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Seconds => "s",
            Unit::Mebibytes => "MiB",
            Unit::ObjectsPerSecond => "obj/s",
        })
    }
}

/// One headline figure of a part against its baseline measured in the same run; one line of the
/// results file and one row of the combined table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The part that measured it.
    pub part: Part,
    /// What is measured, with the settings it depends on (sizes, rounds, median or max).
    pub measured: String,
    /// The figure.
    pub value: f64,
    /// The baseline, measured in the same run, in the same unit.
    pub baseline: f64,
    /// What the baseline is.
    pub baseline_is: String,
    /// `value / baseline`; `None` when that is not a number (a zero baseline).
    pub ratio: Option<f64>,
    /// The unit of `value` and `baseline`.
    pub unit: Unit,
}

impl Figure {
    /// `measured` = (what, value) against `baseline` = (what it is, value), in `unit`; the ratio
    /// is value / baseline.
    pub fn new(
        part: Part,
        unit: Unit,
        (measured, value): (&str, f64),
        (baseline_is, baseline): (&str, f64),
    ) -> Figure {
        let ratio = value / baseline;
        Figure {
            part,
            measured: measured.to_owned(),
            value,
            baseline,
            baseline_is: baseline_is.to_owned(),
            ratio: ratio.is_finite().then_some(ratio),
            unit,
        }
    }
}

/// What can go wrong writing or reading the results file.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// [`RESULTS_ENV`] is relative: it would land in each bench's package directory.
    #[error(
        "{RESULTS_ENV}={} is relative; give an absolute path (cargo runs each bench in its \
         package's directory)", path.display()
    )]
    RelativePath {
        /// The path as given.
        path: PathBuf,
    },
    /// Creating, writing or reading the file failed.
    #[error("{context} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "appending to".
        context: &'static str,
        /// The results file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not a [`Figure`].
    #[error("line {line}: not a bench figure: {source}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        source: serde_json::Error,
    },
}

/// When [`RESULTS_ENV`] names a file, appends `figures` to it (see [`append`]) and returns its
/// path; otherwise does nothing and returns `None`.
pub fn record(figures: &[Figure]) -> Result<Option<PathBuf>, BenchError> {
    let Some(path) = std::env::var_os(RESULTS_ENV).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let path = PathBuf::from(path);
    append(&path, figures)?;
    Ok(Some(path))
}

/// Appends `figures` to `path` as JSON lines, in one write (the parts may run concurrently), creating the
/// file and its directory if needed. `path` must be absolute.
pub fn append(path: &Path, figures: &[Figure]) -> Result<(), BenchError> {
    if !path.is_absolute() {
        return Err(BenchError::RelativePath {
            path: path.to_owned(),
        });
    }
    let io = |context| {
        let path = path.to_owned();
        move |source| BenchError::Io {
            context,
            path,
            source,
        }
    };
    let mut lines = String::new();
    for figure in figures {
        // A Figure has no map with non-string keys: serialising it cannot fail.
        let json = serde_json::to_string(figure).map_err(|e| BenchError::Io {
            context: "serialising a figure for",
            path: path.to_owned(),
            source: e.into(),
        })?;
        lines.push_str(&json);
        lines.push('\n');
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("creating the directory of"))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(lines.as_bytes()))
        .map_err(io("appending to"))
}

/// The figures of a results file, in file order; blank lines are skipped.
pub fn parse_results(text: &str) -> Result<Vec<Figure>, BenchError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| BenchError::Parse {
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// The combined table: its markdown, and the parts that had no figures (shown as missing rows).
#[derive(Clone, Debug, PartialEq)]
pub struct CombinedTable {
    /// A markdown table, one row per figure, parts in the order of [`Part::ALL`], then a line
    /// saying what the ratio is.
    pub markdown: String,
    /// Parts without any figure, in table order.
    pub missing: Vec<Part>,
}

/// One markdown table of every part's figures against their baselines; a part without figures
/// gets a row saying it is missing and which command measures it.
pub fn combined_table(figures: &[Figure]) -> CombinedTable {
    let mut markdown = String::from(
        "| part | measured | figure | baseline in the same run | ratio |\n|---|---|---|---|---|\n",
    );
    let mut missing = Vec::new();
    for part in Part::ALL {
        let mut rows = figures.iter().filter(|f| f.part == part).peekable();
        if rows.peek().is_none() {
            missing.push(part);
            let _ = writeln!(
                markdown,
                "| {} | **missing**: no figures recorded (`{}` not run, or it failed before \
                 recording them) | – | – | – |",
                part.name(),
                part.command()
            );
        }
        for f in rows {
            let _ = writeln!(
                markdown,
                "| {} | {} | {} {} | {} {}: {} | {} |",
                part.name(),
                cell(&f.measured),
                format_number(f.value),
                f.unit,
                format_number(f.baseline),
                f.unit,
                cell(&f.baseline_is),
                f.ratio.map_or_else(|| "n/a".to_owned(), format_number)
            );
        }
    }
    markdown.push_str(
        "\nratio = figure / baseline (times: above 1 is slower than the baseline; rates: below 1 \
         is slower; peak RSS: 1 is flat).\n",
    );
    CombinedTable { markdown, missing }
}

/// Text for a markdown table cell: `|` escaped, line breaks as spaces.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// `x` with 3 significant digits and no exponent (`3.08`, `18.4`, `1207`, `0.0412`); `n/a` when
/// it is not finite.
pub fn format_number(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    let decimals = |x: f64| (2 - x.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let d = decimals(x);
    let rounded: f64 = format!("{x:.d$}").parse().unwrap_or(x);
    // 9.996 rounds to 10.00: one digit too many at the new magnitude.
    let d = d.min(decimals(rounded));
    format!("{x:.d$}")
}

/// Median, min and max of a side's rounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Summary {
    /// The summary of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let mid = sorted.len() / 2;
        let median = if sorted.len().is_multiple_of(2) {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        } else {
            sorted[mid]
        };
        Some(Summary { median, min, max })
    }
}

/// Offsets from the start of a round (seconds) of each step, keyed `reason #n` (the n-th
/// occurrence of that reason in the round, so that rounds line up), in the order pushed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Steps(Vec<(String, f64)>);

impl Steps {
    /// Records the next occurrence of `reason` at `offset` seconds.
    pub fn push(&mut self, reason: &str, offset: f64) {
        let n = self
            .0
            .iter()
            .filter(|(k, _)| reason_of(k) == reason)
            .count()
            + 1;
        self.0.push((format!("{reason} #{n}"), offset));
    }

    /// Whether `reason` occurred.
    pub fn has(&self, reason: &str) -> bool {
        self.0.iter().any(|(k, _)| reason_of(k) == reason)
    }

    /// Orders the steps by offset (stable: equal offsets keep their order).
    pub fn sort_by_offset(&mut self) {
        self.0.sort_by(|a, b| a.1.total_cmp(&b.1));
    }

    /// `(reason #n, offset)` in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(k, o)| (k.as_str(), *o))
    }
}

fn reason_of(key: &str) -> &str {
    key.rsplit_once(" #").map_or(key, |(reason, _)| reason)
}

/// One side of an operator-against-by-hand bench: what it is, and each round's total (seconds)
/// and steps.
#[derive(Clone, Debug)]
pub struct Side<'a> {
    /// The row label, e.g. `(a) operator: kubectl apply → Available`.
    pub label: &'a str,
    /// Each round's total, seconds.
    pub totals: Vec<f64>,
    /// Each round's steps.
    pub steps: Vec<&'a Steps>,
}

impl<'a> Side<'a> {
    /// A side from each round's total and steps.
    pub fn new(label: &'a str, rounds: impl IntoIterator<Item = (Duration, &'a Steps)>) -> Self {
        let (totals, steps) = rounds
            .into_iter()
            .map(|(total, steps)| (total.as_secs_f64(), steps))
            .unzip();
        Side {
            label,
            totals,
            steps,
        }
    }

    /// The summary of the totals (NaN everywhere without rounds).
    pub fn summary(&self) -> Summary {
        Summary::of(&self.totals).unwrap_or(Summary {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        })
    }
}

/// The totals table the cluster and restore benches print: each side's median, min and max
/// (seconds) over its rounds, then `ratio_label` with the ratio of the medians.
pub fn totals_table(operator: &Side, by_hand: &Side, ratio_label: &str) -> String {
    let width = [operator.label, by_hand.label, ratio_label, "figure"]
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let (a, b) = (operator.summary(), by_hand.summary());
    let mut out = format!(
        "{:<width$} {:>9} {:>9} {:>9}\n",
        "figure", "median s", "min s", "max s"
    );
    for (label, s) in [(operator.label, a), (by_hand.label, b)] {
        let _ = writeln!(
            out,
            "{label:<width$} {:>9.2} {:>9.2} {:>9.2}",
            s.median, s.min, s.max
        );
    }
    let _ = writeln!(out, "{ratio_label:<width$} {:>9.2}", a.median / b.median);
    out
}

/// The steps table the cluster and restore benches print: each step's median offset (seconds
/// since the start of the round), operator beside by hand (`-` where a side has no such step),
/// in the order of the medians (the operator's where it has the step), then `end` with both
/// sides' median totals.
pub fn steps_table(operator: &Side, by_hand: &Side, end: &str) -> String {
    let medians = |side: &Side| -> Vec<(String, f64)> {
        let mut offsets: Vec<(String, Vec<f64>)> = Vec::new();
        for (step, offset) in side.steps.iter().flat_map(|s| s.iter()) {
            match offsets.iter_mut().find(|(k, _)| k == step) {
                Some((_, v)) => v.push(offset),
                None => offsets.push((step.to_owned(), vec![offset])),
            }
        }
        offsets
            .into_iter()
            .filter_map(|(k, v)| Some((k, Summary::of(&v)?.median)))
            .collect()
    };
    let (op, hand) = (medians(operator), medians(by_hand));
    let find =
        |side: &[(String, f64)], key: &str| side.iter().find(|(k, _)| k == key).map(|(_, m)| *m);
    let mut order: Vec<(f64, &str)> = op
        .iter()
        .map(|(k, m)| (*m, k.as_str()))
        .chain(
            hand.iter()
                .filter(|(k, _)| find(&op, k).is_none())
                .map(|(k, m)| (*m, k.as_str())),
        )
        .collect();
    order.sort_by(|x, y| x.0.total_cmp(&y.0));
    let width = order
        .iter()
        .map(|(_, k)| k.chars().count())
        .chain([end.chars().count(), "step".len()])
        .max()
        .unwrap_or(0);
    let cell = |m: Option<f64>| m.map_or("-".to_owned(), |m| format!("{m:.2}"));
    let mut out = format!("{:<width$} {:>10} {:>10}\n", "step", "operator", "by hand");
    for (_, key) in &order {
        let _ = writeln!(
            out,
            "{key:<width$} {:>10} {:>10}",
            cell(find(&op, key)),
            cell(find(&hand, key))
        );
    }
    let _ = writeln!(
        out,
        "{end:<width$} {:>10.2} {:>10.2}",
        operator.summary().median,
        by_hand.summary().median
    );
    out
}

/// The cumulative buckets `(le, count)` of the histogram `name` in Prometheus/OpenMetrics text,
/// summed over the series whose labels contain `label` (e.g. `controller="cluster"`), in
/// ascending `le` (`+Inf` last, as infinity).
pub fn histogram_buckets(text: &str, name: &str, label: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(label))
    {
        let Some(le) = line
            .split_once("le=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(le, _)| le)
        else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            match le.parse() {
                Ok(le) => le,
                Err(_) => continue,
            }
        };
        let Some(count) = sample_value(line) else {
            continue;
        };
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += count,
            None => buckets.push((le, count)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// The sum of the samples of `name` (a counter's or gauge's full series name, e.g.
/// `etcd_operator_reconciles_total`) whose labels contain `label`.
pub fn series_sum(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && l.contains(label)
        })
        .filter_map(sample_value)
        .sum()
}

fn sample_value(line: &str) -> Option<f64> {
    // `name{labels} value` or `name{labels} value timestamp`: the value follows the labels.
    let after_labels = line.rsplit_once('}').map_or(line, |(_, rest)| rest);
    after_labels.split_whitespace().next()?.parse().ok()
}

/// What `later` counted since `earlier` (cumulative buckets of the same histogram), bucket by
/// bucket; a bucket missing from `earlier` counts from zero.
pub fn buckets_since(later: &[(f64, f64)], earlier: &[(f64, f64)]) -> Vec<(f64, f64)> {
    later
        .iter()
        .map(|(le, count)| {
            let before = earlier
                .iter()
                .find(|(b, _)| b == le)
                .map_or(0.0, |(_, c)| *c);
            (*le, count - before)
        })
        .collect()
}

/// The `q` quantile (0..=1) of cumulative buckets, as Prometheus' `histogram_quantile`
/// estimates it: linear within the bucket the rank falls in (from 0 for the first bucket); in
/// the `+Inf` bucket, the highest finite bound. `None` without observations.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let within = count - below;
            let fraction = if within > 0.0 {
                (rank - below) / within
            } else {
                1.0
            };
            return Some(lower + (le - lower) * fraction);
        }
        (lower, below) = (le, count);
    }
    Some(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(part: Part, what: &str, value: f64, baseline: f64) -> Figure {
        Figure::new(part, Unit::Seconds, (what, value), ("by hand", baseline))
    }

    #[test]
    fn figures_round_trip_through_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench/results.jsonl");
        let first = vec![figure(Part::Cluster, "apply → Available", 18.4, 6.0)];
        let second = vec![
            Figure::new(
                Part::Backup,
                Unit::Mebibytes,
                ("peak RSS, 1024 MiB DB", 51.7),
                ("peak RSS, 100 MiB DB", 50.8),
            ),
            figure(Part::Restore, "zero baseline", 1.0, 0.0),
        ];
        append(&path, &first).unwrap();
        append(&path, &second).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3);
        let read = parse_results(&format!("{text}\n\n")).unwrap();
        assert_eq!(read, [first, second].concat());
        assert_eq!(read[2].ratio, None, "1/0 is recorded as no ratio");
    }

    #[test]
    fn a_relative_path_is_refused() {
        let err = append(Path::new("target/bench/results.jsonl"), &[]).unwrap_err();
        assert!(matches!(err, BenchError::RelativePath { .. }), "{err}");
    }

    #[test]
    fn a_bad_line_is_named() {
        let good = serde_json::to_string(&figure(Part::Cluster, "x", 1.0, 2.0)).unwrap();
        let err = parse_results(&format!("{good}\n{{\"part\":\"nope\"}}\n")).unwrap_err();
        assert!(matches!(err, BenchError::Parse { line: 2, .. }), "{err}");
    }

    #[test]
    fn the_json_line_names_its_fields() {
        let json = serde_json::to_value(figure(Part::Restore, "get", 3.0, 4.0)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "part": "restore", "measured": "get", "value": 3.0, "baseline": 4.0,
                "baseline_is": "by hand", "ratio": 0.75, "unit": "s"
            })
        );
    }

    #[test]
    fn ratios_have_three_significant_digits() {
        for (x, text) in [
            (3.0766, "3.08"),
            (69.74, "69.7"),
            (1.0, "1.00"),
            (0.7717, "0.772"),
            (0.04123, "0.0412"),
            (1207.4, "1207"),
            (9.996, "10.0"),
            (99.96, "100"),
            (-2.5, "-2.50"),
            (0.0, "0"),
            (f64::INFINITY, "n/a"),
            (f64::NAN, "n/a"),
        ] {
            assert_eq!(format_number(x), text, "{x}");
        }
    }

    #[test]
    fn the_combined_table_orders_parts_and_names_the_missing() {
        let figures = vec![
            figure(Part::Cluster, "apply → Available | 3 members", 18.4, 6.0),
            figure(Part::Cluster, "kill → Available", 10.49, 0.1504),
            figure(Part::Restore, "EtcdRestore → Succeeded", 49.2, 23.4),
        ];
        let table = combined_table(&figures);
        assert_eq!(table.missing, vec![Part::Backup, Part::Scale, Part::Repair]);
        let expected = "\
| part | measured | figure | baseline in the same run | ratio |
|---|---|---|---|---|
| cluster | apply → Available \\| 3 members | 18.4 s | 6.00 s: by hand | 3.07 |
| cluster | kill → Available | 10.5 s | 0.150 s: by hand | 69.7 |
| backup | **missing**: no figures recorded (`cargo bench -p etcd-backup-operator --bench backup` not run, or it failed before recording them) | – | – | – |
| restore | EtcdRestore → Succeeded | 49.2 s | 23.4 s: by hand | 2.10 |
| scale | **missing**: no figures recorded (`cargo bench -p e2e-scenarios --bench scale` not run, or it failed before recording them) | – | – | – |
| repair | **missing**: no figures recorded (`cargo bench -p e2e-scenarios --bench repair` not run, or it failed before recording them) | – | – | – |

ratio = figure / baseline (times: above 1 is slower than the baseline; rates: below 1 is slower; peak RSS: 1 is flat).
";
        assert_eq!(table.markdown, expected);
    }

    #[test]
    fn an_empty_file_is_every_part_missing() {
        let table = combined_table(&parse_results("").unwrap());
        assert_eq!(table.missing, Part::ALL.to_vec());
        assert_eq!(
            table.markdown.matches("**missing**").count(),
            Part::ALL.len()
        );
    }

    #[test]
    fn a_zero_baseline_has_no_ratio() {
        let table = combined_table(&[figure(Part::Cluster, "x", 1.0, 0.0)]);
        assert!(table.markdown.contains("| 1.00 s | 0 s: by hand | n/a |"));
    }

    #[test]
    fn summaries_take_the_middle() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Summary::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn steps_number_each_reason_exactly() {
        let mut steps = Steps::default();
        steps.push("MemberAdded", 2.0);
        steps.push("Member", 1.0);
        steps.push("MemberAdded", 3.0);
        let keys: Vec<&str> = steps.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["MemberAdded #1", "Member #1", "MemberAdded #2"]);
        assert!(steps.has("Member") && !steps.has("Added"));
        steps.sort_by_offset();
        assert_eq!(steps.iter().next(), Some(("Member #1", 1.0)));
    }

    #[test]
    fn the_tables_compare_sides() {
        let mut op1 = Steps::default();
        op1.push("Seed", 1.0);
        op1.push("Promoted", 5.0);
        let mut op2 = Steps::default();
        op2.push("Seed", 3.0);
        op2.push("Promoted", 7.0);
        let mut hand = Steps::default();
        hand.push("Seed", 0.0);
        hand.push("Downloaded", 1.5);
        let operator = Side::new(
            "(a) operator",
            [
                (Duration::from_secs(10), &op1),
                (Duration::from_secs(12), &op2),
            ],
        );
        let by_hand = Side {
            label: "(b) by hand → healthy",
            totals: vec![4.0],
            steps: vec![&hand],
        };
        assert_eq!(
            totals_table(&operator, &by_hand, "ratio (a)/(b), medians"),
            "\
figure                  median s     min s     max s
(a) operator               11.00     10.00     12.00
(b) by hand → healthy       4.00      4.00      4.00
ratio (a)/(b), medians      2.75
"
        );
        assert_eq!(
            steps_table(&operator, &by_hand, "Available"),
            "\
step            operator    by hand
Downloaded #1          -       1.50
Seed #1             2.00       0.00
Promoted #1         6.00          -
Available          11.00       4.00
"
        );
    }

    #[test]
    fn histogram_quantiles_from_scraped_deltas() {
        let before = "\
# TYPE etcd_operator_reconcile_duration_seconds histogram
etcd_operator_reconcile_duration_seconds_bucket{le=\"0.01\",controller=\"cluster\"} 1
etcd_operator_reconcile_duration_seconds_bucket{le=\"0.02\",controller=\"cluster\"} 1
etcd_operator_reconcile_duration_seconds_bucket{le=\"+Inf\",controller=\"cluster\"} 1
etcd_operator_reconcile_duration_seconds_bucket{le=\"0.01\",controller=\"backup\"} 7
etcd_operator_reconciles_total{controller=\"cluster\",result=\"success\"} 1
etcd_operator_reconciles_total{controller=\"cluster\",result=\"error\"} 0
";
        let after = "\
etcd_operator_reconcile_duration_seconds_bucket{le=\"0.01\",controller=\"cluster\"} 51
etcd_operator_reconcile_duration_seconds_bucket{le=\"0.02\",controller=\"cluster\"} 99
etcd_operator_reconcile_duration_seconds_bucket{le=\"+Inf\",controller=\"cluster\"} 101
etcd_operator_reconciles_total{controller=\"cluster\",result=\"success\"} 98
etcd_operator_reconciles_total{controller=\"cluster\",result=\"error\"} 3
";
        let label = "controller=\"cluster\"";
        let name = "etcd_operator_reconcile_duration_seconds";
        let delta = buckets_since(
            &histogram_buckets(after, name, label),
            &histogram_buckets(before, name, label),
        );
        assert_eq!(
            delta,
            vec![(0.01, 50.0), (0.02, 98.0), (f64::INFINITY, 100.0)]
        );
        assert_eq!(histogram_quantile(0.5, &delta), Some(0.01));
        let p99 = histogram_quantile(0.99, &delta).unwrap();
        assert!(
            (p99 - 0.02).abs() < 1e-12,
            "{p99}: the +Inf bucket's rank gives the top bound"
        );
        let p74 = histogram_quantile(0.74, &delta).unwrap();
        assert!((p74 - 0.015).abs() < 1e-12, "{p74}: linear within a bucket");
        assert_eq!(
            histogram_quantile(0.5, &[(0.01, 0.0), (f64::INFINITY, 0.0)]),
            None
        );
        assert_eq!(
            series_sum(after, "etcd_operator_reconciles_total", label),
            101.0
        );
        assert_eq!(series_sum(after, "etcd_operator_reconciles", label), 0.0);
    }
}
