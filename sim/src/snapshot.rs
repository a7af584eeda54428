//! Builds the core's [`Snapshot`] from a set of objects, with the shell's filtering rules.

use nodewright_core::{ClusterInfo, Snapshot};
use nodewright_crds::keys;

use crate::objects::Objects;

/// The Kubernetes version the simulated apiserver reports.
pub const SERVER_VERSION: (u32, u32) = (1, 33);

/// The snapshot the shell would hand the core, read from `objects` (usually the operator cache).
pub fn snapshot_from(objects: &Objects, namespace: &str) -> Snapshot {
    let in_ns = |ns: &Option<String>| ns.as_deref() == Some(namespace);
    let has = |labels: &Option<std::collections::BTreeMap<String, String>>, k: &str| {
        labels.as_ref().is_some_and(|l| l.contains_key(k))
    };
    let mut executor_pods = Vec::new();
    let mut workload_pods = Vec::new();
    for pod in objects.pods.values() {
        let m = &pod.metadata;
        if in_ns(&m.namespace) && has(&m.labels, keys::LABEL_NAME) && has(&m.labels, keys::PACKAGE)
        {
            executor_pods.push(pod.clone());
        } else if !in_ns(&m.namespace) {
            workload_pods.push(pod.clone());
        }
    }
    Snapshot {
        nodewrights: objects.nodewrights.values().cloned().collect(),
        policies: objects.policies.values().cloned().collect(),
        nodes: objects.nodes.values().cloned().collect(),
        jobs: objects
            .jobs
            .values()
            .filter(|j| in_ns(&j.metadata.namespace) && has(&j.metadata.labels, keys::LABEL_NAME))
            .cloned()
            .collect(),
        executor_pods,
        workload_pods,
        config_maps: objects
            .config_maps
            .values()
            .filter(|c| {
                in_ns(&c.metadata.namespace)
                    && (has(&c.metadata.labels, keys::LABEL_NAME)
                        || has(&c.metadata.labels, keys::NODE_META))
            })
            .cloned()
            .collect(),
        pod_disruption_budgets: objects.pdbs.values().cloned().collect(),
        cluster: ClusterInfo {
            server_version: Some(SERVER_VERSION),
        },
    }
}
