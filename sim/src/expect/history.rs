//! What happened over a whole run, for expectations that count: Job creations (distinct uids,
//! so a Job recreated under the same name counts twice), distinct Job names, and attempts
//! (distinct pod uids of those Jobs, so a pod replaced while its Job is foreground-deleted still
//! counts).

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::EventSpec;
use serde::{Deserialize, Serialize};

use super::{JobMatch, Report};
use crate::facts::{JobFacts, job_facts};
use crate::objects::Objects;

/// Every Job and executor pod seen during a run, by uid.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Job uid → (name, facts).
    jobs: BTreeMap<String, (String, JobFacts)>,
    /// Pod uid → owning Job uid.
    pods: BTreeMap<String, String>,
    /// Events the operator emitted, in order.
    pub events: Vec<EventSpec>,
    /// Replicas that became leader, in order (with leader election).
    pub leaders: Vec<String>,
    /// Log lines the operator wrote, in order (when the scenario expects log lines).
    pub logs: Vec<crate::logs::LogLine>,
}

impl History {
    /// Records the Jobs and Job-owned pods of `objects` (called after every step).
    pub fn observe(&mut self, objects: &Objects) {
        for job in objects.jobs.values() {
            let Some(uid) = job.metadata.uid.as_ref() else {
                continue;
            };
            if self.jobs.contains_key(uid) {
                continue;
            }
            if let Some(f) = job_facts(job) {
                let name = job.metadata.name.clone().unwrap_or_default();
                self.jobs.insert(uid.clone(), (name, f));
            }
        }
        for pod in objects.pods.values() {
            let Some(uid) = pod.metadata.uid.as_ref() else {
                continue;
            };
            let owner = pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Job");
            if let Some(o) = owner {
                self.pods
                    .entry(uid.clone())
                    .or_insert_with(|| o.uid.clone());
            }
        }
    }

    /// Records the log lines written since the last call (`written` only grows).
    pub fn observe_logs(&mut self, written: &[crate::logs::LogLine]) {
        if let Some(new) = written.get(self.logs.len()..) {
            self.logs.extend_from_slice(new);
        }
    }

    /// Records the Events emitted since the last call (`emitted` only grows).
    pub fn observe_events(&mut self, emitted: &[EventSpec]) {
        if let Some(new) = emitted.get(self.events.len()..) {
            self.events.extend_from_slice(new);
        }
    }

    /// (Job uids, distinct names, pod uids) of the Jobs `m` selects.
    fn count(&self, m: &JobMatch) -> (usize, usize, usize) {
        let uids: BTreeSet<&String> = self
            .jobs
            .iter()
            .filter(|(_, (_, f))| m.matches(f))
            .map(|(uid, _)| uid)
            .collect();
        let names: BTreeSet<&String> = uids.iter().map(|u| &self.jobs[*u].0).collect();
        let pods = self.pods.values().filter(|j| uids.contains(j)).count();
        (uids.len(), names.len(), pods)
    }
}

/// Counts over the whole run of the Jobs a [`JobMatch`] selects; unset counts are not checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryExpect {
    /// Which Jobs.
    #[serde(flatten)]
    pub select: JobMatch,
    /// Exactly this many Jobs were created (distinct uids).
    #[serde(default)]
    pub created: Option<usize>,
    /// Exactly this many distinct Job names were used.
    #[serde(default)]
    pub names: Option<usize>,
    /// Exactly this many pods (attempts) ran for them.
    #[serde(default)]
    pub attempts: Option<usize>,
    /// At most this many Jobs were created.
    #[serde(default)]
    pub created_at_most: Option<usize>,
}

impl HistoryExpect {
    /// Checks the counts against `history`.
    pub fn check(&self, history: &History, report: &mut Report) {
        let (created, names, attempts) = history.count(&self.select);
        let what = self.select.describe();
        let mut exact = |label: &str, want: Option<usize>, have: usize| {
            if want.is_some_and(|w| w != have) {
                report.fail(format!(
                    "{have} {label} over the run for Jobs matching {what}, want {}",
                    want.unwrap_or_default()
                ));
            }
        };
        exact("Jobs created", self.created, created);
        exact("Job names", self.names, names);
        exact("attempts", self.attempts, attempts);
        if let Some(max) = self.created_at_most
            && created > max
        {
            report.fail(format!(
                "{created} Jobs created over the run for Jobs matching {what}, want at most {max}"
            ));
        }
    }
}
