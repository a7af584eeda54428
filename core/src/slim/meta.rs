//! The metadata of a compact Job record: identity, deletion and shared label/annotation texts.
//!
//! A typed `ObjectMeta` is 400-odd bytes before any string, and its two `BTreeMap`s cost about
//! 900 bytes each for a Job's handful of labels and annotations. Every retained Job of a NodeWright
//! repeats the same keys, NodeWright name, package label, stage, fingerprint and package
//! annotation; [`Tags`] holds them as shared strings so each distinct text is stored once.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// What the core reads of a Job's metadata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimMeta {
    /// `metadata.name` (shared with the executor index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Arc<str>>,
    /// `metadata.namespace` (shared: every executor Job is in the operator namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Arc<str>>,
    /// `metadata.uid` (shared with the executor index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<Arc<str>>,
    /// `metadata.resourceVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// `metadata.creationTimestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
    /// `metadata.deletionTimestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    /// `metadata.labels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Tags>,
    /// `metadata.annotations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Tags>,
}

impl SlimMeta {
    /// The fields the core reads of `meta`, the namespace and every label and annotation text
    /// shared through `interner`.
    pub fn new(meta: ObjectMeta, interner: &mut Interner) -> Self {
        SlimMeta {
            name: meta.name.map(Arc::from),
            namespace: meta.namespace.map(|n| interner.intern(&n)),
            uid: meta.uid.map(Arc::from),
            resource_version: meta.resource_version,
            creation_timestamp: meta.creation_timestamp,
            deletion_timestamp: meta.deletion_timestamp,
            // A Job's labels name its node, so no two Jobs share them; its annotations
            // (fingerprint, package, resource id) are the same on every node of a stage.
            labels: meta.labels.map(|m| Tags::with_texts(m, interner)),
            annotations: meta.annotations.map(|m| Tags::new(m, interner)),
        }
    }

    /// A label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref().and_then(|l| l.get(key))
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref().and_then(|a| a.get(key))
    }

    /// A label's shared value, for readers that keep it.
    pub fn label_shared(&self, key: &str) -> Option<&Arc<str>> {
        self.labels.as_ref().and_then(|l| l.get_shared(key))
    }
}

impl From<&SlimMeta> for ObjectMeta {
    /// The typed metadata with what the record keeps.
    fn from(meta: &SlimMeta) -> Self {
        ObjectMeta {
            name: meta.name.as_deref().map(str::to_string),
            namespace: meta.namespace.as_deref().map(str::to_string),
            uid: meta.uid.as_deref().map(str::to_string),
            resource_version: meta.resource_version.clone(),
            creation_timestamp: meta.creation_timestamp.clone(),
            deletion_timestamp: meta.deletion_timestamp.clone(),
            labels: meta.labels.as_ref().map(Tags::to_map),
            annotations: meta.annotations.as_ref().map(Tags::to_map),
            ..ObjectMeta::default()
        }
    }
}

/// An object's identity as caches and traces key it, from typed metadata or a record's.
pub trait Identity {
    /// `metadata.name`.
    fn name(&self) -> Option<&str>;
    /// `metadata.namespace`.
    fn namespace(&self) -> Option<&str>;
    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> Option<&str>;
    /// `metadata.uid`.
    fn uid(&self) -> Option<&str>;
}

macro_rules! identity_impls {
    ($($t:ty),+) => {$(
        impl Identity for $t {
            fn name(&self) -> Option<&str> {
                self.name.as_deref()
            }

            fn namespace(&self) -> Option<&str> {
                self.namespace.as_deref()
            }

            fn resource_version(&self) -> Option<&str> {
                self.resource_version.as_deref()
            }

            fn uid(&self) -> Option<&str> {
                self.uid.as_deref()
            }
        }
    )+};
}

identity_impls!(ObjectMeta, SlimMeta);

/// Labels and annotations as readers see them, from typed metadata or a record's.
pub trait Tagged {
    /// A label value.
    fn label(&self, key: &str) -> Option<&str>;
    /// An annotation value.
    fn annotation(&self, key: &str) -> Option<&str>;
}

impl Tagged for ObjectMeta {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(String::as_str)
    }
}

impl Tagged for SlimMeta {
    fn label(&self, key: &str) -> Option<&str> {
        SlimMeta::label(self, key)
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        SlimMeta::annotation(self, key)
    }
}

/// Key/value pairs sorted by key, each text a shared string.
type Pairs = [(Arc<str>, Arc<str>)];

