//! `package logs`: the logs of a package's executor pods (06-operations.md §1.9), selected by
//! NodeWright, package, node and stage; one stream per pod step, with a header naming node, pod,
//! step and its state.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, ListParams};
use nodewright_crds::{NodeWright, Stage, keys};
use serde_json::Value;

use super::connect::parse_request_timeout;
use super::patterns::NodePatterns;
use super::{Global, client};

/// Every stage name `--stage` accepts.
const STAGES: [Stage; 7] = [
    Stage::Apply,
    Stage::Config,
    Stage::Interrupt,
    Stage::PostInterrupt,
    Stage::Upgrade,
    Stage::Uninstall,
    Stage::UninstallInterrupt,
];

/// `package logs` arguments.
#[derive(Args, Debug)]
pub struct LogsArgs {
    /// Package name.
    pub package: String,
    /// NodeWright name.
    #[arg(long, alias = "skyhook")]
    pub nodewright: String,
    /// Node names or regular expressions (repeatable; default: every node).
    #[arg(long = "node")]
    pub nodes: Vec<String>,
    /// Only pods of this stage (apply, config, interrupt, post-interrupt, upgrade, uninstall,
    /// uninstall-interrupt).
    #[arg(long)]
    pub stage: Option<String>,
    /// Only pods of this package version (default: every version).
    #[arg(long = "package-version")]
    pub package_version: Option<String>,
    /// Only this container (default: the stage's steps, without the copy step and `done`).
    #[arg(short = 'c', long, conflicts_with = "all_containers")]
    pub container: Option<String>,
    /// Every container of the pods, including the copy step and `done`.
    #[arg(long)]
    pub all_containers: bool,
    /// Keep streaming new lines; steps that have not started yet are waited for.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Lines from the end of each step's log to show (-1: all).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub tail: i64,
    /// The previous (restarted) run of each step.
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// Prefix every line with its timestamp.
    #[arg(long)]
    pub timestamps: bool,
    /// Only lines newer than this (e.g. 30s, 5m, 1h).
    #[arg(long, value_parser = parse_request_timeout)]
    pub since: Option<Duration>,
    /// Refuse to follow more streams than this at once.
    #[arg(long, default_value_t = 10)]
    pub max_log_requests: usize,
}

/// The pods and steps `package logs` selected, oldest pod first.
#[derive(Debug)]
pub struct Selection {
    /// `(pod, step names)` in output order.
    pub streams: Vec<(Pod, Vec<String>)>,
}

impl Selection {
    /// Number of (pod, step) streams.
    pub fn len(&self) -> usize {
        self.streams.iter().map(|(_, c)| c.len()).sum()
    }

    /// True when nothing was selected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Validates `--stage`.
pub fn parse_stage(s: &str) -> Result<Stage> {
    match Stage::parse(s) {
        Some(st) if STAGES.contains(&st) => Ok(st),
        _ => bail!(
            "invalid stage {s:?}: must be one of {}",
            STAGES.map(Stage::as_str).join(", ")
        ),
    }
}

/// `(name, version)` of the package a pod runs: the pod's package annotation, else its
/// `<name>-<version>` package label split against the known package name.
pub fn pod_package(pod: &Pod, package: &str) -> Option<(String, String)> {
    let meta = &pod.metadata;
    let from_annotation = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PACKAGE))
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|v| Some((v["name"].as_str()?.into(), v["version"].as_str()?.into())));
    from_annotation.or_else(|| {
        let label = meta.labels.as_ref()?.get(keys::PACKAGE)?;
        let version = label.strip_prefix(package)?.strip_prefix('-')?;
        Some((package.to_string(), version.to_string()))
    })
}

/// True when the pod runs `package` (and `version`, when given).
fn runs_package(pod: &Pod, package: &str, version: Option<&str>) -> bool {
    pod_package(pod, package)
        .is_some_and(|(n, v)| n == package && version.is_none_or(|want| want == v))
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// The steps of `pod` to show: `only` if the pod has it; every container with `all`; else the
/// init containers except the copy step (`<pkg>-init`), or the main containers without `done`
/// when there are no init containers.
pub fn steps(pod: &Pod, only: Option<&str>, all: bool) -> Vec<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let init: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    let main: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    let every = init.iter().chain(main.iter()).copied();
    let picked: Vec<&str> = match only {
        Some(name) => every.filter(|c| *c == name).collect(),
        None if all => every.collect(),
        None if init.is_empty() => main.into_iter().filter(|c| *c != "done").collect(),
        None => init.into_iter().filter(|c| !c.ends_with("-init")).collect(),
    };
    picked.into_iter().map(str::to_string).collect()
}

