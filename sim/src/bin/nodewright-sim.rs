//! `nodewright-sim`: run scenario files, replay traces, explore random clusters.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use nodewright_sim::explore::{ExploreConfig, explore};
use nodewright_sim::operator::real_core;
use nodewright_sim::scenario::{RunResult, Scenario};
use nodewright_sim::time::show;
use nodewright_sim::trace::{Divergence, replay_reader, write_jsonl};
use nodewright_sim::windows::{WindowTotals, attribute, json_differences, parse_windows};

/// Deterministic cluster simulator for the NodeWright core.
#[derive(Parser)]
#[command(name = "nodewright-sim", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenario files (or directories of them) and check their expectations.
    Run {
        /// Scenario files or directories.
        scenarios: Vec<PathBuf>,
        /// Write `<name>.timeline.txt`, `<name>.svg` and `<name>.trace.jsonl` here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print each scenario's timeline.
        #[arg(long)]
        timeline: bool,
        /// Run with this seed instead of the scenario's (fault randomness, `world.jitter`).
        #[arg(long)]
        seed: Option<u64>,
        /// Run each scenario over this many seeds (from `--seed`, else the scenario's) and
        /// list the failing ones.
        #[arg(long)]
        seeds: Option<u64>,
    },
    /// Replay JSONL traces: rebuild snapshots, re-run the core, report differing effects.
    Replay {
        /// Trace files (one per operator process), each replayed from its start.
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        /// Print at most this many divergences per trace.
        #[arg(long, default_value_t = 20)]
        show: usize,
        /// Also report per named window: lines `<name> <start> <end>` (RFC 3339), e.g. one per test.
        #[arg(long)]
        windows: Option<PathBuf>,
    },
    /// Run random clusters, specs and fault schedules and check the invariants.
    Explore {
        /// Number of seeds.
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// First seed.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Also require convergence once faults stop.
        #[arg(long)]
        converge: bool,
        /// List every failing seed.
        #[arg(long)]
        verbose: bool,
        /// Write each failing seed's scenario here (`seed-<n>.yaml`, runnable with `run`).
        #[arg(long)]
        dump: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool> {
    match Cli::parse().command {
        Command::Run {
            scenarios,
            seed,
            seeds: Some(count),
            ..
        } => sweep_scenarios(&scenarios, seed, count),
        Command::Run {
            scenarios,
            out,
            timeline,
            seed,
            seeds: None,
        } => run_scenarios(&scenarios, out.as_deref(), timeline, seed),
        Command::Replay {
            traces,
            show,
            windows,
        } => replay_traces(&traces, show, windows.as_deref()),
        Command::Explore {
            seeds,
            first,
            converge,
            verbose,
            dump,
        } => {
            let started = std::time::Instant::now();
            let summary = explore(&ExploreConfig {
                seeds,
                first,
                require_convergence: converge,
                ..Default::default()
            });
            println!("{}", summary.render());
            if verbose {
                print!("{}", summary.render_all());
            }
            if let Some(dir) = dump {
                std::fs::create_dir_all(&dir)?;
                for f in &summary.failures {
                    let text = serde_json::to_string_pretty(&f.scenario)?;
                    std::fs::write(dir.join(format!("seed-{}.yaml", f.seed)), text)?;
                }
            }
            println!("wall time {:.1}s", started.elapsed().as_secs_f64());
            Ok(summary.failures.is_empty())
        }
    }
}

fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            entries.sort();
            files.extend(entries);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

fn load(file: &Path) -> Result<Scenario> {
    let text = std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
    Scenario::from_yaml(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("parse {}", file.display()))
}

/// Runs every scenario over `count` seeds; prints the failing seeds and the first failure.
fn sweep_scenarios(paths: &[PathBuf], seed: Option<u64>, count: u64) -> Result<bool> {
    let mut clean = true;
    for file in collect(paths)? {
        let scenario = load(&file)?;
        let first = seed.unwrap_or(scenario.seed);
        let sweep = scenario
            .sweep(real_core, first, count)
            .map_err(anyhow::Error::msg)?;
        let bad: Vec<u64> = sweep.failing.iter().map(|(s, _)| *s).collect();
        println!(
            "{:<34} seeds {first}..{}: {} failing {bad:?}",
            scenario.name,
            first + count,
            bad.len()
        );
        if let Some((s, r)) = sweep.failing.first() {
            println!("  first failing seed {s} (run it alone with --seed {s}):");
            print_result(r);
        }
        clean &= bad.is_empty() || scenario.pending.is_some();
    }
    Ok(clean)
}

fn run_scenarios(
    paths: &[PathBuf],
    out: Option<&Path>,
    print_timeline: bool,
    seed: Option<u64>,
) -> Result<bool> {
    let files = collect(paths)?;
    let (mut passed, mut failed, mut pending, mut unpend) = (0, 0, 0, Vec::new());
    for file in files {
        let mut scenario = load(&file)?;
        if let Some(seed) = seed {
            scenario.seed = seed;
        }
        let result = scenario
            .run(real_core(), out.is_some())
            .map_err(anyhow::Error::msg)?;
        print_result(&result);
        if print_timeline {
            println!("{}", result.timeline.to_text());
        }
        if let Some(dir) = out {
            write_outputs(dir, &result)?;
        }
        match (&result.pending, result.passed) {
            (None, true) => passed += 1,
            (None, false) => failed += 1,
            (Some(_), false) => pending += 1,
            (Some(_), true) => {
                pending += 1;
                unpend.push(result.name.clone());
            }
        }
    }
    println!("\n{passed} passed, {failed} failed, {pending} pending");
    if pending > 0 {
        println!("(pending scenarios are marked `pending:` and expected to fail for now)");
    }
    if !unpend.is_empty() {
        println!(
            "pending scenarios that now PASS (remove their `pending:`): {}",
            unpend.join(", ")
        );
    }
    Ok(failed == 0)
}

fn print_result(r: &RunResult) {
    let verdict = match (&r.pending, r.passed) {
        (None, true) => "PASS".to_string(),
        (None, false) => "FAIL".to_string(),
        (Some(_), false) => "PENDING".to_string(),
        (Some(_), true) => "PENDING-BUT-PASSES".to_string(),
    };
    println!(
        "{verdict:<10} {:<34} [{}] met at {}, ended {}, {} passes",
        r.name,
        r.spec,
        r.met_at.map_or("-".into(), show),
        show(r.ended_at),
        r.passes
    );
    if let (Some(why), false) = (&r.pending, r.passed) {
        println!("    pending: {why}");
    }
    for d in &r.denials {
        println!("    admission {d}");
    }
    if r.passed || r.pending.is_some() && r.violations.is_empty() && r.failures.len() > 3 {
        if !r.passed {
            println!("    first unmet: {}", r.failures[0]);
        }
        return;
    }
    for f in r.failures.iter().take(8) {
        println!("    unmet: {f}");
    }
    if let Some(v) = r.violations.first() {
        println!("    INVARIANT {} at {}: {}", v.rule, show(v.at), v.message);
        println!(
            "    ({} violations in total; trace with --out)",
            r.violations.len()
        );
    }
}

fn write_outputs(dir: &Path, r: &RunResult) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join(format!("{}.timeline.txt", r.name)),
        r.timeline.to_text(),
    )?;
    std::fs::write(
        dir.join(format!("{}.svg", r.name)),
        r.timeline.to_svg(&format!("{} — {}", r.name, r.spec)),
    )?;
    let objects: Vec<serde_json::Value> = r.final_objects.iter().map(|o| o.to_json()).collect();
    std::fs::write(
        dir.join(format!("{}.final.json", r.name)),
        serde_json::to_string_pretty(&objects)?,
    )?;
    let mut w = BufWriter::new(File::create(dir.join(format!("{}.trace.jsonl", r.name)))?);
    write_jsonl(&r.trace, &mut w)?;
    Ok(())
}