/// Labels or annotations as key/value pairs sorted by key, each text a shared string; equal
/// sets of pairs may share one slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tags(Arc<Pairs>);

impl Default for Tags {
    fn default() -> Self {
        Tags(Arc::new([]))
    }
}

impl Tags {
    /// The pairs of `map` (already sorted by key): texts and the set of pairs shared through
    /// `interner`.
    pub fn new(map: BTreeMap<String, String>, interner: &mut Interner) -> Self {
        let pairs = Self::pairs(map, interner);
        Tags(interner.intern_pairs(pairs))
    }

    /// The pairs of `map` with their texts shared through `interner` but a slice of their own
    /// (for sets that are rarely equal, such as a Job's labels, which name its node).
    pub fn with_texts(map: BTreeMap<String, String>, interner: &mut Interner) -> Self {
        Tags(Self::pairs(map, interner).into())
    }

    fn pairs(map: BTreeMap<String, String>, interner: &mut Interner) -> Vec<(Arc<str>, Arc<str>)> {
        map.iter()
            .map(|(k, v)| (interner.intern(k), interner.intern(v)))
            .collect()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.get_shared(key).map(AsRef::as_ref)
    }

    /// The shared value of `key`, for readers that keep it.
    pub fn get_shared(&self, key: &str) -> Option<&Arc<str>> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// Sets `key` to `value` (tests and tools that edit a record; not interned).
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let mut map = self.to_map();
        map.insert(key.as_ref().to_string(), value.as_ref().to_string());
        *self = map.into_iter().collect();
    }

    /// Removes `key`; whether it was present.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.0.len();
        let pairs: Vec<_> = self
            .0
            .iter()
            .filter(|(k, _)| k.as_ref() != key)
            .cloned()
            .collect();
        self.0 = pairs.into();
        self.0.len() != before
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// The pairs as an owned map.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Tags {
    /// Pairs in any order; a repeated key keeps its last value (as a map would).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let map: BTreeMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Tags::new(map, &mut Interner::passthrough())
    }
}

impl Serialize for Tags {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TagsVisitor;
        impl<'de> Visitor<'de> for TagsVisitor {
            type Value = Tags;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Tags, A::Error> {
                let mut map = BTreeMap::new();
                while let Some((k, v)) = access.next_entry::<String, String>()? {
                    map.insert(k, v);
                }
                Ok(Tags::new(map, &mut Interner::passthrough()))
            }
        }
        deserializer.deserialize_map(TagsVisitor)
    }
}

/// Hands out one shared copy of each distinct text. Texts no record holds any more are
/// forgotten in bulk whenever the set has doubled since the last sweep, so the set stays within
/// twice the texts in use.
#[derive(Debug, Default)]
pub struct Interner {
    texts: HashSet<Arc<str>>,
    sweep_at: usize,
    /// Shared sets of pairs ([`Tags::new`]), swept like the texts.
    pairs: HashSet<Arc<Pairs>>,
    pairs_sweep_at: usize,
    /// Hands out a fresh copy of every text instead (one record built on its own).
    passthrough: bool,
}

/// The set size below which the interner never sweeps.
const MIN_SWEEP: usize = 1024;

/// The copy of `value` in `set`, added (through `make`) when missing. Before adding, copies no
/// one else holds are forgotten if the set has reached `sweep_at` (at least [`MIN_SWEEP`]), and
/// `sweep_at` becomes twice what is left.
fn shared_copy<T: ?Sized + Eq + std::hash::Hash>(
    set: &mut HashSet<Arc<T>>,
    sweep_at: &mut usize,
    value: &T,
    make: impl FnOnce(&T) -> Arc<T>,
) -> Arc<T> {
    if let Some(shared) = set.get(value) {
        return Arc::clone(shared);
    }
    if set.len() >= (*sweep_at).max(MIN_SWEEP) {
        set.retain(|t| Arc::strong_count(t) > 1);
        *sweep_at = 2 * set.len();
    }
    let shared = make(value);
    set.insert(Arc::clone(&shared));
    shared
}

impl Interner {
    /// An interner that shares nothing: for a record built on its own, where a set would only
    /// cost an allocation.
    pub fn passthrough() -> Self {
        Interner {
            passthrough: true,
            ..Interner::default()
        }
    }

    /// The shared copy of `text`.
    pub fn intern(&mut self, text: &str) -> Arc<str> {
        if self.passthrough {
            return Arc::from(text);
        }
        shared_copy(&mut self.texts, &mut self.sweep_at, text, |t| Arc::from(t))
    }

