//! Kubelets: admission, sequential init containers with scripted durations and exit codes,
//! image pull failures, per-pod deadlines, in-place restarts, graceful termination.

use base64::Engine;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Pod,
};

use super::{World, is_terminal, pod_identity};
use crate::objects::key_of;
use crate::time::{SimTime, from_k8s_time, k8s_time};

/// Kubelet bookkeeping of one pod.
#[derive(Clone, Debug, Default)]
pub(crate) struct PodRun {
    /// Index of the current container (init containers first).
    pub container: usize,
    /// Script attempt the pod runs.
    pub attempt: usize,
    /// When something happens next.
    pub wake: Option<SimTime>,
    /// The running container's exit code when it ends.
    pub exit: i32,
    /// The node rebooted under the running container.
    pub killed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Copy,
    Step,
    Check,
    Interrupt,
    Main,
}

fn role(c: &Container, stage: &str, init: bool) -> Role {
    let first = c.args.as_ref().and_then(|a| a.first()).map(String::as_str);
    if c.name == "interrupt" {
        Role::Interrupt
    } else if !init {
        Role::Main
    } else if first.is_some_and(|a| a.ends_with("-check")) || c.name.ends_with("check") {
        Role::Check
    } else if c.name.ends_with("-init") {
        Role::Copy
    } else if first == Some(stage) || init {
        Role::Step
    } else {
        Role::Main
    }
}

fn containers(pod: &Pod) -> (Vec<Container>, usize) {
    let spec = pod.spec.clone().unwrap_or_default();
    let inits = spec.init_containers.unwrap_or_default();
    let n = inits.len();
    let mut all = inits;
    all.extend(spec.containers);
    (all, n)
}

fn is_reboot(c: &Container) -> bool {
    let Some(arg) = c.args.as_ref().and_then(|a| a.last()) else {
        return false;
    };
    base64::engine::general_purpose::STANDARD
        .decode(arg)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("node_restart"))
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message,
        }),
        ..Default::default()
    }
}

fn terminated(exit: i32, reason: &str, at: SimTime, started: Option<SimTime>) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit,
            reason: Some(reason.into()),
            finished_at: Some(k8s_time(at)),
            started_at: started.map(k8s_time),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn status_mut(pod: &mut Pod, index: usize, inits: usize) -> Option<&mut ContainerStatus> {
    let status = pod.status.as_mut()?;
    if index < inits {
        status.init_container_statuses.as_mut()?.get_mut(index)
    } else {
        status.container_statuses.as_mut()?.get_mut(index - inits)
    }
}

fn running_since(cs: &ContainerStatus) -> Option<SimTime> {
    cs.state
        .as_ref()?
        .running
        .as_ref()?
        .started_at
        .as_ref()
        .map(from_k8s_time)
}

