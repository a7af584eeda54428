//! `kubectl nodewright package logs` against the real operator's executor pods, with kwok's fake
//! container logs (tests/e2e/kwok/pod-logs.yaml.in: container `<name>` reads
//! `$NODEWRIGHT_E2E_POD_LOGS/<name>.log`, which this test writes).

use std::sync::mpsc::Receiver;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use serde_json::json;

use crate::cli_connect::{Run, lines_until, plugin, spawn_plugin};
use crate::harness::{Case, wait_for};
use crate::support::{live_pods, pkg};

const HOLD: &str = "e2e-hold-logs";
const FAIL: &str = "e2e-fail-apply-logs";

fn log_dir() -> Result<String> {
    std::env::var("NODEWRIGHT_E2E_POD_LOGS")
        .context("NODEWRIGHT_E2E_POD_LOGS unset (run through tests/e2e/run.sh)")
}

/// Writes `<dir>/<file>` in the CRI log format kwok serves (one `stdout F` record per line).
fn write_log(file: &str, lines: &[&str]) -> Result<()> {
    let text: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("2026-01-01T00:00:{i:02}.000000000Z stdout F {l}\n"))
        .collect();
    std::fs::write(format!("{}/{file}", log_dir()?), text)?;
    Ok(())
}

fn append_log(file: &str, line: &str) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(format!("{}/{file}", log_dir()?))?;
    writeln!(f, "2026-01-01T00:01:00.000000000Z stdout F {line}")?;
    Ok(())
}

fn write_logs() -> Result<()> {
    write_log("e2e-hold-logs-init.log", &["copy step ran"])?;
    write_log(
        "e2e-hold-logs-apply.log",
        &["apply: step 1", "apply: step 2", "apply: done"],
    )?;
    write_log(
        "e2e-hold-logs-apply.previous.log",
        &["apply: the run before"],
    )?;
    write_log("e2e-hold-logs-applycheck.log", &["applycheck: ok"])?;
    write_log("e2e-fail-apply-logs-apply.log", &["apply: exploded"])?;
    write_log("default.log", &["some other container"])
}

async fn logs(args: &[&str]) -> Result<Run> {
    let mut all = vec!["package", "logs"];
    all.extend_from_slice(args);
    let run = plugin(&all).await?;
    eprintln!(
        "[e2e] package logs {}: ok={}\n{}{}",
        args.join(" "),
        run.ok,
        run.stdout,
        run.stderr
    );
    Ok(run)
}

/// Lines a followed plugin printed until every line of `want` was seen (30 s at most).
fn until(rx: &Receiver<String>, want: &[String]) -> Result<Vec<String>> {
    lines_until(rx, &format!("{want:?}"), |lines| {
        want.iter().all(|w| lines.contains(w))
    })
}

/// `-f` on two nodes: both streams at once, each line prefixed `[node step]`; a line appended to
/// the log file afterwards arrives while following.
fn follow_sees_new_lines(c: &Case) -> Result<()> {
    let (mut child, rx) = spawn_plugin(&[
        "package",
        "logs",
        HOLD,
        "--nodewright",
        &c.id,
        "-n",
        &c.ns,
        "-f",
        "-c",
        "e2e-hold-logs-apply",
    ])?;
    let line = |node: &str, text: &str| format!("[{node} e2e-hold-logs-apply] {text}");
    let before = until(
        &rx,
        &[
            line(&c.nodes[0], "apply: step 1"),
            line(&c.nodes[0], "apply: done"),
            line(&c.nodes[1], "apply: done"),
        ],
    );
    let appended = "apply: appended while following";
    let after = append_log("e2e-hold-logs-apply.log", appended).and_then(|_| {
        until(
            &rx,
            &[line(&c.nodes[0], appended), line(&c.nodes[1], appended)],
        )
    });
    let _ = child.kill();
    let _ = child.wait();
    let (before, after) = (before?, after?);
    eprintln!(
        "[e2e] followed:\n{}\n{}",
        before.join("\n"),
        after.join("\n")
    );
    ensure!(
        before
            .iter()
            .any(|l| l == &format!("[{} e2e-hold-logs-apply] apply: step 1", c.nodes[0])),
        "{before:?}"
    );
    Ok(())
}

