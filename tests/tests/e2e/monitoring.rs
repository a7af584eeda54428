//! The shipped Grafana dashboard and alerting rules only use what the operator exports: every
//! metric name and every label their PromQL mentions appears in a scrape of the operator under
//! test while a NodeWright rolls out (chart/files/monitoring/, docs/operations.md).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use crate::harness::Case;
use crate::support::pkg;

/// Labels Prometheus adds to every scraped series (target labels), not the operator.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

fn monitoring_file(name: &str) -> Result<String> {
    let path = format!(
        "{}/../chart/files/monitoring/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))
}

/// Every PromQL expression of the dashboard (panel targets) and the rules, and the label names
/// their legends and annotations print.
pub fn expressions() -> Result<(Vec<String>, BTreeSet<String>)> {
    let dashboard: Value = serde_json::from_str(&monitoring_file("dashboard.json")?)?;
    let mut exprs = Vec::new();
    let mut printed = BTreeSet::new();
    for panel in dashboard["panels"].as_array().context("panels")? {
        for t in panel["targets"].as_array().context("targets")? {
            exprs.push(t["expr"].as_str().context("expr")?.to_string());
            printed.extend(template_labels(
                t["legendFormat"].as_str().unwrap_or_default(),
                "{{",
            ));
        }
    }
    let rules_text = monitoring_file("alerts.yaml")?.replace("@STALLED_FOR@", "2h");
    let rules: Value = serde_saphyr::from_str(&rules_text)?;
    for group in rules["groups"].as_array().context("groups")? {
        for rule in group["rules"].as_array().context("rules")? {
            exprs.push(rule["expr"].as_str().context("rule expr")?.to_string());
            for text in rule["annotations"]
                .as_object()
                .into_iter()
                .flat_map(|a| a.values())
            {
                printed.extend(template_labels(
                    text.as_str().unwrap_or_default(),
                    "$labels.",
                ));
            }
        }
    }
    Ok((exprs, printed))
}

fn template_labels(text: &str, open: &str) -> Vec<String> {
    text.split(open)
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// Metric names and label names one PromQL expression uses: label names are those of `{...}`
/// matchers and of `by/on/without/ignoring (...)` lists; metric names are the remaining
/// identifiers that name an exported family (`nodewright_*`, `process_*`).
pub fn names(expr: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut metrics = BTreeSet::new();
    let mut labels = BTreeSet::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut last_word = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            continue;
        }
        if c == '{'
            || (c == '(' && ["by", "on", "without", "ignoring"].contains(&last_word.as_str()))
        {
            let close = if c == '{' { '}' } else { ')' };
            let start = i + 1;
            let mut depth_quote = false;
            i += 1;
            while i < chars.len() && (depth_quote || chars[i] != close) {
                if chars[i] == '"' {
                    depth_quote = !depth_quote;
                }
                i += 1;
            }
            let inner: String = chars[start..i.min(chars.len())].iter().collect();
            for part in inner.split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    labels.insert(name);
                }
            }
            i += 1;
            last_word.clear();
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if word.starts_with("nodewright_") || word.starts_with("process_") {
                metrics.insert(word.clone());
            }
            last_word = word;
            continue;
        }
        if !c.is_whitespace() {
            last_word.clear();
        }
        i += 1;
    }
    (metrics, labels)
}

/// GET `url` (plain `http://host:port/path`) and return the body.
pub(crate) fn scrape(url: &str) -> Result<String> {
    let rest = url.strip_prefix("http://").context("http URL")?;
    let (host, path) = rest.split_once('/').context("URL path")?;
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").context("HTTP response")?;
    ensure!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    Ok(body.to_string())
}

/// Sample names and label names per sample name of a classic text exposition.
fn exported(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut samples = BTreeSet::new();
    let mut labels = BTreeSet::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        samples.insert(line[..end].to_string());
        if line[end..].starts_with('{') {
            let close = line.rfind('}').map_or(line.len(), |i| i + 1);
            labels.extend(names(&line[end..close]).1);
        }
    }
    (samples, labels)
}

#[test]
fn promql_names_are_found() {
    let (m, l) = names(
        r#"histogram_quantile(0.95, sum by (le) (rate(nodewright_operator_pass_duration_seconds_bucket[5m]))) and on (nodewright_name) nodewright_status{status=~"a|b", nodewright_name="x"}"#,
    );
    assert_eq!(
        m,
        [
            "nodewright_operator_pass_duration_seconds_bucket",
            "nodewright_status"
        ]
        .map(String::from)
        .into()
    );
    assert_eq!(
        l,
        ["le", "nodewright_name", "status"].map(String::from).into()
    );
}

/// Every metric name and label used by chart/files/monitoring/{dashboard.json,alerts.yaml} is
/// exported by the operator under test while a NodeWright with a compartment rolls out.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn monitoring_dashboard_and_alerts_use_exported_metrics() -> Result<()> {
    let c = Case::new("mon", 1).await?;
    let r = async {
        let spec = json!({
            "interruptionBudget": { "count": 1 },
            "packages": { "e2e-hold-mon": pkg("1.0.0", json!({})) },
        });
        c.create(c.nodewright("mon", spec)).await?;
        c.wait_status("mon", "in_progress", Duration::from_secs(60))
            .await?;
        let url = std::env::var("NODEWRIGHT_E2E_METRICS_URL")
            .context("NODEWRIGHT_E2E_METRICS_URL unset")?;
        let (samples, exported_labels) = exported(&scrape(&url)?);
        let (exprs, printed) = expressions()?;
        let mut missing = Vec::new();
        let mut used_labels = printed;
        for e in &exprs {
            let (metrics, labels) = names(e);
            missing.extend(
                metrics
                    .into_iter()
                    .filter(|m| !samples.contains(m))
                    .map(|m| format!("metric {m} (in {e})")),
            );
            used_labels.extend(labels);
        }
        missing.extend(
            used_labels
                .iter()
                .filter(|l| !TARGET_LABELS.contains(&l.as_str()) && !exported_labels.contains(*l))
                .map(|l| format!("label {l}")),
        );
        eprintln!(
            "[e2e] {} expressions checked, {} exported sample names",
            exprs.len(),
            samples.len()
        );
        if !missing.is_empty() {
            bail!("not exported by the operator: {missing:#?}");
        }
        Ok(())
    }
    .await;
    c.finish(r).await
}
