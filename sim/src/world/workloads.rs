//! Workload pods, their ReplicaSet-style replacement, PodDisruptionBudget status and the
//! eviction subresource.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{World, is_terminal, phase, set_pod_condition};
use crate::objects::key;
use crate::selector::matches;
use crate::store::{ApiError, Propagation};
use crate::time::SimTime;

/// Result of an eviction request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictOutcome {
    /// The pod is terminating.
    Evicted,
    /// The pod was already terminating.
    AlreadyTerminating,
}

fn owner_kind(pod: &Pod) -> Option<String> {
    pod.metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|r| r.controller == Some(true)))
        .map(|o| o.kind.clone())
}

fn pdb_counts(pdb: &PodDisruptionBudget, pods: &[&Pod]) -> PodDisruptionBudgetStatus {
    let spec = pdb.spec.clone().unwrap_or_default();
    let ns = pdb.metadata.namespace.as_deref();
    let selected: Vec<&&Pod> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == ns && !is_terminal(p))
        .filter(|p| matches(spec.selector.as_ref(), p.metadata.labels.as_ref()))
        .collect();
    let expected = selected.len() as i32;
    let healthy = selected
        .iter()
        .filter(|p| phase(p) == "Running" && p.metadata.deletion_timestamp.is_none())
        .count() as i32;
    let int = |v: &IntOrString, of: i32| match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => {
            let pct: i32 = s.trim_end_matches('%').parse().unwrap_or(0);
            (pct * of + 99) / 100
        }
    };
    let desired = if let Some(min) = &spec.min_available {
        int(min, expected)
    } else if let Some(max) = &spec.max_unavailable {
        expected - int(max, expected)
    } else {
        expected
    };
    PodDisruptionBudgetStatus {
        current_healthy: Some(healthy),
        desired_healthy: Some(desired),
        disruptions_allowed: Some((healthy - desired).max(0)),
        expected_pods: Some(expected),
        observed_generation: pdb.metadata.generation,
        ..Default::default()
    }
}

impl World {
    pub(super) fn pdb_step(&mut self) {
        let pods: Vec<&Pod> = self.store.objects.pods.values().collect();
        let updates: Vec<PodDisruptionBudget> = self
            .store
            .objects
            .pdbs
            .values()
            .filter_map(|pdb| {
                let status = pdb_counts(pdb, &pods);
                (pdb.status.as_ref() != Some(&status)).then(|| {
                    let mut p = pdb.clone();
                    p.status = Some(status);
                    p
                })
            })
            .collect();
        for pdb in updates {
            let _ = self.store.update(pdb, None);
        }
    }

    pub(super) fn workloads_step(&mut self, now: SimTime) {
        let due: Vec<(SimTime, Pod)> = std::mem::take(&mut self.pending_replacements);
        for (at, pod) in due {
            if at > now {
                self.pending_replacements.push((at, pod));
                continue;
            }
            if let Some(node) = self.schedulable_node(&pod) {
                let mut fresh = pod.clone();
                fresh.spec.get_or_insert_with(Default::default).node_name = Some(node);
                fresh.status = Some(k8s_openapi::api::core::v1::PodStatus {
                    phase: Some("Running".into()),
                    ..Default::default()
                });
                let _ = self.store.create(fresh);
            } else {
                self.pending_replacements.push((now + 5_000, pod));
            }
        }
    }

    fn schedulable_node(&self, pod: &Pod) -> Option<String> {
        let avoid = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("sim/evicted-from").cloned());
        self.store
            .objects
            .nodes
            .values()
            .filter(|n: &&Node| {
                !n.spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
            })
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_none_or(|t| t.iter().all(|t| t.effect == "PreferNoSchedule"))
            })
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .filter(|n| self.node_up(n) && Some(n) != avoid.as_ref())
            .min_by_key(|n| {
                self.store
                    .objects
                    .pods
                    .values()
                    .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()) == Some(n))
                    .count()
            })
    }

    /// The eviction subresource (or a plain delete with `delete_instead`), honouring PDBs.
    pub fn evict(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        delete_instead: bool,
    ) -> Result<EvictOutcome, ApiError> {
        let pod = self
            .store
            .objects
            .pods
            .get(&key(Some(namespace), name))
            .cloned()
            .ok_or(ApiError::NotFound)?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(ApiError::UidMismatch);
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Ok(EvictOutcome::AlreadyTerminating);
        }
        let now = self.store.now;
        if !delete_instead {
            let pods: Vec<&Pod> = self.store.objects.pods.values().collect();
            let blocked = self.store.objects.pdbs.values().any(|pdb| {
                pdb.metadata.namespace.as_deref() == Some(namespace)
                    && matches(
                        pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
                        pod.metadata.labels.as_ref(),
                    )
                    && pdb_counts(pdb, &pods).disruptions_allowed.unwrap_or(0) <= 0
            });
            if blocked {
                return Err(ApiError::TooManyRequests);
            }
            let mut marked = pod.clone();
            set_pod_condition(
                &mut marked,
                "DisruptionTarget",
                "EvictionByEvictionAPI",
                now,
            );
            let _ = self.store.update(marked, None);
        }
        self.store.delete::<Pod>(
            Some(namespace),
            name,
            Some(uid),
            Propagation::Background,
            true,
        )?;
        if owner_kind(&pod).as_deref() == Some("ReplicaSet") {
            let mut replacement = pod.clone();
            let base = name.rsplit_once("-r").map_or(name, |(b, _)| b).to_string();
            let n = self.replacement_counter();
            replacement.metadata = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(format!("{base}-r{n}")),
                namespace: pod.metadata.namespace.clone(),
                labels: pod.metadata.labels.clone(),
                owner_references: pod.metadata.owner_references.clone(),
                annotations: Some(
                    [(
                        "sim/evicted-from".to_string(),
                        pod.spec
                            .as_ref()
                            .and_then(|s| s.node_name.clone())
                            .unwrap_or_default(),
                    )]
                    .into(),
                ),
                ..Default::default()
            };
            if let Some(spec) = replacement.spec.as_mut() {
                spec.node_name = None;
            }
            self.pending_replacements
                .push((now + self.settings.replace_after, replacement));
        }
        Ok(EvictOutcome::Evicted)
    }

    fn replacement_counter(&mut self) -> u64 {
        self.store.resource_version
    }
}
