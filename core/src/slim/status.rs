//! The status of a compact Job record: counts and the conditions the core reads, their texts
//! shared (every `Complete` condition of a rollout says the same thing).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use super::Interner;

/// What the core reads of a Job's `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimJobStatus {
    /// `status.active`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<i32>,
    /// `status.failed`: failed attempts so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    /// `status.succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    /// `status.conditions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<SlimJobCondition>>,
}

/// A Job condition as the core reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimJobCondition {
    /// `Complete`, `Failed`, `FailureTarget`, ...
    #[serde(rename = "type")]
    pub type_: Arc<str>,
    /// `True`, `False` or `Unknown`.
    pub status: Arc<str>,
    /// Machine-readable reason (`BackoffLimitExceeded`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Arc<str>>,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl SlimJobStatus {
    /// The counts and conditions of `status`, condition texts shared through `interner`.
    pub fn new(status: JobStatus, interner: &mut Interner) -> Self {
        SlimJobStatus {
            active: status.active,
            failed: status.failed,
            succeeded: status.succeeded,
            conditions: status.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| SlimJobCondition::new(c, interner))
                    .collect()
            }),
        }
    }

    /// The condition of type `kind` with status `True`, if any.
    pub fn condition_true(&self, kind: &str) -> Option<&SlimJobCondition> {
        self.conditions
            .as_ref()?
            .iter()
            .find(|c| &*c.type_ == kind && &*c.status == "True")
    }
}

impl SlimJobCondition {
    /// `condition` with its texts shared through `interner`.
    pub fn new(c: JobCondition, interner: &mut Interner) -> Self {
        SlimJobCondition {
            type_: interner.intern(&c.type_),
            status: interner.intern(&c.status),
            reason: c.reason.map(|r| interner.intern(&r)),
            message: c.message.map(|m| interner.intern(&m)),
            last_transition_time: c.last_transition_time,
        }
    }
}

impl From<&SlimJobStatus> for JobStatus {
    /// The typed status with what the record keeps.
    fn from(s: &SlimJobStatus) -> Self {
        JobStatus {
            active: s.active,
            failed: s.failed,
            succeeded: s.succeeded,
            conditions: s.conditions.as_ref().map(|cs| {
                cs.iter()
                    .map(|c| JobCondition {
                        type_: c.type_.to_string(),
                        status: c.status.to_string(),
                        reason: c.reason.as_deref().map(str::to_string),
                        message: c.message.as_deref().map(str::to_string),
                        last_transition_time: c.last_transition_time.clone(),
                        last_probe_time: None,
                    })
                    .collect()
            }),
            ..JobStatus::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_share_their_texts_and_convert_back() {
        let status = JobStatus {
            succeeded: Some(1),
            conditions: Some(vec![JobCondition {
                type_: "Complete".into(),
                status: "True".into(),
                reason: Some("CompletionsReached".into()),
                message: Some("Reached expected number of succeeded pods".into()),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        };
        let mut interner = Interner::default();
        let a = SlimJobStatus::new(status.clone(), &mut interner);
        let b = SlimJobStatus::new(status.clone(), &mut interner);
        let (ca, cb) = (
            &a.conditions.as_ref().unwrap()[0],
            &b.conditions.as_ref().unwrap()[0],
        );
        assert!(Arc::ptr_eq(
            ca.message.as_ref().unwrap(),
            cb.message.as_ref().unwrap()
        ));
        assert_eq!(a.condition_true("Complete"), Some(ca));
        assert_eq!(a.condition_true("Failed"), None);
        assert_eq!(JobStatus::from(&a), status);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json, serde_json::to_value(&status).unwrap());
        assert_eq!(serde_json::from_value::<SlimJobStatus>(json).unwrap(), a);
    }
}
