//! Garbage collection: foreground deletion, orphaned dependents, and PodGC of pods bound to
//! nodes that no longer exist.

use std::collections::{BTreeMap, BTreeSet};

/// An owned object, by kind and name.
#[derive(Clone, Debug)]
struct Dependent {
    kind: Kind,
    namespace: Option<String>,
    name: String,
    deleting: bool,
}

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

use super::{World, is_terminal, set_pod_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::objects::{AnyObject, Kind, Object};
use crate::store::{FOREGROUND, Propagation};

impl World {
    pub(super) fn gc_step(&mut self) {
        self.pod_gc();
        let (dependents, orphans) = {
            let objects = &self.store.objects;
            let uids = objects.uids();
            let mut dependents: BTreeMap<String, Vec<Dependent>> = BTreeMap::new();
            let mut orphans: Vec<Dependent> = Vec::new();
            let mut visit = |kind: Kind, m: &ObjectMeta| {
                let owners = m.owner_references.as_deref().unwrap_or_default();
                if owners.is_empty() {
                    return;
                }
                let d = Dependent {
                    kind,
                    namespace: m.namespace.clone(),
                    name: m.name.clone().unwrap_or_default(),
                    deleting: m.deletion_timestamp.is_some(),
                };
                for o in owners {
                    dependents.entry(o.uid.clone()).or_default().push(d.clone());
                }
                let modelled: Vec<_> = owners
                    .iter()
                    .filter(|o| Kind::parse(&o.kind).is_some())
                    .collect();
                if !modelled.is_empty() && modelled.iter().all(|o| !uids.contains(o.uid.as_str())) {
                    orphans.push(d);
                }
            };
            objects
                .jobs
                .values()
                .for_each(|o| visit(Kind::Job, &o.metadata));
            objects
                .pods
                .values()
                .for_each(|o| visit(Kind::Pod, &o.metadata));
            objects
                .config_maps
                .values()
                .for_each(|o| visit(Kind::ConfigMap, &o.metadata));
            (dependents, orphans)
        };
        for d in orphans.iter().filter(|d| !d.deleting) {
            self.gc_delete(d, Propagation::Background);
        }
        self.foreground_step(&dependents);
    }

    fn gc_delete(&mut self, d: &Dependent, propagation: Propagation) {
        let ns = d.namespace.as_deref();
        let name = d.name.as_str();
        let _ = match d.kind {
            Kind::Pod => self.store.delete::<Pod>(ns, name, None, propagation, true),
            Kind::Job => self
                .store
                .delete::<Job>(ns, name, None, Propagation::Foreground, false),
            Kind::ConfigMap => self
                .store
                .delete::<ConfigMap>(ns, name, None, propagation, false),
            _ => Ok(()),
        };
    }

    fn foreground_step(&mut self, dependents: &BTreeMap<String, Vec<Dependent>>) {
        let held = |m: &ObjectMeta| {
            m.deletion_timestamp.is_some() && m.finalizers.iter().flatten().any(|f| f == FOREGROUND)
        };
        let o = &self.store.objects;
        let mut deleting: Vec<AnyObject> = Vec::new();
        deleting.extend(
            o.jobs
                .values()
                .filter(|x| held(&x.metadata))
                .cloned()
                .map(Object::wrap),
        );
        deleting.extend(
            o.nodewrights
                .values()
                .filter(|x| held(&x.metadata))
                .cloned()
                .map(Object::wrap),
        );
        deleting.extend(
            o.pods
                .values()
                .filter(|x| held(&x.metadata))
                .cloned()
                .map(Object::wrap),
        );
        deleting.extend(
            o.config_maps
                .values()
                .filter(|x| held(&x.metadata))
                .cloned()
                .map(Object::wrap),
        );
        deleting.extend(
            o.nodes
                .values()
                .filter(|x| held(&x.metadata))
                .cloned()
                .map(Object::wrap),
        );
        for owner in deleting {
            let uid = owner.meta().uid.clone().unwrap_or_default();
            let deps = dependents.get(&uid).cloned().unwrap_or_default();
            if deps.is_empty() {
                self.release_foreground(owner);
            } else {
                for d in deps.iter().filter(|d| !d.deleting) {
                    self.gc_delete(d, Propagation::Background);
                }
            }
        }
    }

    fn release_foreground(&mut self, owner: AnyObject) {
        fn strip<T: Object>(mut o: T) -> T {
            if let Some(f) = o.meta_mut().finalizers.as_mut() {
                f.retain(|x| x != FOREGROUND);
            }
            o
        }
        let _ = match owner {
            AnyObject::Job(j) => self.store.update(strip(*j), None).map(|_| ()),
            AnyObject::NodeWright(n) => self.store.update(strip(*n), None).map(|_| ()),
            AnyObject::Pod(p) => self.store.update(strip(*p), None).map(|_| ()),
            AnyObject::ConfigMap(c) => self.store.update(strip(*c), None).map(|_| ()),
            AnyObject::Node(n) => self.store.update(strip(*n), None).map(|_| ()),
            _ => Ok(()),
        };
    }

    /// Pods bound to a node that no longer exists fail with DisruptionTarget and are deleted.
    fn pod_gc(&mut self) {
        let nodes: BTreeSet<String> = self.store.objects.nodes.keys().cloned().collect();
        let now = self.store.now;
        let doomed: Vec<Pod> = self
            .store
            .objects
            .pods
            .values()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some_and(|n| !nodes.contains(n))
            })
            .cloned()
            .collect();
        for mut pod in doomed {
            let ns = pod.metadata.namespace.clone();
            let name = pod.metadata.name.clone().unwrap_or_default();
            if !is_terminal(&pod) {
                set_pod_condition(&mut pod, "DisruptionTarget", "DeletionByPodGC", now);
                pod.status.get_or_insert_with(Default::default).phase = Some("Failed".into());
            }
            if pod.metadata.deletion_timestamp.is_none() {
                pod.metadata.deletion_timestamp = Some(crate::time::k8s_time(now));
            }
            let held = pod
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty());
            if held {
                if self.store.get::<Pod>(ns.as_deref(), &name) != Some(&pod) {
                    let _ = self.store.update(pod, None);
                }
            } else {
                self.store.remove::<Pod>(ns.as_deref(), &name);
            }
        }
    }
}
