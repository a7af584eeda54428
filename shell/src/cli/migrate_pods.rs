//! `migrate`, executor part: the Go operator's bare executor pods. A pod still running is waited
//! for; a finished one has its outcome recorded in the node-state document exactly as our own
//! Job outcomes are (core `jobs::entry_changes`), so its stage neither re-runs nor runs twice.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use nodewright_core::jobs::{Outcome, OutcomeKind, entry_changes};
use nodewright_crds::{NodeState, NodeWright, Stage};
use serde::Deserialize;

/// Label the Go operator puts on every executor pod: the owning Skyhook's name.
pub const LEGACY_NAME_LABEL: &str = "skyhook.nvidia.com/name";
const LEGACY_PACKAGE: &str = "skyhook.nvidia.com/package";
const LEGACY_INTERRUPT: &str = "skyhook.nvidia.com/interrupt";

/// Where a legacy executor pod is, judged like the Go operator judges it: by its init
/// containers (the last one's state; any failed one fails the pod; `CrashLoopBackOff` is failed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodOutcome {
    /// Still working (or not started): wait for it.
    Running,
    /// Every step exited 0.
    Succeeded {
        /// Container restarts.
        restarts: i32,
    },
    /// A step failed.
    Failed {
        /// Container restarts.
        restarts: i32,
    },
}

/// The package annotation the Go operator writes on its executor pods.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
struct PackageAnnotation {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    skyhook: String,
    #[serde(default)]
    stage: String,
    #[serde(default)]
    image: String,
    #[serde(default, rename = "containerSHA")]
    container_sha: String,
}

/// One executor pod of the Go operator.
#[derive(Clone, Debug, PartialEq)]
pub struct LegacyPod {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Node it runs on.
    pub node: String,
    /// Owning Skyhook.
    pub skyhook: String,
    /// Package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// Stage it runs, when readable.
    pub stage: Option<Stage>,
    /// Package image recorded on the pod.
    pub image: String,
    /// Digest recorded on the pod.
    pub container_sha: String,
    /// An interrupt executor.
    pub interrupt: bool,
    /// Deleted already: the Go operator recorded its success before deleting it.
    pub deleting: bool,
    /// Where it is.
    pub outcome: PodOutcome,
}

impl LegacyPod {
    /// `name (node n, package p:v, stage s)` for the printed plan.
    pub fn describe(&self) -> String {
        format!(
            "{}/{} (node {}, package {}:{}, stage {})",
            self.namespace,
            self.name,
            self.node,
            self.package,
            self.version,
            self.stage.map(Stage::as_str).unwrap_or("?")
        )
    }
}

fn container_state(s: &ContainerStatus) -> Option<PodOutcome> {
    let state = s.state.as_ref()?;
    if let Some(t) = &state.terminated {
        return Some(if t.exit_code == 0 {
            PodOutcome::Succeeded {
                restarts: s.restart_count,
            }
        } else {
            PodOutcome::Failed {
                restarts: s.restart_count,
            }
        });
    }
    if state
        .waiting
        .as_ref()
        .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
    {
        return Some(PodOutcome::Failed {
            restarts: s.restart_count,
        });
    }
    Some(PodOutcome::Running)
}

/// The outcome of a pod by its init-container statuses (the Go operator's rule).
pub fn outcome(pod: &Pod) -> PodOutcome {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref());
    let mut last = PodOutcome::Running;
    for s in statuses.into_iter().flatten() {
        last = container_state(s).unwrap_or(PodOutcome::Running);
        if matches!(last, PodOutcome::Failed { .. }) {
            return last;
        }
    }
    last
}