/// `package logs` shows each selected pod step under a header (node, pod, step, state, stage),
/// skips the copy step unless `--all-containers`, filters by `--node`, `-c`, `--stage`, honours
/// `--tail` and `--previous`, says why a step has no log, follows with `-f`, and fails with a
/// message naming what was searched when nothing matches.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn cli_package_logs_shows_the_executor_steps() -> Result<()> {
    let c = Case::new("lg", 2).await?;
    let r = async {
        write_logs()?;
        let packages = json!({ HOLD: pkg("1.0.0", json!({})), FAIL: pkg("1.0.0", json!({})) });
        c.create(c.nodewright(&c.id, json!({ "packages": packages })))
            .await?;
        wait_for("both hold pods running", Duration::from_secs(90), || async {
            let running = live_pods(&c, &c.id)
                .await?
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            Ok((running == 2).then_some(()))
        })
        .await?;
        wait_for("the failed apply recorded", Duration::from_secs(90), || async {
            Ok(c.entry(&c.nodes[0], &c.id, FAIL)
                .await?
                .filter(|(_, state)| state == "erroring"))
        })
        .await?;
        let base = ["--nodewright", c.id.as_str(), "-n", c.ns.as_str()];
        let with = |extra: &[&'static str]| -> Vec<String> {
            let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        let run = |pkg: &'static str, extra: &[&'static str]| {
            let mut v = vec![pkg.to_string()];
            v.extend(with(extra));
            async move { logs(&v.iter().map(String::as_str).collect::<Vec<_>>()).await }
        };

        let all = run(HOLD, &[]).await?;
        ensure!(all.ok, "{}", all.stderr);
        for node in &c.nodes {
            for step in ["e2e-hold-logs-apply", "e2e-hold-logs-applycheck"] {
                let head = format!("==> node {node} pod ");
                let tail = format!(" step {step} [Completed] (stage apply) <==");
                ensure!(
                    all.stdout.lines().any(|l| l.starts_with(&head) && l.ends_with(&tail)),
                    "header for {node} {step}: {}",
                    all.stdout
                );
            }
        }
        ensure!(all.stdout.matches("apply: step 1\napply: step 2\napply: done\n").count() == 2);
        ensure!(all.stdout.matches("applycheck: ok").count() == 2);
        ensure!(!all.stdout.contains("copy step ran"), "{}", all.stdout);

        let one = run(HOLD, &["--node", "e2e-lg-1", "-c", "e2e-hold-logs-apply", "--tail", "1"]).await?;
        ensure!(one.ok, "{}", one.stderr);
        ensure!(one.stdout.lines().count() == 2, "header + 1 line: {}", one.stdout);
        ensure!(one.stdout.contains("node e2e-lg-1 ") && one.stdout.ends_with("\napply: done\n"));

        let every = run(HOLD, &["--node", "e2e-lg-0", "--all-containers"]).await?;
        ensure!(every.ok, "{}", every.stderr);
        ensure!(every.stdout.contains("step e2e-hold-logs-init [Completed]"));
        ensure!(every.stdout.contains("copy step ran") && every.stdout.contains(" step done ["));

        let stamped = run(HOLD, &["--node", "e2e-lg-1", "-c", "e2e-hold-logs-apply", "--timestamps", "--tail", "1"]).await?;
        ensure!(stamped.ok && stamped.stdout.ends_with("\n2026-01-01T00:00:02.000000000Z apply: done\n"), "{}", stamped.stdout);
        let recent = run(HOLD, &["--node", "e2e-lg-1", "-c", "e2e-hold-logs-apply", "--since", "1h"]).await?;
        ensure!(recent.ok && recent.stdout.lines().count() == 1, "lines of 2026-01-01 are older than 1h: {}", recent.stdout);

        let prev = run(HOLD, &["--node", "e2e-lg-0", "-c", "e2e-hold-logs-apply", "-p"]).await?;
        ensure!(prev.ok && prev.stdout.ends_with("\napply: the run before\n"), "{}", prev.stdout);

        let failed = run(FAIL, &["--node", "e2e-lg-0"]).await?;
        ensure!(failed.ok, "{}", failed.stderr);
        ensure!(failed.stdout.contains("step e2e-fail-apply-logs-apply [Exit 1] (stage apply)"));
        ensure!(failed.stdout.contains("apply: exploded"));
        ensure!(failed.stdout.contains(
            "step e2e-fail-apply-logs-applycheck [PodInitializing] (stage apply) <==\n(no log: the step has not started: PodInitializing)"
        ), "{}", failed.stdout);

        let none = run(HOLD, &["--stage", "config"]).await?;
        ensure!(!none.ok && none.stderr.contains(&format!(
            "no executor pods found: searched 0 pod(s) labelled nodewright.nvidia.com/name={} in namespace {:?} for package \"e2e-hold-logs\" with nodewright.nvidia.com/stage=config",
            c.id, c.ns
        )), "{}", none.stderr);
        let nope = run("nope", &[]).await?;
        ensure!(!nope.ok && nope.stderr.contains("package \"nope\" is not in NodeWright"), "{}", nope.stderr);
        let bad = run(HOLD, &["--stage", "install"]).await?;
        ensure!(!bad.ok && bad.stderr.contains("invalid stage \"install\""), "{}", bad.stderr);
        let missing = logs(&[HOLD, "--nodewright", "e2e-lg-missing", "-n", &c.ns]).await?;
        ensure!(!missing.ok && missing.stderr.contains("NodeWright \"e2e-lg-missing\" not found"));

        let never = run(FAIL, &["--node", "e2e-lg-0", "-c", "e2e-fail-apply-logs-applycheck", "-f"]).await?;
        ensure!(never.ok && never.stderr.contains("e2e-fail-apply-logs-applycheck ended without running"), "{}", never.stderr);

        follow_sees_new_lines(&c)
    }
    .await;
    c.finish(r).await
}
