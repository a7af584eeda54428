//! Command-line flags of `nodewright-operator`. Every setting comes from the environment
//! (docs/operations.md); the command line only answers `--version` and `--help`.

use std::process::ExitCode;

use clap::Parser;

/// The operator's command line: no settings, only `--version`/`-V` and `--help`/`-h`.
#[derive(Debug, Parser)]
#[command(
    name = "nodewright-operator",
    version,
    about = "NodeWright operator: installs host packages onto nodes stage by stage as Jobs.",
    long_about = "NodeWright operator: installs host packages onto nodes stage by stage as Jobs.\n\n\
                  Every setting is read from the environment (NAMESPACE, AGENT_IMAGE, LOG_LEVEL, ...; \
                  see docs/operations.md). The cluster is found from KUBECONFIG, ~/.kube/config or the \
                  in-cluster service account."
)]
pub struct Args {}

/// Parses the command line. `Some(code)` means the process is done: version or help printed
/// (exit 0) or an unknown argument reported (exit 2).
pub fn handle<I, T>(args: I) -> Option<ExitCode>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Args::try_parse_from(args) {
        Ok(Args {}) => None,
        Err(e) => {
            // Printing to a closed stdout/stderr is not worth a panic.
            let _ = e.print();
            Some(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_definition_is_valid() {
        Args::command().debug_assert();
    }

    #[test]
    fn version_flag_reports_the_crate_version() {
        for flag in ["--version", "-V"] {
            let err = Args::try_parse_from(["nodewright-operator", flag]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
            assert_eq!(err.exit_code(), 0);
        }
        assert_eq!(
            Args::command().render_version().trim(),
            format!("nodewright-operator {}", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn no_arguments_start_the_operator_and_unknown_ones_are_refused() {
        assert!(handle(["nodewright-operator"]).is_none());
        let err = Args::try_parse_from(["nodewright-operator", "--bogus"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
    }
}