    /// The shared copy of the set `pairs`.
    fn intern_pairs(&mut self, pairs: Vec<(Arc<str>, Arc<str>)>) -> Arc<Pairs> {
        if self.passthrough {
            return pairs.into();
        }
        shared_copy(
            &mut self.pairs,
            &mut self.pairs_sweep_at,
            pairs.as_slice(),
            |p| Arc::from(p),
        )
    }

    /// How many texts the interner holds (in use or not yet swept).
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Whether the interner holds no text.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equal_texts_are_stored_once() {
        let mut interner = Interner::default();
        let a = Tags::new(map(&[("k", "v"), ("n", "x")]), &mut interner);
        let b = Tags::new(map(&[("k", "v"), ("n", "y")]), &mut interner);
        assert!(Arc::ptr_eq(&a.0[0].1, &b.0[0].1));
        assert_eq!(interner.len(), 5, "k, v, n, x and y");
        assert_eq!(
            (a.get("n"), b.get("n"), a.get("z")),
            (Some("x"), Some("y"), None)
        );
    }

    #[test]
    fn equal_annotation_sets_share_one_slice_and_labels_keep_their_own() {
        let mut interner = Interner::default();
        let a = Tags::new(map(&[("k", "v"), ("n", "x")]), &mut interner);
        let b = Tags::new(map(&[("k", "v"), ("n", "x")]), &mut interner);
        let c = Tags::new(map(&[("k", "v"), ("n", "y")]), &mut interner);
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &c.0));
        let l = Tags::with_texts(map(&[("k", "v"), ("n", "x")]), &mut interner);
        assert!(!Arc::ptr_eq(&a.0, &l.0) && Arc::ptr_eq(&a.0[0].1, &l.0[0].1));
        assert_eq!(a, l, "equal by content");
        // Editing a shared set leaves the other holders unchanged.
        let mut edited = b.clone();
        edited.insert("z", "1");
        assert!(edited.remove("k"));
        assert_eq!((a.get("k"), a.get("z")), (Some("v"), None));
        assert_eq!((edited.get("k"), edited.get("z")), (None, Some("1")));
    }

    #[test]
    fn sets_no_record_holds_are_swept_when_the_set_doubles() {
        let mut interner = Interner::default();
        let kept = Tags::new(map(&[("kept", "1")]), &mut interner);
        for i in 0..MIN_SWEEP * 3 {
            Tags::new(map(&[("gone", &i.to_string())]), &mut interner);
        }
        assert!(
            interner.pairs.len() < MIN_SWEEP * 2,
            "{} sets kept",
            interner.pairs.len()
        );
        assert!(Arc::ptr_eq(
            &kept.0,
            &Tags::new(map(&[("kept", "1")]), &mut interner).0
        ));
    }

    #[test]
    fn a_passthrough_interner_keeps_nothing() {
        let mut interner = Interner::passthrough();
        let (a, b) = (interner.intern("x"), interner.intern("x"));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(interner.is_empty());
    }

    #[test]
    fn texts_no_record_holds_are_swept_when_the_set_doubles() {
        let mut interner = Interner::default();
        let kept: Vec<Arc<str>> = (0..10)
            .map(|i| interner.intern(&format!("kept-{i}")))
            .collect();
        for i in 0..MIN_SWEEP * 3 {
            interner.intern(&format!("gone-{i}"));
        }
        assert!(
            interner.len() < MIN_SWEEP * 2,
            "{} texts kept",
            interner.len()
        );
        for (i, k) in kept.iter().enumerate() {
            assert!(Arc::ptr_eq(k, &interner.intern(&format!("kept-{i}"))));
        }
    }

    #[test]
    fn tags_serialize_as_the_map_they_came_from() {
        let m = map(&[("b", "2"), ("a", "1")]);
        let tags = Tags::new(m.clone(), &mut Interner::default());
        let json = serde_json::to_string(&tags).unwrap();
        assert_eq!(json, serde_json::to_string(&m).unwrap());
        assert_eq!(serde_json::from_str::<Tags>(&json).unwrap(), tags);
        let meta = ObjectMeta {
            name: Some("j".into()),
            namespace: Some("ns".into()),
            labels: Some(m),
            ..ObjectMeta::default()
        };
        let slim = SlimMeta::new(meta.clone(), &mut Interner::default());
        assert_eq!(ObjectMeta::from(&slim), meta);
    }
}
