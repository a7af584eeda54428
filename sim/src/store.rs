//! The simulated apiserver: typed storage with resourceVersions, uid preconditions, optimistic
//! locking, finalizers, graceful and foreground deletion, and a log of watch events.

use crate::objects::{AnyObject, Kind, Object, Objects, key};
use crate::time::{SimTime, k8s_time};

/// Finalizer the garbage collector uses for foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";

/// Watch event types (the trace's).
pub use nodewright_shell::trace::EventType;

/// One change, as a watch would report it.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    /// Virtual time of the write.
    pub at: SimTime,
    /// Added, modified or deleted.
    pub event: EventType,
    /// The object after the write (before removal for deletions).
    pub object: AnyObject,
}

/// Why the apiserver refused a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// No such object.
    NotFound,
    /// Create of an existing name.
    AlreadyExists,
    /// resourceVersion precondition failed.
    Conflict,
    /// uid precondition failed.
    UidMismatch,
    /// Eviction refused by a PodDisruptionBudget (HTTP 429).
    TooManyRequests,
}

/// How a delete cascades to dependents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are collected after the owner is gone.
    Background,
    /// The owner stays (with a deletionTimestamp) until its dependents are gone.
    Foreground,
}

/// The apiserver state.
#[derive(Clone, Debug, Default)]
pub struct Store {
    /// Current objects.
    pub objects: Objects,
    /// Last resourceVersion handed out.
    pub resource_version: u64,
    uid_counter: u64,
    /// Every write since the start, in order.
    pub log: Vec<WatchEvent>,
    /// Current virtual time (set by the simulation before each step).
    pub now: SimTime,
}

