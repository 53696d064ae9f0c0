//! `make bench`'s last step: reads the figures every part recorded (JSON lines, see
//! `test_support::bench`) and prints them as one markdown table, parts in the order cluster,
//! backup, restore.
//!
//! Usage: `bench-report [RESULTS_FILE]` (default: `$BENCH_RESULTS`). Exits 1, after printing the
//! table, when a part recorded no figures (its row says so), and 2 when the file is missing or
//! unreadable.

use std::path::PathBuf;
use std::process::ExitCode;

use test_support::bench::{RESULTS_ENV, combined_table, parse_results};

fn main() -> ExitCode {
    let Some(path) = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os(RESULTS_ENV))
        .map(PathBuf::from)
    else {
        eprintln!(
            "usage: bench-report RESULTS_FILE (or set {RESULTS_ENV}); `make bench` writes it"
        );
        return ExitCode::from(2);
    };
    let figures = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_results(&text).map_err(|e| e.to_string()))
    {
        Ok(figures) => figures,
        Err(e) => {
            eprintln!("bench-report: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let table = combined_table(&figures);
    println!(
        "\nmake bench: every part's figures against baselines measured in the same run ({})\n",
        path.display()
    );
    print!("{}", table.markdown);
    if table.missing.is_empty() {
        ExitCode::SUCCESS
    } else {
        let names: Vec<&str> = table.missing.iter().map(|p| p.name()).collect();
        eprintln!("bench-report: no figures from: {}", names.join(", "));
        ExitCode::FAILURE
    }
}
