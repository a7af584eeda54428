//! `kubectl nodewright`: the kubectl plugin (06-operations.md §1). Implemented verbs: `version`,
//! `pause`, `resume`, `disable`, `enable`, `reset`, `node list|status|reset|ignore|unignore`,
//! `package status|rerun|logs`, `deployment-policy reset`, `migrate`.

mod connect;
mod lifecycle;
mod migrate;
mod migrate_apply;
mod migrate_guard;
mod migrate_node;
mod migrate_object;
mod migrate_pods;
mod node;
mod nodes_write;
mod package;
mod package_logs;
mod package_logs_stream;
mod patterns;
mod plan;
mod plan_reasons;
mod plan_words;
mod policy;
mod reset;
mod status;
mod table;
mod version;

use std::io::{BufRead, Write};

use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand};
use kube::Client;

/// Output formats of listing commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Aligned columns.
    Table,
    /// Aligned columns with extra columns.
    Wide,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

fn parse_output(s: &str) -> Result<Output, String> {
    match s.to_ascii_lowercase().as_str() {
        "table" => Ok(Output::Table),
        "wide" => Ok(Output::Wide),
        "json" => Ok(Output::Json),
        "yaml" => Ok(Output::Yaml),
        _ => Err(format!("invalid output format {s:?}")),
    }
}

/// Flags shared by every command.
#[derive(Args, Clone, Debug)]
pub struct Global {
    /// kubectl's connection flags.
    #[command(flatten)]
    pub connect: connect::ConnectFlags,
    /// Operator namespace.
    #[arg(short = 'n', long, global = true, default_value = "nodewright")]
    pub namespace: String,
    /// Output format: table, wide, json, yaml.
    #[arg(short = 'o', long, global = true, default_value = "table", value_parser = parse_output)]
    pub output: Output,
    /// Print warnings (skipped nodes, failed secondary writes).
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,
    /// Show what would change; write nothing.
    #[arg(long, global = true)]
    pub dry_run: bool,
}

/// The plugin's command line.
#[derive(Parser, Debug)]
#[command(
    name = "nodewright",
    about = "Manage NodeWright rollouts",
    disable_version_flag = true
)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    /// Print `NodeWright plugin: <version>` and exit.
    #[arg(long)]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show what the operator would do on its next pass, per node, and why other nodes wait.
    Plan(plan::PlanArgs),
    /// Rollout progress per NodeWright and compartment; `--watch` redraws on change.
    Status(status::StatusArgs),
    /// Print the plugin version and the operator's version.
    Version(version::VersionArgs),
    /// Pause a NodeWright.
    Pause(lifecycle::LifecycleArgs),
    /// Resume a paused NodeWright.
    Resume(lifecycle::LifecycleArgs),
    /// Disable a NodeWright.
    Disable(lifecycle::LifecycleArgs),
    /// Enable a disabled NodeWright.
    Enable(lifecycle::LifecycleArgs),
    /// Remove all package state of a NodeWright so every package re-runs.
    Reset(reset::ResetArgs),
    /// Node commands.
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// Package commands.
    #[command(subcommand)]
    Package(PackageCommand),
    /// Take a cluster over from the Go operator (skyhook.nvidia.com): dry run unless --apply.
    Migrate(migrate::MigrateArgs),
    /// DeploymentPolicy batch-state commands.
    #[command(subcommand, name = "deployment-policy", alias = "dp")]
    DeploymentPolicy(PolicyCommand),
}

#[derive(Subcommand, Debug)]
enum PackageCommand {
    /// Per-node state of one package.
    Status(package::StatusArgs),
    /// Re-run a package on nodes (whole package, or from a stage).
    Rerun(package::RerunArgs),
    /// Logs of a package's executor pods (per node and stage; `-f` follows).
    Logs(package_logs::LogsArgs),
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// Reset the rollout batch state to batch 1.
    Reset {
        /// NodeWright name.
        nodewright: String,
        /// Skip the confirmation prompt.
        #[arg(short = 'y', long)]
        confirm: bool,
    },
}

