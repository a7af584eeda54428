//! Shared plumbing of the end-to-end suite: a kube client from `KUBECONFIG`, one [`Case`] per
//! test (its own kwok Nodes, label and NodeWright names), polling waits and failure diagnostics.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use nodewright_crds::keys;
use nodewright_crds::node_state::NodeState;
use serde_json::{Value, json};

/// Label every e2e Node carries; its value is the owning test case's id.
pub const CASE_LABEL: &str = "e2e.nodewright.test/case";

/// The operator namespace (Jobs, pods, ConfigMaps), `NAMESPACE` of the operator under test.
pub fn namespace() -> String {
    std::env::var("NODEWRIGHT_E2E_NAMESPACE").unwrap_or_else(|_| "nodewright".into())
}

/// An integer operator option the driver passed through (e.g. `JOB_BACKOFF_LIMIT`), or `default`.
pub fn operator_int(name: &str, default: i64) -> i64 {
    std::env::var(format!("NODEWRIGHT_E2E_{name}"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The NodeWright kind as a dynamic resource (cluster-scoped).
pub fn nodewright_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("nodewright.nvidia.com", "v1alpha1", "NodeWright");
    ApiResource::from_gvk_with_plural(&gvk, "nodewrights")
}

/// The DeploymentPolicy kind as a dynamic resource (cluster-scoped).
pub fn policy_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("nodewright.nvidia.com", "v1alpha1", "DeploymentPolicy");
    ApiResource::from_gvk_with_plural(&gvk, "deploymentpolicies")
}

/// A client for the cluster in `KUBECONFIG` (the driver sets it).
pub async fn client() -> Result<Client> {
    Client::try_default()
        .await
        .context("kube client from KUBECONFIG (run tests/e2e/run.sh)")
}

/// Polls `probe` every 500 ms until it yields `Some`, failing after `timeout` with the last
/// observation `probe` reported through its `Err` or `None`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let start = Instant::now();
    let mut last = String::from("no observation yet");
    loop {
        match probe().await {
            Ok(Some(v)) => {
                eprintln!("[e2e] {what}: after {:.1}s", start.elapsed().as_secs_f64());
                return Ok(v);
            }
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if start.elapsed() >= timeout {
            bail!("timed out after {timeout:?} waiting for {what} (last: {last})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Asserts `probe` holds at every poll for `period` (a negative wait: "nothing happens").
pub async fn hold_for<F, Fut>(what: &str, period: Duration, mut probe: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let start = Instant::now();
    while start.elapsed() < period {
        if !probe().await? {
            bail!(
                "{what} stopped holding after {:.1}s",
                start.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// A fresh random id (kernel UUID), used for boot ids.
pub fn uuid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("{:x}", Instant::now().elapsed().as_nanos()))
}

/// One test's private world: `nodes` kwok Nodes labelled `CASE_LABEL=<id>` and NodeWrights named
/// `<id>` or `<id>-<suffix>`, cleaned before use and after success.
pub struct Case {
    /// Short id, unique per test (e.g. `a01`); prefix of every object name of the case.
    pub id: String,
    /// The case's kwok Node names.
    pub nodes: Vec<String>,
    /// Client for the e2e cluster.
    pub client: Client,
    /// The operator namespace.
    pub ns: String,
    /// When the case started, for the replay window of its test.
    pub started: jiff::Timestamp,
}

impl Case {
    /// Cleans leftovers of an earlier run of case `id`, then creates `n` Ready kwok Nodes.
    pub async fn new(id: &str, n: usize) -> Result<Self> {
        let client = client().await?;
        let case = Case {
            id: id.to_string(),
            nodes: (0..n).map(|i| format!("e2e-{id}-{i}")).collect(),
            client,
            ns: namespace(),
            started: jiff::Timestamp::now(),
        };
        case.cleanup().await?;
        for node in &case.nodes {
            case.create_node(node).await?;
        }
        for node in &case.nodes {
            case.wait_node_ready(node).await?;
        }
        Ok(case)
    }

    /// The NodeWright API.
    pub fn nodewrights(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &nodewright_resource())
    }

    /// The Node API.
    pub fn node_api(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// The Job API in the operator namespace.
    pub fn job_api(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The Pod API in the operator namespace.
    pub fn pod_api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// A NodeWright manifest named `name` selecting this case's nodes, with `spec` merged in.
    pub fn nodewright(&self, name: &str, spec: Value) -> Value {
        let mut s = json!({ "nodeSelectors": { "matchLabels": { CASE_LABEL: self.id } } });
        merge(&mut s, spec);
        json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1",
            "kind": "NodeWright",
            "metadata": { "name": name },
            "spec": s,
        })
    }

    /// Creates a NodeWright from a manifest.
    pub async fn create(&self, manifest: Value) -> Result<DynamicObject> {
        let obj: DynamicObject = serde_json::from_value(manifest)?;
        let name = obj.name_any();
        self.nodewrights()
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("create NodeWright {name}"))
    }

    /// Merge-patches NodeWright `name` (spec, metadata.annotations, ...).
    pub async fn patch(&self, name: &str, patch: Value) -> Result<()> {
        self.nodewrights()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patch NodeWright {name} with {patch}"))?;
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) an annotation on NodeWright `name`.
    pub async fn annotate(&self, name: &str, key: &str, value: Option<&str>) -> Result<()> {
        self.patch(
            name,
            json!({ "metadata": { "annotations": { key: value } } }),
        )
        .await
    }

    /// The NodeWright `name`, if it exists.
    pub async fn get(&self, name: &str) -> Result<Option<DynamicObject>> {
        Ok(self.nodewrights().get_opt(name).await?)
    }

    /// `status.status` of NodeWright `name` (`""` when unset or absent).
    pub async fn status(&self, name: &str) -> Result<String> {
        let obj = self.get(name).await?;
        Ok(obj
            .and_then(|o| o.data["status"]["status"].as_str().map(String::from))
            .unwrap_or_default())
    }

    /// Waits until NodeWright `name` reads `status.status == want`.
    pub async fn wait_status(&self, name: &str, want: &str, timeout: Duration) -> Result<()> {
        wait_for(
            &format!("NodeWright {name} status {want}"),
            timeout,
            || async {
                let got = self.status(name).await?;
                if got == want {
                    Ok(Some(()))
                } else {
                    Err(anyhow!("status is {got:?}"))
                }
            },
        )
        .await
    }

    /// Condition `ty` of NodeWright `name` as (status, reason).
    pub async fn condition(&self, name: &str, ty: &str) -> Result<Option<(String, String)>> {
        let Some(obj) = self.get(name).await? else {
            return Ok(None);
        };
        let conds = obj.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(conds.iter().find(|c| c["type"] == ty).map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        }))
    }

    /// The Node `name`.
    pub async fn node(&self, name: &str) -> Result<Node> {
        Ok(self.node_api().get(name).await?)
    }

    /// The node-state document of NodeWright `nw` on node `node` (empty when absent).
    pub async fn node_state(&self, node: &str, nw: &str) -> Result<NodeState> {
        let n = self.node(node).await?;
        let key = keys::node_state(nw);
        match n.annotations().get(&key) {
            Some(text) => NodeState::parse(text).map_err(|e| anyhow!("{key}: {e:?}")),
            None => Ok(NodeState::default()),
        }
    }

    /// `(stage, state)` of package `pkg` in the node-state of `nw` on `node`, as spelled in JSON.
    pub async fn entry(&self, node: &str, nw: &str, pkg: &str) -> Result<Option<(String, String)>> {
        let state = self.node_state(node, nw).await?;
        let Some(e) = state.entries_of(pkg).next() else {
            return Ok(None);
        };
        let v = serde_json::to_value(e)?;
        Ok(Some((
            v["stage"].as_str().unwrap_or_default().to_string(),
            v["state"].as_str().unwrap_or_default().to_string(),
        )))
    }

    /// Jobs of NodeWright `nw` (label `<P>/name`), sorted by creation.
    pub async fn jobs(&self, nw: &str) -> Result<Vec<Job>> {
        let lp = ListParams::default().labels(&format!("{}={nw}", keys::LABEL_NAME));
        let mut jobs = self.job_api().list(&lp).await?.items;
        jobs.sort_by_key(|j| {
            (
                j.metadata.creation_timestamp.clone().map(|t| t.0),
                j.name_any(),
            )
        });
        Ok(jobs)
    }

    /// Creates kwok Node `name` labelled for this case (like tests/cluster/nodes.sh).
    pub async fn create_node(&self, name: &str) -> Result<()> {
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    "nodewright.test/fake": "true",
                    CASE_LABEL: self.id,
                },
            },
            "spec": {},
            "status": { "nodeInfo": {
                "bootID": uuid(), "machineID": uuid().replace('-', ""), "systemUUID": uuid(),
                "architecture": "amd64", "operatingSystem": "linux", "osImage": "kwok fake node",
            } },
        }))?;
        self.node_api()
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("create node {name}"))?;
        Ok(())
    }

    /// Waits until `name` is Ready, has no not-ready taint and carries a boot id.
    pub async fn wait_node_ready(&self, name: &str) -> Result<()> {
        wait_for(
            &format!("node {name} Ready"),
            Duration::from_secs(60),
            || async {
                let n = self.node(name).await?;
                let boot = n
                    .status
                    .as_ref()
                    .and_then(|s| s.node_info.as_ref())
                    .map(|i| i.boot_id.clone());
                if boot.as_deref().unwrap_or_default().is_empty() {
                    self.set_boot_id(name, &uuid()).await?;
                    return Ok(None);
                }
                Ok(node_ready(&n).then_some(()))
            },
        )
        .await
    }

    /// Patches `status.nodeInfo.bootID` of `name` (emulates a reboot when changed).
    pub async fn set_boot_id(&self, name: &str, boot: &str) -> Result<()> {
        let patch = json!({ "status": { "nodeInfo": { "bootID": boot } } });
        self.node_api()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Deletes the case's NodeWrights (finalizers removed after a grace period), Jobs and Nodes.
    pub async fn cleanup(&self) -> Result<()> {
        let nws = self.nodewrights().list(&ListParams::default()).await?.items;
        let mine: Vec<String> = nws
            .iter()
            .map(|o| o.name_any())
            .filter(|n| n == &self.id || n.starts_with(&format!("{}-", self.id)))
            .collect();
        for name in &mine {
            let _ = self
                .nodewrights()
                .delete(name, &DeleteParams::default())
                .await;
        }
        for name in &mine {
            let gone = wait_for(
                &format!("NodeWright {name} deleted"),
                Duration::from_secs(20),
                || async { Ok(self.get(name).await?.is_none().then_some(())) },
            )
            .await;
            if gone.is_err() {
                let p = json!({ "metadata": { "finalizers": null } });
                let _ = self
                    .nodewrights()
                    .patch(name, &PatchParams::default(), &Patch::Merge(&p))
                    .await;
            }
            let lp = ListParams::default().labels(&format!("{}={name}", keys::LABEL_NAME));
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            };
            let _ = self.job_api().delete_collection(&dp, &lp).await;
        }
        let lp = ListParams::default().labels(&format!("{CASE_LABEL}={}", self.id));
        let mut names: Vec<String> = self
            .node_api()
            .list(&lp)
            .await?
            .items
            .iter()
            .map(|n| n.name_any())
            .collect();
        names.extend(self.nodes.iter().cloned()); // also nodes a test unlabelled
        names.sort();
        names.dedup();
        for n in names {
            let _ = self.node_api().delete(&n, &DeleteParams::default()).await;
        }
        Ok(())
    }

    /// Ends the test: cleans up after success; after a failure prints diagnostics and keeps the
    /// objects for inspection.
    pub async fn finish(self, outcome: Result<()>) -> Result<()> {
        self.record_window();
        match outcome {
            Ok(()) => {
                self.cleanup().await?;
                Ok(())
            }
            Err(e) => {
                eprintln!(
                    "[e2e] case {} FAILED: {e:#}\n{}",
                    self.id,
                    self.diagnostics().await
                );
                Err(e)
            }
        }
    }

    /// Appends `<test> <start> <end>` to `NODEWRIGHT_E2E_WINDOWS`, so the driver's trace replay can
    /// report the passes and effects of this test.
    fn record_window(&self) {
        let Some(path) = std::env::var_os("NODEWRIGHT_E2E_WINDOWS") else {
            return;
        };
        let thread = std::thread::current();
        let name = thread
            .name()
            .unwrap_or(&self.id)
            .replace(char::is_whitespace, "_");
        let line = format!("{name} {} {}\n", self.started, jiff::Timestamp::now());
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Err(e) = written {
            eprintln!("[e2e] cannot record the replay window in {path:?}: {e}");
        }
    }

    /// A text dump of the case's NodeWrights, Jobs and nodes, for failure reports.
    pub async fn diagnostics(&self) -> String {
        let mut out = String::new();
        if let Ok(list) = self.nodewrights().list(&ListParams::default()).await {
            for o in list
                .items
                .iter()
                .filter(|o| o.name_any().starts_with(&self.id))
            {
                let status = serde_json::to_string(&o.data["status"]).unwrap_or_default();
                let ann = serde_json::to_string(&o.metadata.annotations).unwrap_or_default();
                out += &format!(
                    "NodeWright {} finalizers={:?} deleting={} annotations={ann}\n  status={status}\n",
                    o.name_any(),
                    o.metadata.finalizers,
                    o.metadata.deletion_timestamp.is_some()
                );
                for j in self.jobs(&o.name_any()).await.unwrap_or_default() {
                    out += &format!("  {}\n", job_line(&j));
                }
            }
        }
        for n in &self.nodes {
            match self.node(n).await {
                Ok(node) => {
                    let ann: BTreeMap<_, _> = node
                        .annotations()
                        .iter()
                        .filter(|(k, _)| k.starts_with(keys::PREFIX))
                        .collect();
                    let spec = node.spec.clone().unwrap_or_default();
                    out += &format!(
                        "Node {n} unschedulable={:?} taints={:?}\n  annotations={ann:?}\n",
                        spec.unschedulable,
                        spec.taints
                            .unwrap_or_default()
                            .iter()
                            .map(|t| &t.key)
                            .collect::<Vec<_>>()
                    );
                }
                Err(e) => out += &format!("Node {n}: {e}\n"),
            }
        }
        out
    }
}

