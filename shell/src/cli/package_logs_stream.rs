//! Reading the selected steps' logs for `package logs`: one after the other with headers, or,
//! with `--follow`, all at once with a `[node step]` prefix per line.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use futures::{AsyncBufReadExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, LogParams};

use super::package_logs::{LogsArgs, Selection, header, not_started};
use super::{Global, client, watch_client};

/// How often a followed step that has not started yet is looked at again.
const START_POLL: Duration = Duration::from_secs(2);

fn params(a: &LogsArgs, step: &str) -> LogParams {
    LogParams {
        container: Some(step.to_string()),
        follow: a.follow,
        previous: a.previous,
        tail_lines: (a.tail >= 0).then_some(a.tail),
        timestamps: a.timestamps,
        since_seconds: a
            .since
            .map(|d| i64::try_from(d.as_secs().max(1)).unwrap_or(i64::MAX)),
        ..LogParams::default()
    }
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Copies one step's log to stdout, each line prefixed with `prefix`.
async fn copy(api: &Api<Pod>, pod: &str, step: &str, lp: &LogParams, prefix: &str) -> Result<()> {
    let stream = api
        .log_stream(pod, lp)
        .await
        .with_context(|| format!("opening the log of {pod}/{step}"))?;
    let mut lines = stream.lines();
    while let Some(line) = lines
        .try_next()
        .await
        .with_context(|| format!("reading the log of {pod}/{step}"))?
    {
        println!("{prefix}{line}");
    }
    Ok(())
}

/// Prints every selected step's log in order, each under its header; a step that has not
/// started says why. Fails at the end if any log could not be read.
pub async fn print_all(c: &Client, ns: &str, a: &LogsArgs, sel: Selection) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(c.clone(), ns);
    let (mut failed, total) = (0, sel.len());
    let mut first = true;
    for (pod, steps) in &sel.streams {
        for step in steps {
            if !first {
                println!();
            }
            first = false;
            println!("{}", header(pod, step));
            if let Some(why) = not_started(pod, step).filter(|_| !a.previous) {
                println!("(no log: the step has not started: {why})");
                continue;
            }
            if let Err(e) = copy(&api, &name(pod), step, &params(a, step), "").await {
                eprintln!("Error: {e:#}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {total} log(s) could not be read");
    }
    Ok(())
}

/// Waits until `step` of `pod` has started; `None` when the pod is gone or finished without
/// running it.
async fn wait_started(api: &Api<Pod>, pod: &str, step: &str) -> Result<Option<Pod>> {
    loop {
        let Some(p) = api.get_opt(pod).await? else {
            return Ok(None);
        };
        if not_started(&p, step).is_none() {
            return Ok(Some(p));
        }
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return Ok(None);
        }
        tokio::time::sleep(START_POLL).await;
    }
}

/// The pod API through the bounded request client (status polls) and through the watch client
/// (log streams that stay open).
struct Apis {
    requests: Api<Pod>,
    streams: Api<Pod>,
}

/// Follows one step: waits for it to start, then streams it until it ends.
async fn follow_one(
    apis: &Apis,
    a: &LogsArgs,
    pod: Pod,
    step: String,
    prefix: String,
) -> Result<()> {
    let pod_name = name(&pod);
    if not_started(&pod, &step).is_some() {
        eprintln!("{prefix}waiting for {pod_name}/{step} to start");
        if wait_started(&apis.requests, &pod_name, &step)
            .await?
            .is_none()
        {
            eprintln!("{prefix}{pod_name}/{step} ended without running");
            return Ok(());
        }
    }
    follow_copy(&apis.streams, &pod_name, &step, a, &prefix).await
}

/// The RFC 3339 time a timestamped log line starts with, and the text after it.
pub fn split_timestamp(line: &str) -> (Option<jiff::Timestamp>, &str) {
    match line.split_once(' ') {
        Some((ts, text)) => match ts.parse() {
            Ok(t) => (Some(t), text),
            Err(_) => (None, line),
        },
        None => (line.parse().ok(), ""),
    }
}

/// True when a log read failed because the connection's read timeout expired: some error in the
/// chain is an I/O `TimedOut` or reads "timed out" (hyper's body read timeout).
fn read_timed_out(e: &std::io::Error) -> bool {
    type Dyn = dyn std::error::Error + 'static;
    let mut next: Option<&Dyn> = Some(e);
    while let Some(err) = next {
        if err.to_string().ends_with("timed out") {
            return true;
        }
        next = match err.downcast_ref::<std::io::Error>() {
            Some(io) if io.kind() == std::io::ErrorKind::TimedOut => return true,
            Some(io) => io.get_ref().map(|inner| inner as &Dyn),
            None => err.source(),
        };
    }
    false
}

/// The whole second at or before `t` (the log API's `sinceTime` has whole seconds).
fn second_floor(t: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// Follows one started step. The stream is read with timestamps; when the connection's read
/// timeout ends it (no line for `WATCH_READ_TIMEOUT`), it is reopened from the last line's
/// second and lines already printed are skipped.
async fn follow_copy(
    api: &Api<Pod>,
    pod: &str,
    step: &str,
    a: &LogsArgs,
    prefix: &str,
) -> Result<()> {
    let mut lp = params(a, step);
    lp.timestamps = true;
    let mut last: Option<jiff::Timestamp> = None;
    let mut opened = jiff::Timestamp::now();
    loop {
        let stream = api
            .log_stream(pod, &lp)
            .await
            .with_context(|| format!("opening the log of {pod}/{step}"))?;
        let mut lines = stream.lines();
        loop {
            match lines.try_next().await {
                Ok(Some(line)) => {
                    let (ts, text) = split_timestamp(&line);
                    if ts.is_some() && last.is_some() && ts <= last {
                        continue;
                    }
                    last = ts.or(last);
                    println!("{prefix}{}", if a.timestamps { &line } else { text });
                }
                Ok(None) => return Ok(()),
                Err(e) if read_timed_out(&e) => break,
                Err(e) => {
                    return Err(e).with_context(|| format!("reading the log of {pod}/{step}"));
                }
            }
        }
        lp.since_seconds = None;
        lp.tail_lines = None;
        lp.since_time = Some(second_floor(last.unwrap_or(opened)));
        opened = jiff::Timestamp::now();
    }
}

/// Follows every selected step at once; lines carry a `[node step]` prefix when there is more
/// than one stream.
pub async fn follow(g: &Global, a: &LogsArgs, sel: Selection) -> Result<()> {
    let total = sel.len();
    if total > a.max_log_requests {
        bail!(
            "following {total} logs exceeds --max-log-requests={}; narrow the selection with --node, --stage or -c, or raise the limit",
            a.max_log_requests
        );
    }
    let apis = Apis {
        requests: Api::namespaced(client(g).await?, &g.namespace),
        streams: Api::namespaced(watch_client(g).await?, &g.namespace),
    };
    let mut tasks = Vec::new();
    for (pod, steps) in sel.streams {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        for step in steps {
            let prefix = if total > 1 {
                format!("[{node} {step}] ")
            } else {
                String::new()
            };
            if total == 1 {
                println!("{}", header(&pod, &step));
            }
            tasks.push(follow_one(&apis, a, pod.clone(), step, prefix));
        }
    }
    let failed = futures::future::join_all(tasks)
        .await
        .into_iter()
        .filter_map(|r| r.err())
        .inspect(|e| eprintln!("Error: {e:#}"))
        .count();
    if failed > 0 {
        bail!("{failed} of {total} log stream(s) failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamped_lines_split_and_resume_from_the_second() {
        let (ts, text) = split_timestamp("2026-01-01T00:00:02.5Z apply: done");
        assert_eq!(text, "apply: done");
        let ts = ts.unwrap_or_default();
        assert_eq!(ts.to_string(), "2026-01-01T00:00:02.5Z");
        assert_eq!(second_floor(ts).to_string(), "2026-01-01T00:00:02Z");
        assert_eq!(split_timestamp("no time here"), (None, "no time here"));
        let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "read");
        assert!(read_timed_out(&std::io::Error::other(timeout)));
        assert!(read_timed_out(&std::io::Error::other(
            "reading a body: timed out"
        )));
        assert!(!read_timed_out(&std::io::Error::other("connection reset")));
    }
}
