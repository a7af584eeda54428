//! The Job controller: pods per attempt, failure counting under `Never` and `OnFailure`,
//! `podFailurePolicy` Ignore on DisruptionTarget, `podReplacementPolicy: Failed`, backoff,
//! Job-level deadlines, suspend (pods deleted, startTime reset), FailureTarget and terminal
//! conditions, and `ttlSecondsAfterFinished`.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{JOB_TRACKING, World, has_condition, is_terminal};
use crate::objects::key_of;
use crate::store::Propagation;
use crate::time::{SimTime, from_k8s_time, k8s_time};

/// Job controller bookkeeping of one Job.
#[derive(Clone, Debug, Default)]
pub(crate) struct JobRun {
    pods_created: u32,
    backoff_until: SimTime,
    /// When the controller must look at the Job again.
    pub wake: Option<SimTime>,
}

/// True when the Job carries a True condition of this type.
pub fn job_condition(job: &Job, kind: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// True when the Job is Complete or Failed.
pub fn job_finished(job: &Job) -> bool {
    job_condition(job, "Complete") || job_condition(job, "Failed")
}

fn set_condition(job: &mut Job, kind: &str, status: bool, reason: &str, at: SimTime) {
    let st = job.status.get_or_insert_with(Default::default);
    let conditions = st.conditions.get_or_insert_with(Vec::new);
    let text = if status { "True" } else { "False" };
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == kind) {
        if c.status != text || c.reason.as_deref() != Some(reason) {
            c.status = text.into();
            c.reason = Some(reason.into());
            c.last_transition_time = Some(k8s_time(at));
        }
        return;
    }
    conditions.push(JobCondition {
        type_: kind.into(),
        status: text.into(),
        reason: Some(reason.into()),
        last_transition_time: Some(k8s_time(at)),
        last_probe_time: Some(k8s_time(at)),
        ..Default::default()
    });
}

fn finished_at(job: &Job) -> Option<SimTime> {
    let st = job.status.as_ref()?;
    if let Some(t) = &st.completion_time {
        return Some(from_k8s_time(t));
    }
    st.conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Failed" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(from_k8s_time)
}

fn ignores_disruption(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
        .is_some_and(|p| {
            p.rules.iter().any(|r| {
                r.action == "Ignore"
                    && r.on_pod_conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "DisruptionTarget")
            })
        })
}

fn restart_total(pod: &Pod) -> i32 {
    pod.status.as_ref().map_or(0, |s| {
        s.init_container_statuses
            .iter()
            .flatten()
            .chain(s.container_statuses.iter().flatten())
            .map(|c| c.restart_count)
            .sum()
    })
}

impl World {
    pub(super) fn job_controller_step(&mut self, now: SimTime) {
        let dirty = self.dirty_jobs(now);
        let mut owned: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        for pod in self.store.objects.pods.values() {
            for o in pod.metadata.owner_references.iter().flatten() {
                if o.kind == "Job" {
                    owned.entry(o.uid.as_str()).or_default().push(pod);
                }
            }
        }
        let mut work: Vec<(Job, Vec<Pod>)> = Vec::new();
        for (key, job) in &self.store.objects.jobs {
            if !dirty.contains(key) {
                continue;
            }
            let uid = job.metadata.uid.as_deref().unwrap_or_default();
            let pods = owned.get(uid).cloned().unwrap_or_default();
            if job_finished(job) && job.metadata.deletion_timestamp.is_none() {
                let settled = pods.iter().all(|p| {
                    is_terminal(p)
                        && !p
                            .metadata
                            .finalizers
                            .iter()
                            .flatten()
                            .any(|f| f == JOB_TRACKING)
                });
                let expiry = job
                    .spec
                    .as_ref()
                    .and_then(|s| s.ttl_seconds_after_finished)
                    .zip(finished_at(job))
                    .map(|(ttl, done)| done + (ttl.max(0) as u64) * 1000);
                if settled && expiry.is_none_or(|e| e > now) {
                    if let Some(run) = self.job_ctl.get_mut(key) {
                        run.wake = expiry;
                    }
                    continue;
                }
            }
            work.push((job.clone(), pods.into_iter().cloned().collect()));
        }
        for (job, pods) in work {
            self.sync_job(job, pods, now);
        }
        let jobs = &self.store.objects.jobs;
        self.job_ctl.retain(|k, _| jobs.contains_key(k));
    }