impl World {
    pub(super) fn kubelet_step(&mut self, now: SimTime) {
        let keys: Vec<String> = self
            .store
            .objects
            .pods
            .iter()
            .filter(|(_, p)| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .filter(|(_, p)| !is_terminal(p) || p.metadata.deletion_timestamp.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.kubelet_pod(&key, now);
        }
        let pods = &self.store.objects.pods;
        self.kubelet.retain(|k, _| pods.contains_key(k));
    }

    /// True when the node exists, is powered and reachable.
    pub fn node_up(&self, node: &str) -> bool {
        self.store.objects.nodes.contains_key(node)
            && self.nodes.get(node).is_none_or(|n| n.is_up())
    }

    fn kubelet_pod(&mut self, key: &str, now: SimTime) {
        let Some(pod) = self.store.objects.pods.get(key).cloned() else {
            return;
        };
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        if !self.node_up(&node) {
            if let Some(run) = self.kubelet.get_mut(key) {
                run.wake = None;
            }
            return;
        }
        if let Some(deleted) = &pod.metadata.deletion_timestamp {
            let done_at = from_k8s_time(deleted) + self.settings.termination;
            if now >= done_at {
                self.finish_termination(pod, now);
            } else {
                self.kubelet.entry(key.into()).or_default().wake = Some(done_at);
            }
            return;
        }
        if is_terminal(&pod) {
            self.kubelet.remove(key);
            return;
        }
        let Some(pod) = self.admit(pod, now) else {
            return;
        };
        let mut pod = pod;
        if self.kubelet.get(key).is_some_and(|r| r.killed) {
            pod = self.after_reboot(pod, now);
        }
        if self.deadline_passed(&pod, now) {
            self.kill_for_deadline(pod, now);
            return;
        }
        self.advance(pod, now);
    }

    fn write_pod(&mut self, pod: Pod) {
        let ns = pod.metadata.namespace.clone();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let _ = self.store.modify::<Pod>(ns.as_deref(), &name, |p| *p = pod);
    }

    /// Kubelet admission; returns the pod when it runs.
    fn admit(&mut self, mut pod: Pod, now: SimTime) -> Option<Pod> {
        let started = pod.status.as_ref().and_then(|s| s.start_time.clone());
        if started.is_some() {
            return Some(pod);
        }
        let key = key_of(&pod.metadata);
        let id = pod_identity(&pod).unwrap_or_default();
        let script = self.scripts.find(&id).cloned();
        if script.as_ref().is_some_and(|s| s.never_starts) && pod_identity(&pod).is_some() {
            return None;
        }
        let attempt = self.next_attempt(&pod);
        let plan = self.scripts.attempt(&id, attempt);
        let ours = pod_identity(&pod).is_some();
        if let Some(reason) = plan.refuse.filter(|_| ours) {
            let status = pod.status.get_or_insert_with(Default::default);
            status.phase = Some("Failed".into());
            status.message = Some(format!(
                "Pod was rejected: Node didn't have enough resource ({reason})"
            ));
            status.reason = Some(reason);
            self.write_pod(pod);
            return None;
        }
        let status = pod.status.get_or_insert_with(Default::default);
        status.start_time = Some(k8s_time(now));
        status.phase = Some("Pending".into());
        let (all, inits) = containers(&pod);
        let fresh = |c: &Container| ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(waiting("PodInitializing", None)),
            ..Default::default()
        };
        let status = pod.status.get_or_insert_with(Default::default);
        status.init_container_statuses = Some(all[..inits].iter().map(fresh).collect());
        status.container_statuses = Some(all[inits..].iter().map(fresh).collect());
        self.kubelet.insert(
            key,
            PodRun {
                attempt,
                ..Default::default()
            },
        );
        let pod = self.start_container(pod, 0, now);
        self.write_pod(pod.clone());
        Some(pod)
    }

    fn next_attempt(&mut self, pod: &Pod) -> usize {
        let owner = pod
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .map(|o| o.uid.clone())
            .unwrap_or_else(|| key_of(&pod.metadata));
        let counter = self.executions.entry(owner).or_default();
        *counter += 1;
        *counter - 1
    }