impl Store {
    fn next_rv(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    /// A fresh uid.
    pub fn new_uid(&mut self, kind: Kind) -> String {
        self.uid_counter += 1;
        format!("{:?}-{:08x}", kind, self.uid_counter).to_lowercase()
    }

    fn record(&mut self, event: EventType, object: AnyObject) {
        self.log.push(WatchEvent {
            at: self.now,
            event,
            object,
        });
    }

    /// Reads an object by namespace and name.
    pub fn get<T: Object>(&self, namespace: Option<&str>, name: &str) -> Option<&T> {
        T::table(&self.objects).get(&key(namespace, name))
    }

    /// Creates an object: uid, resourceVersion and creationTimestamp are assigned.
    pub fn create<T: Object>(&mut self, mut object: T) -> Result<T, ApiError> {
        let k = crate::objects::key_of(object.meta());
        if T::table(&self.objects).contains_key(&k) {
            return Err(ApiError::AlreadyExists);
        }
        let uid = self.new_uid(T::KIND);
        let rv = self.next_rv();
        let now = self.now;
        let meta = object.meta_mut();
        meta.uid = Some(uid);
        meta.resource_version = Some(rv);
        meta.creation_timestamp = Some(k8s_time(now));
        meta.deletion_timestamp = None;
        if meta.generation.is_none() && matches!(T::KIND, Kind::NodeWright | Kind::Job) {
            meta.generation = Some(1);
        }
        T::table_mut(&mut self.objects).insert(k, object.clone());
        self.record(EventType::Added, object.clone().wrap());
        Ok(object)
    }

    /// Replaces an object, optionally guarded by a resourceVersion. An object being deleted whose
    /// last finalizer goes away is removed.
    pub fn update<T: Object>(
        &mut self,
        mut object: T,
        expect_rv: Option<&str>,
    ) -> Result<T, ApiError> {
        let k = crate::objects::key_of(object.meta());
        let Some(current) = T::table(&self.objects).get(&k) else {
            return Err(ApiError::NotFound);
        };
        if let Some(rv) = expect_rv
            && current.meta().resource_version.as_deref() != Some(rv)
        {
            return Err(ApiError::Conflict);
        }
        let (uid, created, deleting) = (
            current.meta().uid.clone(),
            current.meta().creation_timestamp.clone(),
            current.meta().deletion_timestamp.clone(),
        );
        let rv = self.next_rv();
        let meta = object.meta_mut();
        meta.uid = uid;
        meta.creation_timestamp = created;
        meta.resource_version = Some(rv);
        if meta.deletion_timestamp.is_none() {
            meta.deletion_timestamp = deleting;
        }
        let gone = meta.deletion_timestamp.is_some()
            && meta.finalizers.as_ref().is_none_or(|f| f.is_empty());
        if gone {
            T::table_mut(&mut self.objects).remove(&k);
            self.record(EventType::Deleted, object.clone().wrap());
        } else {
            T::table_mut(&mut self.objects).insert(k, object.clone());
            self.record(EventType::Modified, object.clone().wrap());
        }
        Ok(object)
    }

    /// Reads, changes and writes an object (no precondition). Returns the written object.
    pub fn modify<T: Object>(
        &mut self,
        namespace: Option<&str>,
        name: &str,
        change: impl FnOnce(&mut T),
    ) -> Result<T, ApiError> {
        let mut object = self
            .get::<T>(namespace, name)
            .cloned()
            .ok_or(ApiError::NotFound)?;
        let before = object.clone();
        change(&mut object);
        if object == before {
            return Ok(object);
        }
        self.update(object, None)
    }

    /// Deletes an object. With finalizers (or foreground propagation) it only gets a
    /// deletionTimestamp; `grace` keeps a pod terminating until its kubelet removes it.
    pub fn delete<T: Object>(
        &mut self,
        namespace: Option<&str>,
        name: &str,
        uid: Option<&str>,
        propagation: Propagation,
        graceful: bool,
    ) -> Result<(), ApiError> {
        let Some(current) = self.get::<T>(namespace, name).cloned() else {
            return Err(ApiError::NotFound);
        };
        if let Some(uid) = uid
            && current.meta().uid.as_deref() != Some(uid)
        {
            return Err(ApiError::UidMismatch);
        }
        let mut object = current;
        if object.meta().deletion_timestamp.is_some() {
            return Ok(());
        }
        let has_finalizers = object
            .meta()
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers || propagation == Propagation::Foreground || graceful {
            let now = self.now;
            let meta = object.meta_mut();
            meta.deletion_timestamp = Some(k8s_time(now));
            if propagation == Propagation::Foreground {
                let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
                if !finalizers.iter().any(|f| f == FOREGROUND) {
                    finalizers.push(FOREGROUND.to_string());
                }
            }
            let k = crate::objects::key_of(object.meta());
            object.meta_mut().resource_version = Some(self.next_rv());
            T::table_mut(&mut self.objects).insert(k, object.clone());
            self.record(EventType::Modified, object.wrap());
            return Ok(());
        }
        self.remove::<T>(namespace, name);
        Ok(())
    }

    /// Removes an object immediately (final step of deletion).
    pub fn remove<T: Object>(&mut self, namespace: Option<&str>, name: &str) {
        if let Some(object) = T::table_mut(&mut self.objects).remove(&key(namespace, name)) {
            self.record(EventType::Deleted, object.wrap());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn store_conflicts_and_uids() {
        let mut store = Store::default();
        let created = store.create(node("a")).unwrap();
        assert_eq!(
            store.create(node("a")).unwrap_err(),
            ApiError::AlreadyExists
        );
        let rv = created.metadata.resource_version.clone().unwrap();
        store.update(created.clone(), Some(&rv)).unwrap();
        assert_eq!(
            store.update(created, Some(&rv)).unwrap_err(),
            ApiError::Conflict
        );
        assert_eq!(
            store.delete::<Node>(None, "a", Some("bogus"), Propagation::Background, false),
            Err(ApiError::UidMismatch)
        );
        store
            .delete::<Node>(None, "a", None, Propagation::Background, false)
            .unwrap();
        assert!(store.get::<Node>(None, "a").is_none());
        // Added, Modified, Deleted: the refused update and the uid-mismatched delete log nothing.
        assert_eq!(store.log.len(), 3);
    }

    #[test]
    fn store_finalizers_hold_deletion() {
        let mut store = Store::default();
        let mut n = node("a");
        n.metadata.finalizers = Some(vec!["x".into()]);
        store.create(n).unwrap();
        store
            .delete::<Node>(None, "a", None, Propagation::Background, false)
            .unwrap();
        let held = store.get::<Node>(None, "a").unwrap().clone();
        assert!(held.metadata.deletion_timestamp.is_some());
        let mut released = held;
        released.metadata.finalizers = Some(vec![]);
        store.update(released, None).unwrap();
        assert!(store.get::<Node>(None, "a").is_none());
    }
}