    /// Jobs to sync: touched (themselves or their pods) since the last sync, due, or new.
    fn dirty_jobs(&mut self, now: SimTime) -> std::collections::BTreeSet<String> {
        let mut dirty = std::collections::BTreeSet::new();
        let log = &self.store.log;
        let uid_to_key: BTreeMap<&str, &String> = self
            .store
            .objects
            .jobs
            .iter()
            .filter_map(|(k, j)| j.metadata.uid.as_deref().map(|u| (u, k)))
            .collect();
        for event in &log[self.jobctl_cursor.min(log.len())..] {
            let meta = event.object.meta();
            match event.object.kind() {
                crate::objects::Kind::Job => {
                    dirty.insert(key_of(meta));
                }
                crate::objects::Kind::Pod => {
                    for o in meta.owner_references.iter().flatten() {
                        if let Some(k) = uid_to_key.get(o.uid.as_str()) {
                            dirty.insert((*k).clone());
                        }
                    }
                }
                _ => {}
            }
        }
        self.jobctl_cursor = log.len();
        for (key, run) in &self.job_ctl {
            if run.wake.is_some_and(|w| w <= now) {
                dirty.insert(key.clone());
            }
        }
        for key in self.store.objects.jobs.keys() {
            if !self.job_ctl.contains_key(key) {
                dirty.insert(key.clone());
            }
        }
        dirty
    }