/// Keeps the pods of the package on matching nodes, oldest first, with their steps.
pub fn select(pods: Vec<Pod>, a: &LogsArgs, nodes: &NodePatterns) -> Selection {
    let mut kept: Vec<Pod> = pods
        .into_iter()
        .filter(|p| runs_package(p, &a.package, a.package_version.as_deref()))
        .filter(|p| nodes.is_empty() || nodes.matches(node_of(p)))
        .collect();
    kept.sort_by(|x, y| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.clone(),
                p.metadata.name.clone(),
            )
        };
        key(x).cmp(&key(y))
    });
    let streams = kept
        .into_iter()
        .map(|p| {
            let s = steps(&p, a.container.as_deref(), a.all_containers);
            (p, s)
        })
        .filter(|(_, s)| !s.is_empty())
        .collect();
    Selection { streams }
}

/// The status of step `name` of `pod`.
pub fn step_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let st = pod.status.as_ref()?;
    st.init_container_statuses
        .iter()
        .flatten()
        .chain(st.container_statuses.iter().flatten())
        .find(|c| c.name == name)
}

/// Why a step has no log yet (`None` once it has started).
pub fn not_started(pod: &Pod, name: &str) -> Option<String> {
    let Some(cs) = step_status(pod, name) else {
        return Some("no status yet".into());
    };
    let waiting = cs.state.as_ref()?.waiting.as_ref()?;
    if cs
        .last_state
        .as_ref()
        .is_some_and(|s| s.terminated.is_some())
    {
        return None;
    }
    Some(match (&waiting.reason, &waiting.message) {
        (Some(r), Some(m)) => format!("{r}: {m}"),
        (Some(r), None) => r.clone(),
        _ => "waiting".into(),
    })
}

/// The state word of a step's header: `Running`, `Completed`, `Exit N`, `<waiting reason>`.
pub fn state_word(pod: &Pod, name: &str) -> String {
    let Some(state) = step_status(pod, name).and_then(|c| c.state.as_ref()) else {
        return "no status".into();
    };
    if state.running.is_some() {
        "Running".into()
    } else if let Some(t) = &state.terminated {
        if t.exit_code == 0 {
            "Completed".into()
        } else {
            format!("Exit {}", t.exit_code)
        }
    } else {
        state
            .waiting
            .as_ref()
            .and_then(|w| w.reason.clone())
            .unwrap_or_else(|| "Waiting".into())
    }
}

/// The header printed above one step's log.
pub fn header(pod: &Pod, step: &str) -> String {
    let label = |k: &str| {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(k))
            .map_or("?", String::as_str)
    };
    format!(
        "==> node {} pod {} step {} [{}] (stage {}) <==",
        node_of(pod),
        pod.metadata.name.as_deref().unwrap_or(""),
        step,
        state_word(pod, step),
        label(keys::LABEL_STAGE),
    )
}

/// What was searched, for the "nothing found" error.
fn searched(a: &LogsArgs, ns: &str, total: usize) -> String {
    let mut s = format!(
        "searched {total} pod(s) labelled {}={} in namespace {ns:?} for package {:?}",
        keys::LABEL_NAME,
        a.nodewright,
        a.package
    );
    if let Some(st) = &a.stage {
        s += &format!(" with {}={st}", keys::LABEL_STAGE);
    }
    if let Some(v) = &a.package_version {
        s += &format!(" version {v:?}");
    }
    if !a.nodes.is_empty() {
        s += &format!(" on nodes matching {:?}", a.nodes);
    }
    if let Some(c) = &a.container {
        s += &format!(" with a container {c:?}");
    }
    s
}

