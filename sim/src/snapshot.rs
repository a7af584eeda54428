//! Builds the core's [`Snapshot`] from a set of objects exactly as the operator does: what its
//! watches hold (Jobs and ConfigMaps of the operator namespace, scheduled pods), stripped like its
//! caches strip, assembled by the shell's own code (`nodewright_shell::cache`).

use std::sync::Arc;

use nodewright_core::{ClusterInfo, Snapshot};
use nodewright_crds::keys;
use nodewright_shell::cache::{
    CachedJob, CachedPod, assemble, strip_config_map, strip_meta, strip_node,
};

use crate::objects::Objects;

/// The Kubernetes version the simulated apiserver reports.
pub const SERVER_VERSION: (u32, u32) = (1, 33);

/// The snapshot the shell would hand the core, read from `objects` (usually the operator cache).
pub fn snapshot_from(objects: &Objects, namespace: &str) -> Snapshot {
    let in_ns = |ns: &Option<String>| ns.as_deref() == Some(namespace);
    macro_rules! stripped {
        () => {
            |o| {
                let mut o = Clone::clone(o);
                strip_meta(&mut o);
                Arc::new(o)
            }
        };
    }
    let base = Snapshot {
        nodewrights: objects.nodewrights.values().map(stripped!()).collect(),
        policies: objects.policies.values().map(stripped!()).collect(),
        nodes: objects
            .nodes
            .values()
            .map(|n| {
                let mut n = n.clone();
                strip_node(&mut n);
                Arc::new(n)
            })
            .collect(),
        jobs: objects
            .jobs
            .values()
            .filter(|j| {
                in_ns(&j.metadata.namespace)
                    && j.metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(keys::LABEL_NAME))
            })
            .map(|j| CachedJob::new(j.clone()).0)
            .collect(),
        pod_disruption_budgets: objects.pdbs.values().map(stripped!()).collect(),
        cluster: ClusterInfo {
            server_version: Some(SERVER_VERSION),
        },
        ..Snapshot::default()
    };
    let pods: Vec<_> = objects
        .pods
        .values()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
        })
        .map(|p| CachedPod::new(p.clone(), namespace))
        .collect();
    let config_maps: Vec<_> = objects
        .config_maps
        .values()
        .filter(|c| in_ns(&c.metadata.namespace))
        .map(|c| {
            let mut c = c.clone();
            strip_config_map(&mut c);
            Arc::new(c)
        })
        .collect();
    assemble(base, pods, config_maps)
}