/// Replays each trace from its start, prints per-trace and per-window totals and the first
/// divergences; true when nothing differs.
fn replay_traces(traces: &[PathBuf], show: usize, windows: Option<&Path>) -> Result<bool> {
    let windows = match windows {
        Some(p) => parse_windows(&std::fs::read_to_string(p).context("read windows")?)
            .map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    let mut totals = vec![WindowTotals::default(); windows.len()];
    let core = real_core();
    let mut clean = true;
    for trace in traces {
        let file = File::open(trace).with_context(|| format!("open {}", trace.display()))?;
        let report = replay_reader(BufReader::new(file), None, &*core)
            .map_err(|e| anyhow::anyhow!("{}: {e}", trace.display()))?;
        println!(
            "{}: replayed {} passes, {} effects compared, {} differ{}",
            trace.display(),
            report.passes,
            report.effects,
            report.divergences.len(),
            if report.truncated {
                " (last line cut short, skipped)"
            } else {
                ""
            }
        );
        report
            .divergences
            .iter()
            .take(show)
            .for_each(print_divergence);
        clean &= report.divergences.is_empty();
        attribute(&windows, &report.pass_log, &mut totals);
    }
    for (w, t) in windows.iter().zip(&totals) {
        println!(
            "  {:<60} {:>5} passes {:>6} effects compared {:>3} differ",
            w.name, t.passes, t.effects, t.differ
        );
    }
    Ok(clean)
}

fn print_divergence(d: &Divergence) {
    let show =
        |v: &Option<serde_json::Value>| v.as_ref().map_or("(none)".into(), |v| v.to_string());
    println!("pass {} at {} effect #{}:", d.pass, d.at, d.index);
    if let (Some(a), Some(b)) = (&d.recorded, &d.replayed) {
        for line in json_differences(a, b, 10) {
            println!("  differs at {line}  (recorded -> replayed)");
        }
    }
    println!("  recorded: {}", show(&d.recorded));
    println!("  replayed: {}", show(&d.replayed));
}