/// Reads a pod as a Go-operator executor; `None` when it is not one (no `skyhook.nvidia.com/name`
/// label) or its package annotation cannot be read (reported by the caller as unreadable).
pub fn classify(pod: &Pod) -> Option<LegacyPod> {
    let labels = pod.metadata.labels.as_ref()?;
    let skyhook = labels.get(LEGACY_NAME_LABEL)?.clone();
    let text = pod.metadata.annotations.as_ref()?.get(LEGACY_PACKAGE)?;
    let p: PackageAnnotation = serde_json::from_str(text).ok()?;
    Some(LegacyPod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        node: pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        skyhook: if p.skyhook.is_empty() {
            skyhook
        } else {
            p.skyhook
        },
        package: p.name,
        version: p.version,
        stage: Stage::parse(&p.stage),
        image: p.image,
        container_sha: p.container_sha,
        interrupt: labels.get(LEGACY_INTERRUPT).map(String::as_str) == Some("True"),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        outcome: outcome(pod),
    })
}

/// True when the pod still needs waiting for (running, not being deleted).
pub fn must_wait(p: &LegacyPod) -> bool {
    !p.deleting && p.outcome == PodOutcome::Running
}

/// Records a finished pod's outcome in `doc` (the node-state document of its Skyhook on its node)
/// the way our Job outcomes are recorded; returns a line per change (empty: nothing to record,
/// e.g. the Go operator already recorded it). `nw` is the converted object.
pub fn adopt(doc: &mut NodeState, pod: &LegacyPod, nw: &NodeWright) -> Vec<String> {
    let kind = match pod.outcome {
        PodOutcome::Running => return Vec::new(),
        _ if pod.deleting => return Vec::new(),
        PodOutcome::Succeeded { restarts } if pod.interrupt => {
            OutcomeKind::InterruptCompleted { attempts: restarts }
        }
        PodOutcome::Succeeded { restarts } => OutcomeKind::Completed { attempts: restarts },
        PodOutcome::Failed { restarts } => OutcomeKind::AttemptFailed {
            restarts: Some(restarts),
            evidence: nodewright_core::jobs::Evidence {
                pod: pod.name.clone(),
                container: String::new(),
                reason: "LegacyExecutorFailed".into(),
                message: String::new(),
            },
        },
    };
    let o = Outcome {
        nodewright: pod.skyhook.clone(),
        node: pod.node.clone(),
        package: pod.package.clone(),
        version: pod.version.clone(),
        stage: pod.stage,
        job: pod.name.clone(),
        kind,
        image: pod.image.clone(),
        container_sha: pod.container_sha.clone(),
        after_state: Vec::new(),
    };
    let mut lines = Vec::new();
    for c in entry_changes(&o, Some(nw), doc) {
        if doc.0.get(&c.key) != c.expect.as_ref() {
            continue;
        }
        match c.set {
            Some(entry) => {
                lines.push(format!(
                    "{}: {} {} (outcome of legacy pod {})",
                    c.key,
                    entry.stage.as_str(),
                    entry.state.map(|s| s.as_str()).unwrap_or(""),
                    pod.name
                ));
                doc.0.insert(c.key, entry);
            }
            None => {
                lines.push(format!("{}: removed (legacy pod {})", c.key, pod.name));
                doc.0.remove(&c.key);
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
        PodSpec, PodStatus,
    };
    use kube::api::ObjectMeta;
    use nodewright_crds::{NodeWrightSpec, Package, PackageStatus, State};

    fn status(name: &str, state: ContainerState, restarts: i32) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(state),
            restart_count: restarts,
            ..ContainerStatus::default()
        }
    }

    fn done(code: i32) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }
    }

    fn running() -> ContainerState {
        ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..ContainerState::default()
        }
    }

    fn pod(stage: &str, init: Vec<ContainerStatus>) -> Pod {
        let annotation = format!(
            r#"{{"name":"a","version":"1.0","skyhook":"demo","stage":"{stage}","image":"img"}}"#
        );
        Pod {
            metadata: ObjectMeta {
                name: Some("demo-a-1-0-apply-n1-12345678".into()),
                namespace: Some("skyhook".into()),
                labels: Some(
                    [
                        (LEGACY_NAME_LABEL.to_string(), "demo".to_string()),
                        (LEGACY_PACKAGE.to_string(), "a-1.0".to_string()),
                    ]
                    .into(),
                ),
                annotations: Some([(LEGACY_PACKAGE.to_string(), annotation)].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                init_container_statuses: Some(init),
                ..PodStatus::default()
            }),
        }
    }

    fn nw() -> NodeWright {
        let mut spec = NodeWrightSpec::default();
        spec.packages.insert(
            "a".into(),
            Package {
                name: "a".into(),
                version: "1.0".into(),
                image: "img".into(),
                ..Package::default()
            },
        );
        NodeWright::new("demo", spec)
    }

    fn doc(stage: Stage, state: State) -> NodeState {
        let mut d = NodeState::default();
        d.upsert(PackageStatus {
            name: "a".into(),
            version: "1.0".into(),
            image: "img".into(),
            container_sha: String::new(),
            stage,
            state: Some(state),
            restarts: 0,
        });
        d
    }

    #[test]
    fn m1_migrate_judges_legacy_pods_like_the_go_operator() {
        let p = |init| classify(&pod("apply", init)).map(|p| p.outcome);
        assert_eq!(
            p(vec![
                status("a-init", done(0), 0),
                status("a-apply", running(), 0)
            ]),
            Some(PodOutcome::Running)
        );
        assert_eq!(
            p(vec![
                status("a-init", done(0), 0),
                status("a-apply", done(0), 2)
            ]),
            Some(PodOutcome::Succeeded { restarts: 2 })
        );
        assert_eq!(
            p(vec![
                status("a-init", done(3), 1),
                status("a-apply", running(), 0)
            ]),
            Some(PodOutcome::Failed { restarts: 1 })
        );
        let crash = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                ..ContainerStateWaiting::default()
            }),
            ..ContainerState::default()
        };
        assert_eq!(
            p(vec![status("a-apply", crash, 4)]),
            Some(PodOutcome::Failed { restarts: 4 })
        );
        assert_eq!(p(vec![]), Some(PodOutcome::Running));
        let mut foreign = pod("apply", vec![]);
        foreign.metadata.labels = None;
        assert_eq!(classify(&foreign), None);
    }

    #[test]
    fn m1_migrate_adopts_a_finished_legacy_stage_once() {
        let p = classify(&pod(
            "apply",
            vec![status("a-init", done(0), 0), status("a-apply", done(0), 0)],
        ))
        .expect("legacy pod");
        let mut d = doc(Stage::Apply, State::InProgress);
        let lines = adopt(&mut d, &p, &nw());
        assert_eq!(lines.len(), 1, "{lines:?}");
        let e = d.get("a", "1.0").expect("entry");
        assert_eq!((e.stage, e.state), (Stage::Apply, Some(State::Complete)));
        // Adopting again (a second run) changes nothing.
        assert!(adopt(&mut d, &p, &nw()).is_empty());
    }

    #[test]
    fn m1_migrate_adopts_a_failed_legacy_stage_as_erroring() {
        let p = classify(&pod("config", vec![status("a-config", done(1), 3)])).expect("pod");
        let mut d = doc(Stage::Config, State::InProgress);
        adopt(&mut d, &p, &nw());
        let e = d.get("a", "1.0").expect("entry");
        assert_eq!((e.state, e.restarts), (Some(State::Erroring), 3));
    }

    #[test]
    fn m1_migrate_does_not_adopt_a_pod_being_deleted() {
        let mut raw = pod("apply", vec![status("a-apply", done(0), 0)]);
        raw.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let p = classify(&raw).expect("pod");
        assert!(!must_wait(&p));
        let mut d = doc(Stage::Apply, State::InProgress);
        assert!(adopt(&mut d, &p, &nw()).is_empty());
    }
}