/// Runs the plugin; errors are printed by the caller and exit 1.
pub async fn run(cli: Cli) -> Result<()> {
    let g = cli.global;
    let Some(command) = cli.command else {
        if cli.version {
            println!("NodeWright plugin: {}", version::plugin_version());
            return Ok(());
        }
        bail!("a command is required (see --help)");
    };
    match command {
        Command::Version(a) => version::run(&g, a).await,
        Command::Plan(a) => plan::run(&g, a).await,
        Command::Status(a) => status::run(&g, a).await,
        Command::Pause(a) => lifecycle::run(&g, lifecycle::Verb::Pause, a).await,
        Command::Resume(a) => lifecycle::run(&g, lifecycle::Verb::Resume, a).await,
        Command::Disable(a) => lifecycle::run(&g, lifecycle::Verb::Disable, a).await,
        Command::Enable(a) => lifecycle::run(&g, lifecycle::Verb::Enable, a).await,
        Command::Reset(a) => reset::run(&g, a).await,
        Command::Migrate(a) => migrate::run(&g, a).await,
        Command::Node(node::NodeCommand::Reset(a)) => {
            nodes_write::reset(&g, &a.nodes, &a.nodewright, a.confirm).await
        }
        Command::Node(node::NodeCommand::Ignore(a)) => {
            nodes_write::ignore(&g, &a.nodes, true).await
        }
        Command::Node(node::NodeCommand::Unignore(a)) => {
            nodes_write::ignore(&g, &a.nodes, false).await
        }
        Command::Node(c) => node::run(&g, c).await,
        Command::Package(PackageCommand::Status(a)) => package::status(&g, a).await,
        Command::Package(PackageCommand::Rerun(a)) => package::rerun(&g, a).await,
        Command::Package(PackageCommand::Logs(a)) => package_logs::run(&g, a).await,
        Command::DeploymentPolicy(PolicyCommand::Reset {
            nodewright,
            confirm,
        }) => policy::reset(&g, &nodewright, confirm).await,
    }
}

/// A client for the selected kubeconfig, context and connection flags; every request is bounded.
pub async fn client(g: &Global) -> Result<Client> {
    g.connect.client(crate::client::Purpose::Request).await
}

/// A client for watches and log streams (no overall bound, a long read timeout).
pub async fn watch_client(g: &Global) -> Result<Client> {
    g.connect.client(crate::client::Purpose::Watch).await
}

/// Lifecycle prompt: only `y`/`Y` proceed; anything else (or EOF) aborts.
pub fn confirm_lifecycle(question: &str, input: &mut impl BufRead) -> bool {
    print!("{question} [y/N]: ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    matches!(input.read_line(&mut line), Ok(n) if n > 0) && matches!(line.trim(), "y" | "Y")
}

/// Destructive prompt: `y`/`yes` in any case proceed; EOF or a read error is an error.
pub fn confirm_destructive(question: &str, input: &mut impl BufRead) -> Result<bool> {
    print!("{question} [y/N]: ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) => bail!("reading confirmation: EOF"),
        Ok(_) => Ok(matches!(
            line.trim().to_ascii_lowercase().as_str(),
            "y" | "yes"
        )),
        Err(e) => bail!("reading confirmation: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_follow_the_two_conventions() {
        assert!(confirm_lifecycle("q", &mut "y\n".as_bytes()));
        assert!(!confirm_lifecycle("q", &mut "yes\n".as_bytes()));
        assert!(!confirm_lifecycle("q", &mut "".as_bytes()));
        assert!(confirm_destructive("q", &mut "YES\n".as_bytes()).unwrap_or(false));
        assert!(!confirm_destructive("q", &mut "n\n".as_bytes()).unwrap_or(true));
        assert!(confirm_destructive("q", &mut "".as_bytes()).is_err());
    }

    #[test]
    fn output_formats_are_case_insensitive_and_checked() {
        assert_eq!(parse_output("JSON"), Ok(Output::Json));
        assert_eq!(
            parse_output("xml"),
            Err("invalid output format \"xml\"".into())
        );
    }
}
