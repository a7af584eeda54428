//! Preconditions an interpreter re-checks against a fresh (uncached) read right before a write,
//! because the snapshot the core decided on may lag (02-lifecycle.md B6).

use k8s_openapi::api::batch::v1::Job;
use nodewright_crds::keys;
use serde::{Deserialize, Serialize};

use super::Effect;

/// A condition that must hold on a fresh read for the effect to be applied; when it does not,
/// the effect is dropped and the next pass decides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum FreshReadPrecondition {
    /// B6: an interrupt Job is created only while no other unfinished Job runs on its node.
    NoUnfinishedJobsOn {
        /// The node the interrupt Job is for.
        node: String,
    },
}

impl Effect {
    /// The precondition the interpreter must check on a fresh read before applying this effect
    /// (carried by the effect; the core sets it on interrupt Job creates, B6).
    pub fn fresh_read_precondition(&self) -> Option<&FreshReadPrecondition> {
        match self {
            Effect::CreateJob { precondition, .. } => precondition.as_ref(),
            _ => None,
        }
    }
}

impl FreshReadPrecondition {
    /// The label selector of the fresh list the precondition is checked against.
    pub fn label_selector(&self) -> String {
        match self {
            Self::NoUnfinishedJobsOn { node } => format!("{}={node}", keys::LABEL_NODE),
        }
    }

    /// True when `job` is one the fresh list selects (the in-memory form of
    /// [`Self::label_selector`]).
    pub fn selects(&self, job: &Job) -> bool {
        match self {
            Self::NoUnfinishedJobsOn { node } => {
                job.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(keys::LABEL_NODE))
                    == Some(node)
            }
        }
    }

    /// The first Job of the fresh list (already selected) that blocks creating `creating`: an
    /// unfinished Job other than itself.
    pub fn blocker<'a>(
        &self,
        creating: &Job,
        selected: impl IntoIterator<Item = &'a Job>,
    ) -> Option<&'a Job> {
        match self {
            Self::NoUnfinishedJobsOn { .. } => selected.into_iter().find(|other| {
                other.metadata.name != creating.metadata.name && !complete_or_failed(other)
            }),
        }
    }

    /// Why the effect is dropped when `blocker` blocks it.
    pub fn refusal(&self, blocker: &Job) -> String {
        match self {
            Self::NoUnfinishedJobsOn { node } => format!(
                "node {node} still runs unfinished job {} (fresh read; interrupt waits, B6)",
                blocker.metadata.name.as_deref().unwrap_or_default()
            ),
        }
    }
}

/// True when the Job has a `Complete` or `Failed` condition with status `True`.
fn complete_or_failed(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
    use nodewright_crds::keys;

    use super::FreshReadPrecondition;
    use crate::effect::{Context, Effect};

    fn job(name: &str, labels: &[(&str, &str)], condition: Option<(&str, &str)>) -> Job {
        let mut job = Job::default();
        job.metadata.name = Some(name.into());
        job.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        job.status = condition.map(|(type_, status)| JobStatus {
            conditions: Some(vec![JobCondition {
                type_: type_.into(),
                status: status.into(),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        });
        job
    }

    /// The effects the core plans for creating `job` on an empty cluster.
    fn create(job: Job) -> Effect {
        let snapshot = crate::Snapshot::default();
        let options = crate::Options::default();
        let index = crate::jobs::ExecutorIndex::build(&snapshot, &options);
        match crate::jobs::plan_create(&index, job, None) {
            crate::jobs::CreateDecision::Create(mut effects) => effects.remove(0),
            other => panic!("expected a create, got {other:?}"),
        }
    }

    fn interrupt(name: &str) -> Job {
        job(
            name,
            &[(keys::LABEL_INTERRUPT, "True"), (keys::LABEL_NODE, "n1")],
            None,
        )
    }

    fn on_n1() -> FreshReadPrecondition {
        FreshReadPrecondition::NoUnfinishedJobsOn { node: "n1".into() }
    }

    #[test]
    fn b6_interrupt_create_carries_the_fresh_read_precondition() {
        let effect = create(interrupt("int"));
        assert_eq!(effect.fresh_read_precondition(), Some(&on_n1()));
        assert_eq!(on_n1().label_selector(), format!("{}=n1", keys::LABEL_NODE));
        let json = serde_json::to_value(&effect).unwrap_or_default();
        assert_eq!(
            json["precondition"],
            serde_json::json!({"kind": "noUnfinishedJobsOn", "node": "n1"}),
            "the precondition travels with the effect (traces, replay)"
        );
    }

    #[test]
    fn b6_non_interrupt_create_and_other_effects_carry_none() {
        let apply = job("apply", &[(keys::LABEL_NODE, "n1")], None);
        assert_eq!(create(apply).fresh_read_precondition(), None);
        let finalizer = Effect::AddFinalizer {
            nodewright: "demo".into(),
            uid: "u".into(),
        };
        assert_eq!(finalizer.fresh_read_precondition(), None);
        let bare = Effect::CreateJob {
            job: (interrupt("int")).into(),
            context: Context::default(),
            precondition: None,
            confirm: None,
        };
        assert_eq!(
            bare.fresh_read_precondition(),
            None,
            "read from the effect, not inferred from labels"
        );
    }

    #[test]
    fn b6_interrupt_create_blocked_by_an_unfinished_job_on_the_node() {
        let busy = job("other-apply", &[(keys::LABEL_NODE, "n1")], None);
        let pre = on_n1();
        let found = pre.blocker(&interrupt("int"), [&busy]);
        assert_eq!(found, Some(&busy));
        assert_eq!(
            pre.refusal(&busy),
            "node n1 still runs unfinished job other-apply (fresh read; interrupt waits, B6)"
        );
    }

    #[test]
    fn b6_interrupt_create_not_blocked_by_finished_jobs_or_itself() {
        let done = job("done", &[], Some(("Complete", "True")));
        let failed = job("failed", &[], Some(("Failed", "True")));
        let itself = interrupt("int");
        let pre = on_n1();
        assert_eq!(
            pre.blocker(&interrupt("int"), [&done, &failed, &itself]),
            None
        );
        let not_yet = job("running", &[], Some(("Complete", "False")));
        assert_eq!(pre.blocker(&interrupt("int"), [&not_yet]), Some(&not_yet));
    }

    #[test]
    fn b6_selects_jobs_by_their_node_label() {
        let pre = on_n1();
        assert!(pre.selects(&job("a", &[(keys::LABEL_NODE, "n1")], None)));
        assert!(!pre.selects(&job("b", &[(keys::LABEL_NODE, "n2")], None)));
        assert!(!pre.selects(&job("c", &[], None)));
    }
}