    fn sync_job(&mut self, mut job: Job, pods: Vec<Pod>, now: SimTime) {
        let key = key_of(&job.metadata);
        let before = job.clone();
        let suspended = job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false);
        let mut run = self.job_ctl.remove(&key).unwrap_or_default();
        run.wake = None;
        let mut live: Vec<Pod> = Vec::new();
        for pod in pods {
            if is_terminal(&pod) {
                self.count_pod(&mut job, &pod, suspended, &mut run, now);
            } else {
                live.push(pod);
            }
        }
        let finished = job_finished(&job);
        if job.metadata.deletion_timestamp.is_none() && !finished {
            self.drive_job(&mut job, &live, suspended, &mut run, now);
        }
        if finished
            && let (Some(ttl), Some(done)) = (
                job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished),
                finished_at(&job),
            )
        {
            let expiry = done + (ttl.max(0) as u64) * 1000;
            if now >= expiry {
                let ns = job.metadata.namespace.clone();
                let name = job.metadata.name.clone().unwrap_or_default();
                let _ = self.store.delete::<Job>(
                    ns.as_deref(),
                    &name,
                    None,
                    Propagation::Foreground,
                    false,
                );
                return;
            }
            run.wake = Some(expiry);
        }
        let st = job.status.get_or_insert_with(Default::default);
        st.active = Some(
            live.iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count() as i32,
        )
        .filter(|n| *n > 0);
        st.terminating = Some(
            live.iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .count() as i32,
        )
        .filter(|n| *n > 0);
        if job != before {
            let _ = self.store.update(job, None);
        }
        self.job_ctl.insert(key, run);
    }

    fn count_pod(
        &mut self,
        job: &mut Job,
        pod: &Pod,
        suspended: bool,
        run: &mut JobRun,
        now: SimTime,
    ) {
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let tracked = pod
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == JOB_TRACKING));
        if !self.counted.contains(&pod_uid) {
            self.counted.insert(pod_uid);
            let ignore = ignores_disruption(job);
            let st = job.status.get_or_insert_with(Default::default);
            if super::phase(pod) == "Succeeded" {
                st.succeeded = Some(st.succeeded.unwrap_or(0) + 1);
            } else if has_condition(pod, "DisruptionTarget") && ignore {
                // podFailurePolicy Ignore: no budget spent, replaced at once.
            } else if suspended && pod.metadata.deletion_timestamp.is_some() {
                // Killed by suspension: not a failure.
            } else {
                let failed = st.failed.unwrap_or(0) + 1;
                st.failed = Some(failed);
                let backoff = (10_000u64 << (failed.clamp(1, 7) - 1)).min(360_000);
                run.backoff_until = now + backoff;
            }
        }
        if tracked {
            let ns = pod.metadata.namespace.clone();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let _ = self.store.modify::<Pod>(ns.as_deref(), &name, |p| {
                if let Some(f) = p.metadata.finalizers.as_mut() {
                    f.retain(|x| x != JOB_TRACKING);
                }
            });
        }
    }

    fn drive_job(
        &mut self,
        job: &mut Job,
        live: &[Pod],
        suspended: bool,
        run: &mut JobRun,
        now: SimTime,
    ) {
        let spec = job.spec.clone().unwrap_or_default();
        let st = job.status.clone().unwrap_or_default();
        if st.succeeded.unwrap_or(0) >= spec.completions.unwrap_or(1) {
            set_condition(job, "SuccessCriteriaMet", true, "CompletionsReached", now);
            set_condition(job, "Complete", true, "CompletionsReached", now);
            if let Some(s) = job.status.as_mut() {
                s.completion_time = Some(k8s_time(now));
            }
            return;
        }
        let on_failure = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            == Some("OnFailure");
        let restarts: i32 = if on_failure {
            live.iter().map(restart_total).sum()
        } else {
            0
        };
        let failures = st.failed.unwrap_or(0) + restarts;
        let started = st.start_time.as_ref().map(from_k8s_time);
        let deadline = spec
            .active_deadline_seconds
            .zip(started)
            .map(|(d, s)| s + (d.max(0) as u64) * 1000);
        let existing_target = st
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "FailureTarget" && c.status == "True")
            .and_then(|c| c.reason.clone());
        let reason = if existing_target.is_some() {
            existing_target
        } else if failures > spec.backoff_limit.unwrap_or(6) {
            Some("BackoffLimitExceeded".to_string())
        } else if !suspended && deadline.is_some_and(|d| now >= d) {
            Some("DeadlineExceeded".to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            set_condition(job, "FailureTarget", true, &reason, now);
            self.delete_pods(live);
            if live.is_empty() {
                set_condition(job, "Failed", true, &reason, now);
            }
            return;
        }
        if suspended {
            self.delete_pods(live);
            set_condition(job, "Suspended", true, "JobSuspended", now);
            if let Some(s) = job.status.as_mut() {
                s.start_time = None;
            }
            return;
        }
        if job_condition(job, "Suspended") {
            set_condition(job, "Suspended", false, "JobResumed", now);
        }
        if job
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_none()
        {
            job.status.get_or_insert_with(Default::default).start_time = Some(k8s_time(now));
        }
        if let Some(d) = deadline.filter(|d| *d > now) {
            run.wake = Some(d);
        }
        if live.is_empty() {
            if now >= run.backoff_until {
                self.create_job_pod(job, run);
            } else {
                run.wake = Some(
                    run.wake
                        .map_or(run.backoff_until, |w| w.min(run.backoff_until)),
                );
            }
        }
    }

    fn delete_pods(&mut self, pods: &[Pod]) {
        for pod in pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            let ns = pod.metadata.namespace.clone();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let _ =
                self.store
                    .delete::<Pod>(ns.as_deref(), &name, None, Propagation::Background, true);
        }
    }

    fn create_job_pod(&mut self, job: &Job, run: &mut JobRun) {
        run.pods_created += 1;
        let name = job.metadata.name.clone().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let template = job.spec.clone().unwrap_or_default().template;
        let mut meta = template.metadata.unwrap_or_default();
        let labels = meta.labels.get_or_insert_with(Default::default);
        labels.insert("batch.kubernetes.io/controller-uid".into(), uid.clone());
        labels.insert("batch.kubernetes.io/job-name".into(), name.clone());
        labels.insert("controller-uid".into(), uid.clone());
        labels.insert("job-name".into(), name.clone());
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(format!("{name}-p{:04}", run.pods_created)),
                namespace: job.metadata.namespace.clone(),
                labels: meta.labels,
                annotations: meta.annotations,
                finalizers: Some(vec![JOB_TRACKING.into()]),
                owner_references: Some(vec![OwnerReference {
                    api_version: "batch/v1".into(),
                    kind: "Job".into(),
                    name,
                    uid,
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: template.spec,
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            }),
        };
        let _ = self.store.create(pod);
    }

    /// TTL expiries of finished Jobs.
    pub(super) fn ttl_wakeups(&self) -> Vec<SimTime> {
        let mut out: Vec<SimTime> = self
            .store
            .objects
            .pods
            .values()
            .filter(|p| !is_terminal(p))
            .filter_map(World::pod_deadline)
            .collect();
        out.extend(self.store.objects.jobs.values().filter_map(|job| {
            let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
            Some(finished_at(job)? + (ttl.max(0) as u64) * 1000)
        }));
        out
    }
}