    fn start_container(&mut self, mut pod: Pod, index: usize, now: SimTime) -> Pod {
        let key = key_of(&pod.metadata);
        let (all, inits) = containers(&pod);
        let Some(c) = all.get(index) else {
            return pod;
        };
        let id = pod_identity(&pod);
        let stage = id.as_ref().map(|i| i.stage.clone()).unwrap_or_default();
        let role = if id.is_some() {
            role(c, &stage, index < inits)
        } else {
            Role::Main
        };
        let id = id.unwrap_or_default();
        let attempt = self.kubelet.get(&key).map_or(0, |r| r.attempt);
        let plan = self.scripts.attempt(&id, attempt);
        let pull_error = self
            .scripts
            .find(&id)
            .and_then(|s| s.image_pull_error.clone())
            .filter(|_| matches!(role, Role::Copy | Role::Main) && !id.package.is_empty());
        let run = self.kubelet.entry(key.clone()).or_default();
        run.container = index;
        let cs = status_mut(&mut pod, index, inits);
        let Some(cs) = cs else {
            return pod;
        };
        if let Some(message) = pull_error {
            cs.state = Some(waiting("ErrImagePull", Some(message)));
            run.wake = None;
            return pod;
        }
        let (duration, exit) = match role {
            Role::Copy | Role::Check => (
                1_000,
                if role == Role::Check {
                    plan.check_exit
                } else {
                    0
                },
            ),
            Role::Step | Role::Interrupt => (plan.duration.0, plan.exit),
            Role::Main => (0, 0),
        };
        if index >= inits && matches!(role, Role::Main) {
            cs.ready = true;
            cs.started = Some(true);
        }
        cs.state = Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(k8s_time(now)),
            }),
            ..Default::default()
        });
        if index == inits
            && let Some(status) = pod.status.as_mut()
        {
            status.phase = Some("Running".into());
        }
        run.exit = exit;
        run.wake = Some(now + duration);
        pod
    }

    fn advance(&mut self, mut pod: Pod, now: SimTime) {
        let key = key_of(&pod.metadata);
        let mut changed = false;
        for _ in 0..64 {
            let Some(run) = self.kubelet.get(&key).cloned() else {
                break;
            };
            let Some(wake) = run.wake.filter(|w| *w <= now) else {
                break;
            };
            changed = true;
            let (all, inits) = containers(&pod);
            let index = run.container;
            if let Some(c) = all.get(index)
                && c.name == "interrupt"
                && run.exit == 0
                && is_reboot(c)
                && self.reboot_needed(&pod)
            {
                self.start_interrupt_reboot(&pod, wake);
                break;
            }
            let restart_never = pod
                .spec
                .as_ref()
                .and_then(|s| s.restart_policy.clone())
                .is_none_or(|p| p == "Never");
            let Some(cs) = status_mut(&mut pod, index, inits) else {
                break;
            };
            let started = running_since(cs);
            if run.exit == 0 {
                cs.state = Some(terminated(0, "Completed", wake, started));
                cs.ready = false;
                if index + 1 >= all.len() {
                    if let Some(status) = pod.status.as_mut() {
                        status.phase = Some("Succeeded".into());
                    }
                    self.kubelet.remove(&key);
                    break;
                }
                pod = self.start_container(pod, index + 1, wake);
            } else if restart_never {
                cs.state = Some(terminated(run.exit, "Error", wake, started));
                if let Some(status) = pod.status.as_mut() {
                    status.phase = Some("Failed".into());
                }
                self.kubelet.remove(&key);
                break;
            } else {
                cs.restart_count += 1;
                let backoff = (10_000u64 << (cs.restart_count.clamp(1, 6) - 1)).min(300_000);
                cs.last_state = Some(terminated(run.exit, "Error", wake, started));
                cs.state = Some(waiting(
                    "CrashLoopBackOff",
                    Some(format!("back-off restarting failed container {}", cs.name)),
                ));
                let attempt = self.next_attempt(&pod);
                let run = self.kubelet.entry(key.clone()).or_default();
                run.attempt = attempt;
                run.wake = Some(wake + backoff);
                run.exit = 0;
                run.container = usize::MAX - index;
            }
        }
        // A crash-looping container restarts when its back-off ends.
        if let Some(run) = self.kubelet.get(&key).cloned()
            && run.container > usize::MAX / 2
            && run.wake.is_some_and(|w| w <= now)
        {
            pod = self.start_container(pod, usize::MAX - run.container, now);
            changed = true;
        }
        if changed {
            self.write_pod(pod);
        }
    }

    fn reboot_needed(&mut self, pod: &Pod) -> bool {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let flag = self.reboot_flag(pod);
        let run = self.nodes.entry(node).or_default();
        !run.flags.contains(&flag)
    }

    fn reboot_flag(&self, pod: &Pod) -> String {
        let owner = pod
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .map(|o| o.name.clone())
            .unwrap_or_default();
        let ns = pod.metadata.namespace.as_deref();
        let resource = self
            .store
            .get::<k8s_openapi::api::batch::v1::Job>(ns, &owner)
            .and_then(|j| j.metadata.annotations.as_ref())
            .and_then(|a| a.get(nodewright_crds::keys::RESOURCE_ID).cloned())
            .unwrap_or_default();
        format!("{owner}:{resource}")
    }

    fn start_interrupt_reboot(&mut self, pod: &Pod, at: SimTime) {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let flag = self.reboot_flag(pod);
        let down = self
            .scripts
            .reboot_down(&pod_identity(pod).unwrap_or_default());
        self.nodes
            .entry(node.clone())
            .or_default()
            .flags
            .insert(flag);
        self.reboot_node(&node, down, at);
    }

    /// A running container was killed by a reboot: restart in place or fail the pod.
    fn after_reboot(&mut self, mut pod: Pod, now: SimTime) -> Pod {
        let key = key_of(&pod.metadata);
        let Some(run) = self.kubelet.get(&key).cloned() else {
            return pod;
        };
        let (_, inits) = containers(&pod);
        let index = if run.container > usize::MAX / 2 {
            usize::MAX - run.container
        } else {
            run.container
        };
        let never = pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .is_none_or(|p| p == "Never");
        if let Some(cs) = status_mut(&mut pod, index, inits) {
            let started = running_since(cs);
            if never {
                cs.state = Some(terminated(137, "Error", now, started));
            } else {
                cs.restart_count += 1;
                cs.last_state = Some(terminated(137, "Error", now, started));
            }
        }
        if never {
            if let Some(status) = pod.status.as_mut() {
                status.phase = Some("Failed".into());
            }
            self.kubelet.remove(&key);
            self.write_pod(pod.clone());
            return pod;
        }
        let attempt = self.next_attempt(&pod);
        let run = self.kubelet.entry(key).or_default();
        run.killed = false;
        run.attempt = attempt;
        let pod = self.start_container(pod, index, now);
        self.write_pod(pod.clone());
        pod
    }

    fn deadline_passed(&self, pod: &Pod, now: SimTime) -> bool {
        let Some(deadline) = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds) else {
            return false;
        };
        let Some(start) = pod.status.as_ref().and_then(|s| s.start_time.as_ref()) else {
            return false;
        };
        now >= from_k8s_time(start) + (deadline.max(0) as u64) * 1000
    }

    /// When the per-pod deadline of a running pod expires.
    pub(super) fn pod_deadline(pod: &Pod) -> Option<SimTime> {
        let deadline = pod.spec.as_ref()?.active_deadline_seconds?;
        let start = pod.status.as_ref()?.start_time.as_ref()?;
        Some(from_k8s_time(start) + (deadline.max(0) as u64) * 1000)
    }

    fn kill_for_deadline(&mut self, mut pod: Pod, now: SimTime) {
        let key = key_of(&pod.metadata);
        if let Some(status) = pod.status.as_mut() {
            status.phase = Some("Failed".into());
            status.reason = Some("DeadlineExceeded".into());
            status.message =
                Some("Pod was active on the node longer than the specified deadline".into());
            for cs in status
                .init_container_statuses
                .iter_mut()
                .flatten()
                .chain(status.container_statuses.iter_mut().flatten())
            {
                let state = cs.state.clone().unwrap_or_default();
                if let Some(running) = state.running {
                    let started = running.started_at.as_ref().map(from_k8s_time);
                    cs.state = Some(terminated(137, "Error", now, started));
                } else if state.waiting.is_some() {
                    cs.state = Some(terminated(137, "ContainerStatusUnknown", now, None));
                }
            }
        }
        self.kubelet.remove(&key);
        self.write_pod(pod);
    }

    fn finish_termination(&mut self, mut pod: Pod, now: SimTime) {
        let key = key_of(&pod.metadata);
        self.kubelet.remove(&key);
        let ns = pod.metadata.namespace.clone();
        let name = pod.metadata.name.clone().unwrap_or_default();
        if !is_terminal(&pod) {
            if let Some(status) = pod.status.as_mut() {
                status.phase = Some("Failed".into());
                for cs in status
                    .init_container_statuses
                    .iter_mut()
                    .flatten()
                    .chain(status.container_statuses.iter_mut().flatten())
                {
                    if let Some(running) = cs.state.clone().unwrap_or_default().running {
                        let started = running.started_at.as_ref().map(from_k8s_time);
                        cs.state = Some(terminated(143, "Error", now, started));
                    }
                }
            } else {
                pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
                    phase: Some("Failed".into()),
                    ..Default::default()
                });
            }
        }
        let has_finalizers = pod
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            let _ = self.store.update(pod, None);
        } else {
            self.store.remove::<Pod>(ns.as_deref(), &name);
        }
    }

    /// Marks running containers on `node` as killed by a reboot.
    pub(super) fn kill_containers_on(&mut self, node: &str) {
        let keys: Vec<String> = self
            .store
            .objects
            .pods
            .iter()
            .filter(|(_, p)| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                    && !is_terminal(p)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            if let Some(run) = self.kubelet.get_mut(&key) {
                run.killed = true;
                run.wake = None;
            }
        }
    }
}
