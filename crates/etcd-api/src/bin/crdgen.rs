//! Writes or checks the CRD templates of the Helm chart, or prints the CRDs.
//!
//! ```text
//! crdgen write charts/etcd-operator   # what `make crds` runs
//! crdgen check charts/etcd-operator   # exit 1 and name the stale files
//! crdgen print                        # plain multi-document YAML, for kubectl apply -f -
//! crdgen reference                    # the API reference in Markdown (crates/etcd-api/API.md)
//! crdgen chart-readme charts/etcd-operator  # the chart's README from values.yaml (make chart-docs)
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use etcd_api::crd;

#[derive(Parser)]
#[command(about = "Generates the etcd operator's CustomResourceDefinitions from the Rust types")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the CRD templates into the chart at CHART and delete generated files no longer produced.
    Write { chart: PathBuf },
    /// Fail if the chart's CRD templates differ from what the types generate.
    Check { chart: PathBuf },
    /// Print the CRDs as plain YAML documents.
    Print,
    /// Print the API reference (Markdown) generated from the CRDs.
    Reference,
    /// Print the chart's README generated from CHART/values.yaml's `# --` comments.
    ChartReadme { chart: PathBuf },
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("crdgen: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match args.command {
        Command::ChartReadme { chart } => {
            let values = std::fs::read_to_string(chart.join("values.yaml"))?;
            print!("{}", etcd_api::values_doc::readme(&values)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Reference => {
            print!("{}", etcd_api::reference::markdown());
            Ok(ExitCode::SUCCESS)
        }
        Command::Print => {
            for crd in crd::all() {
                print!("---\n{}", crd::to_yaml(&crd)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Write { chart } => {
            let files = crd::chart_templates()?;
            std::fs::create_dir_all(chart.join(crd::CHART_CRD_DIR))?;
            for stale in stale_files(&chart, &files)? {
                std::fs::remove_file(&stale)?;
                println!("removed {}", stale.display());
            }
            for file in files {
                let path = chart.join(&file.path);
                if std::fs::read_to_string(&path).ok().as_deref() != Some(file.contents.as_str()) {
                    std::fs::write(&path, file.contents)?;
                    println!("wrote {}", path.display());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { chart } => {
            let files = crd::chart_templates()?;
            let mut problems = Vec::new();
            for file in &files {
                let path = chart.join(&file.path);
                match std::fs::read_to_string(&path) {
                    Ok(contents) if contents == file.contents => {}
                    Ok(_) => problems.push(format!("{} is stale", path.display())),
                    Err(error) => problems.push(format!("{}: {error}", path.display())),
                }
            }
            for stale in stale_files(&chart, &files)? {
                problems.push(format!("{} is no longer generated", stale.display()));
            }
            if problems.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            for problem in problems {
                eprintln!("crdgen: {problem}");
            }
            eprintln!("crdgen: run `make crds` and commit the result");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Files in the chart's generated-CRD directory that the types no longer produce.
fn stale_files(chart: &Path, files: &[crd::GeneratedFile]) -> std::io::Result<Vec<PathBuf>> {
    let dir = chart.join(crd::CHART_CRD_DIR);
    let expected: Vec<PathBuf> = files.iter().map(|f| chart.join(&f.path)).collect();
    let mut stale = Vec::new();
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "yaml") && !expected.contains(&path) {
                stale.push(path);
            }
        }
    }
    stale.sort();
    Ok(stale)
}
