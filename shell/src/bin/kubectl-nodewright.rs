//! `kubectl-nodewright`: the kubectl plugin (`kubectl nodewright ...`).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = nodewright_shell::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("Error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(nodewright_shell::cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