/// One line describing a Job: name, stage/package/node labels, counters, conditions, TTL.
pub fn job_line(j: &Job) -> String {
    let l = j.labels();
    let st = j.status.clone().unwrap_or_default();
    let conds: Vec<String> = st
        .conditions
        .unwrap_or_default()
        .iter()
        .filter(|c| c.status == "True")
        .map(|c| format!("{}/{}", c.type_, c.reason.clone().unwrap_or_default()))
        .collect();
    format!(
        "Job {} pkg={} stage={} node={} active={} succeeded={} failed={} conds={conds:?} ttl={:?} suspend={:?}",
        j.name_any(),
        l.get(keys::PACKAGE).map(String::as_str).unwrap_or("-"),
        l.get(keys::LABEL_STAGE).map(String::as_str).unwrap_or("-"),
        l.get(keys::LABEL_NODE).map(String::as_str).unwrap_or("-"),
        st.active.unwrap_or(0),
        st.succeeded.unwrap_or(0),
        st.failed.unwrap_or(0),
        j.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished),
        j.spec.as_ref().and_then(|s| s.suspend),
    )
}

/// The Job's terminal condition type (`Complete` or `Failed`), if any is True.
pub fn job_finished(j: &Job) -> Option<String> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.clone())
}

/// Label `key` of a Job (`""` when absent).
pub fn job_label(j: &Job, key: &str) -> String {
    j.labels().get(key).cloned().unwrap_or_default()
}

/// Node Ready=True and no `node.kubernetes.io/not-ready` taint.
pub fn node_ready(n: &Node) -> bool {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/not-ready"));
    ready && !tainted
}

/// Whether the node is cordoned (`spec.unschedulable`).
pub fn cordoned(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Deep-merges `patch` into `base` (objects merge, everything else replaces).
pub fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}
