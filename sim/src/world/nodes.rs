//! Nodes: readiness, reboots (NotReady, then a new boot id), partitions, heartbeats.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSystemInfo};

use super::World;
use crate::time::{SimTime, k8s_time};

/// Power and reachability of one node, plus host state that survives reboots.
#[derive(Clone, Debug, Default)]
pub struct NodeRun {
    /// Rebooting until this time.
    pub down_until: Option<SimTime>,
    /// Unreachable (NotReady) until cleared.
    pub not_ready: bool,
    /// Reboots so far.
    pub boots: u32,
    /// Agent flag files on the host (survive reboots).
    pub flags: BTreeSet<String>,
}

impl NodeRun {
    /// True when the kubelet runs and reports.
    pub fn is_up(&self) -> bool {
        self.down_until.is_none() && !self.not_ready
    }
}

/// The boot id of a node after `boots` reboots.
pub fn boot_id(node: &str, boots: u32) -> String {
    format!("boot-{node}-{boots}")
}

/// Sets the node's Ready condition and boot id.
pub fn set_ready(node: &mut Node, ready: bool, boot: Option<String>, at: SimTime) {
    let status = node.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let text = if ready { "True" } else { "False" };
    let existing = conditions.iter_mut().find(|c| c.type_ == "Ready");
    match existing {
        Some(c) if c.status == text => {}
        Some(c) => {
            c.status = text.into();
            c.reason = Some(
                if ready {
                    "KubeletReady"
                } else {
                    "NodeStatusUnknown"
                }
                .into(),
            );
            c.last_transition_time = Some(k8s_time(at));
        }
        None => conditions.push(NodeCondition {
            type_: "Ready".into(),
            status: text.into(),
            reason: Some(
                if ready {
                    "KubeletReady"
                } else {
                    "NodeStatusUnknown"
                }
                .into(),
            ),
            last_transition_time: Some(k8s_time(at)),
            ..Default::default()
        }),
    }
    if let Some(boot) = boot {
        status
            .node_info
            .get_or_insert_with(NodeSystemInfo::default)
            .boot_id = boot;
    }
}

impl World {
    pub(super) fn nodes_step(&mut self, now: SimTime) {
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for name in names {
            let run = self.nodes.get_mut(&name).expect("listed above");
            if run.down_until.is_some_and(|t| t <= now) {
                run.down_until = None;
                run.boots += 1;
                let boot = boot_id(&name, run.boots);
                let up = run.is_up();
                let _ = self
                    .store
                    .modify::<Node>(None, &name, |n| set_ready(n, up, Some(boot), now));
            }
        }
        if self.settings.heartbeat > 0 && now >= self.last_heartbeat + self.settings.heartbeat {
            self.last_heartbeat = now;
            let names: Vec<String> = self.store.objects.nodes.keys().cloned().collect();
            for name in names {
                if self.nodes.get(&name).is_none_or(|r| r.is_up()) {
                    let _ = self.store.modify::<Node>(None, &name, |n| {
                        let status = n.status.get_or_insert_with(Default::default);
                        for c in status.conditions.iter_mut().flatten() {
                            if c.type_ == "Ready" {
                                c.last_heartbeat_time = Some(k8s_time(now));
                            }
                        }
                    });
                }
            }
        }
    }

    /// Reboots a node: NotReady for `down`, then Ready with a new boot id; running containers die.
    pub fn reboot_node(&mut self, node: &str, down: SimTime, at: SimTime) {
        if !self.store.objects.nodes.contains_key(node) {
            return;
        }
        self.nodes.entry(node.into()).or_default().down_until = Some(at + down.max(1));
        let _ = self
            .store
            .modify::<Node>(None, node, |n| set_ready(n, false, None, at));
        self.kill_containers_on(node);
    }

    /// Makes a node unreachable (or reachable again) without rebooting it.
    pub fn set_node_reachable(&mut self, node: &str, reachable: bool, at: SimTime) {
        let run = self.nodes.entry(node.into()).or_default();
        run.not_ready = !reachable;
        let up = run.is_up();
        let _ = self
            .store
            .modify::<Node>(None, node, |n| set_ready(n, up, None, at));
    }
}

/// Marks a freshly defined node Ready with its first boot id.
pub fn set_ready_for_start(node: &mut Node, name: &str) {
    set_ready(node, true, Some(boot_id(name, 0)), 0);
}