/// Runs `package logs`.
pub async fn run(g: &Global, a: LogsArgs) -> Result<()> {
    let stage = a.stage.as_deref().map(parse_stage).transpose()?;
    let nodes = NodePatterns::new(&a.nodes)?;
    let c = client(g).await?;
    let nw = Api::<NodeWright>::all(c.clone())
        .get_opt(&a.nodewright)
        .await
        .with_context(|| format!("reading NodeWright {:?}", a.nodewright))?;
    let Some(nw) = nw else {
        bail!("NodeWright {:?} not found", a.nodewright);
    };
    let mut selector = format!("{}={}", keys::LABEL_NAME, a.nodewright);
    if let Some(st) = stage {
        selector += &format!(",{}={st}", keys::LABEL_STAGE);
    }
    let pods = Api::<Pod>::namespaced(c.clone(), &g.namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .with_context(|| format!("listing pods in namespace {:?}", g.namespace))?
        .items;
    let total = pods.len();
    let selection = select(pods, &a, &nodes);
    if selection.is_empty() {
        let known: Vec<&str> = nw.spec.packages.keys().map(String::as_str).collect();
        if !known.contains(&a.package.as_str()) {
            bail!(
                "package {:?} is not in NodeWright {:?} (packages: {}) and no pod runs it ({})",
                a.package,
                a.nodewright,
                known.join(", "),
                searched(&a, &g.namespace, total)
            );
        }
        bail!(
            "no executor pods found: {}; pods of finished Jobs are removed after the Job's ttlSecondsAfterFinished",
            searched(&a, &g.namespace, total)
        );
    }
    if a.follow {
        super::package_logs_stream::follow(g, &a, selection).await
    } else {
        super::package_logs_stream::print_all(&c, &g.namespace, &a, selection).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    fn pod(name: &str, node: &str, package: Value, labels: Value, created: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created,
                "annotations": {keys::PACKAGE: package.to_string()}, "labels": labels},
            "spec": {"nodeName": node,
                "initContainers": [{"name": "tune-init"}, {"name": "tune-apply"}, {"name": "tune-applycheck"}],
                "containers": [{"name": "done"}]},
            "status": {"initContainerStatuses": [
                {"name": "tune-init", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0}}},
                {"name": "tune-apply", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 3}}},
                {"name": "tune-applycheck", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "PodInitializing"}}}]}
        }))
        .unwrap_or_default()
    }

    fn args(extra: &[&str]) -> LogsArgs {
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: LogsArgs,
        }
        let mut argv = vec!["t", "tune", "--nodewright", "nw"];
        argv.extend(extra);
        T::parse_from(argv).a
    }

    #[test]
    fn selects_the_package_on_matching_nodes_oldest_first() {
        let tune = json!({"name": "tune", "version": "1.0"});
        let pods = vec![
            pod(
                "b",
                "gpu-1",
                tune.clone(),
                json!({}),
                "2026-01-01T00:00:02Z",
            ),
            pod(
                "a",
                "gpu-0",
                tune.clone(),
                json!({}),
                "2026-01-01T00:00:01Z",
            ),
            pod(
                "c",
                "gpu-0",
                json!({"name": "tune-x", "version": "1.0"}),
                json!({}),
                "2026-01-01T00:00:00Z",
            ),
            pod("d", "cpu-0", tune, json!({}), "2026-01-01T00:00:00Z"),
        ];
        let a = args(&["--node", "gpu-.*"]);
        let nodes = NodePatterns::new(&a.nodes).unwrap_or_else(|e| panic!("{e}"));
        let sel = select(pods, &a, &nodes);
        let names: Vec<_> = sel
            .streams
            .iter()
            .map(|(p, s)| (p.metadata.name.clone().unwrap_or_default(), s.clone()))
            .collect();
        let steps = vec!["tune-apply".to_string(), "tune-applycheck".to_string()];
        assert_eq!(
            names,
            vec![("a".into(), steps.clone()), ("b".into(), steps)]
        );
        assert_eq!(sel.len(), 4);
    }

    #[test]
    fn the_label_is_the_fallback_and_versions_filter() {
        let mut p = pod(
            "a",
            "n",
            json!({}),
            json!({keys::PACKAGE: "tune-2.1"}),
            "2026-01-01T00:00:00Z",
        );
        if let Some(a) = p.metadata.annotations.as_mut() {
            a.clear();
        }
        assert_eq!(pod_package(&p, "tune"), Some(("tune".into(), "2.1".into())));
        assert!(runs_package(&p, "tune", Some("2.1")));
        assert!(!runs_package(&p, "tune", Some("2.0")));
        assert!(!runs_package(&p, "tun", None));
    }

    #[test]
    fn steps_headers_and_states() {
        let p = pod(
            "a",
            "gpu-0",
            json!({"name": "tune", "version": "1"}),
            json!({keys::LABEL_STAGE: "apply"}),
            "2026-01-01T00:00:00Z",
        );
        assert_eq!(steps(&p, Some("done"), false), vec!["done".to_string()]);
        assert!(steps(&p, Some("nope"), false).is_empty());
        assert_eq!(steps(&p, None, true).len(), 4);
        assert_eq!(
            header(&p, "tune-apply"),
            "==> node gpu-0 pod a step tune-apply [Exit 3] (stage apply) <=="
        );
        assert_eq!(state_word(&p, "tune-init"), "Completed");
        assert_eq!(not_started(&p, "tune-apply"), None);
        assert_eq!(
            not_started(&p, "tune-applycheck"),
            Some("PodInitializing".into())
        );
        assert_eq!(not_started(&p, "done"), Some("no status yet".into()));
    }

    #[test]
    fn stages_are_checked() {
        assert!(parse_stage("post-interrupt").is_ok());
        let e = parse_stage("install").map_err(|e| e.to_string());
        assert_eq!(
            e.err().as_deref(),
            Some(
                "invalid stage \"install\": must be one of apply, config, interrupt, post-interrupt, upgrade, uninstall, uninstall-interrupt"
            )
        );
    }
}
