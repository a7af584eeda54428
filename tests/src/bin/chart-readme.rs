//! Regenerates the values table of `chart/README.md` from `chart/values.yaml` and
//! `chart/values.schema.json`; `--check` fails when the table is stale or the contract is broken.

use std::process::ExitCode;

use nodewright_tests::chart_values::{chart_dir, readme_pair};

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let chart = chart_dir();
    let (current, fresh) = match readme_pair(&chart) {
        Ok(pair) => pair,
        Err(problems) => {
            for p in problems {
                eprintln!("chart-readme: {p}");
            }
            return ExitCode::FAILURE;
        }
    };
    if current == fresh {
        return ExitCode::SUCCESS;
    }
    if check {
        eprintln!(
            "chart-readme: chart/README.md values table is stale (run `cargo run -p nodewright-tests --bin chart-readme`)"
        );
        return ExitCode::FAILURE;
    }
    let path = chart.join("README.md");
    if let Err(e) = std::fs::write(&path, fresh) {
        eprintln!("chart-readme: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}
