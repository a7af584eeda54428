//! A serde deserializer adapter that skips the JSON keys a [`Rule`] names, so a watched object is
//! decoded by its own (k8s-openapi) `Deserialize` impl without ever allocating the skipped fields.
//!
//! Skipped values are consumed with [`IgnoredAny`], which serde_json parses without allocating.
//! Everything a rule keeps is decoded by the target type's own code, so a kept field is exactly
//! what a whole decode gives.

use std::cell::Cell;
use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess,
    Visitor,
};

/// Which keys of one JSON value to decode.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// The whole value.
    Keep,
    /// Nothing: the value is skipped.
    Skip,
    /// An object (or each object of an array) with only the listed keys, each by its rule.
    Only(&'static [(&'static str, Rule)]),
    /// An object (or each object of an array) with the listed keys by their rules and the others
    /// whole.
    Except(&'static [(&'static str, Rule)]),
    /// A map kept whole; containing the key sets the decode's mark.
    MarkKey(&'static str),
    /// Skipped when the mark is already set (by a value decoded earlier), else by the inner rule.
    UnlessMarked(&'static Rule),
}

impl Rule {
    /// The rule for `key` of an object decoded by `self`.
    fn for_key(self, key: &str, mark: &Cell<bool>) -> Rule {
        let lookup = |keys: &[(&str, Rule)]| keys.iter().find(|(k, _)| *k == key).map(|(_, r)| *r);
        let rule = match self {
            Rule::Only(keys) => lookup(keys).unwrap_or(Rule::Skip),
            Rule::Except(keys) => lookup(keys).unwrap_or(Rule::Keep),
            Rule::MarkKey(marked) => {
                if key == marked {
                    mark.set(true);
                }
                Rule::Keep
            }
            Rule::Keep | Rule::Skip | Rule::UnlessMarked(_) => Rule::Keep,
        };
        rule.resolve(mark)
    }

    /// Replaces [`Rule::UnlessMarked`] by what it means now.
    fn resolve(self, mark: &Cell<bool>) -> Rule {
        match self {
            Rule::UnlessMarked(_) if mark.get() => Rule::Skip,
            Rule::UnlessMarked(inner) => inner.resolve(mark),
            rule => rule,
        }
    }
}

/// Decodes a `T` from `deserializer`, skipping what `rule` skips.
pub fn deserialize<'de, T, D>(deserializer: D, rule: Rule) -> Result<T, D::Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    let mark = Cell::new(false);
    Filtered {
        inner: PhantomSeed::<T>::default(),
        rule: rule.resolve(&mark),
        mark: &mark,
    }
    .deserialize(deserializer)
}

/// `DeserializeSeed` of a plain `Deserialize` type.
struct PhantomSeed<T>(std::marker::PhantomData<T>);

impl<T> Default for PhantomSeed<T> {
    fn default() -> Self {
        PhantomSeed(std::marker::PhantomData)
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for PhantomSeed<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::deserialize(d)
    }
}

/// A seed, visitor, deserializer, sequence or map wrapped with the rule that applies to it.
struct Filtered<'m, X> {
    inner: X,
    rule: Rule,
    mark: &'m Cell<bool>,
}

impl<'m, X> Filtered<'m, X> {
    fn wrap<Y>(&self, inner: Y) -> Filtered<'m, Y> {
        Filtered {
            inner,
            rule: self.rule,
            mark: self.mark,
        }
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Filtered<'_, S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        match self.rule {
            Rule::Keep | Rule::Skip | Rule::UnlessMarked(_) => self.inner.deserialize(d),
            Rule::Only(_) | Rule::Except(_) | Rule::MarkKey(_) => {
                let d = self.wrap(d);
                self.inner.deserialize(d)
            }
        }
    }
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            let visitor = self.wrap(visitor);
            self.inner.$method($($arg,)* visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filtered<'_, D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any(); deserialize_bool(); deserialize_i8(); deserialize_i16();
        deserialize_i32(); deserialize_i64(); deserialize_i128(); deserialize_u8();
        deserialize_u16(); deserialize_u32(); deserialize_u64(); deserialize_u128();
        deserialize_f32(); deserialize_f64(); deserialize_char(); deserialize_str();
        deserialize_string(); deserialize_bytes(); deserialize_byte_buf(); deserialize_option();
        deserialize_unit(); deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str); deserialize_seq();
        deserialize_tuple(len: usize); deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map(); deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier(); deserialize_ignored_any();
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Filtered<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool); visit_i64(i64); visit_i128(i128); visit_u64(u64); visit_u128(u128);
        visit_f64(f64); visit_char(char); visit_str(&str); visit_borrowed_str(&'de str);
        visit_string(String); visit_bytes(&[u8]); visit_borrowed_bytes(&'de [u8]);
        visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        let d = self.wrap(d);
        self.inner.visit_some(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        let d = self.wrap(d);
        self.inner.visit_newtype_struct(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let seq = self.wrap(seq);
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let map = FilteredMap {
            map,
            rule: self.rule,
            mark: self.mark,
            pending: Rule::Keep,
        };
        self.inner.visit_map(map)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Filtered<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let seed = self.wrap(seed);
        self.inner.next_element_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// The keys of one object: skipped ones are consumed here, the others handed on with their rule.
struct FilteredMap<'m, A> {
    map: A,
    rule: Rule,
    mark: &'m Cell<bool>,
    /// The rule of the key last handed on, for its value.
    pending: Rule,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilteredMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            let rule = self.rule.for_key(key.as_str(), self.mark);
            if matches!(rule, Rule::Skip) {
                self.map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.pending = rule;
            return match key {
                Key::Borrowed(k) => seed.deserialize(BorrowedStrDeserializer::new(k)),
                Key::Owned(k) => seed.deserialize(StringDeserializer::new(k)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let seed = Filtered {
            inner: seed,
            rule: self.pending,
            mark: self.mark,
        };
        self.map.next_value_seed(seed)
    }
}

/// An object key, borrowed from the input when it has no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(k) => k,
            Key::Owned(k) => k,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const RULE: Rule = Rule::Except(&[
        ("drop", Rule::Skip),
        ("inner", Rule::Only(&[("a", Rule::Keep)])),
        ("tags", Rule::MarkKey("m")),
        ("late", Rule::UnlessMarked(&Rule::Keep)),
    ]);

    fn filtered(text: &str) -> Value {
        let mut de = serde_json::Deserializer::from_str(text);
        deserialize(&mut de, RULE).unwrap_or_default()
    }

    #[test]
    fn skips_and_keeps_by_rule() {
        let v = filtered(
            r#"{"drop": {"big": [1, 2]}, "keep": [1, {"x": "y"}],
                "inner": [{"a": 1, "b": 2}, {"b": 3}], "late": 1}"#,
        );
        assert_eq!(
            v,
            json!({"keep": [1, {"x": "y"}], "inner": [{"a": 1}, {}], "late": 1})
        );
    }

    #[test]
    fn a_mark_skips_later_values_only() {
        let marked = filtered(r#"{"tags": {"m": "1"}, "late": 1}"#);
        assert_eq!(marked, json!({"tags": {"m": "1"}}));
        let before = filtered(r#"{"late": 1, "tags": {"m": "1"}}"#);
        assert_eq!(before, json!({"late": 1, "tags": {"m": "1"}}));
    }

    #[test]
    fn escaped_keys_are_matched_too() {
        let v = filtered(r#"{"dr\u006fp": 1, "k\"ey": 2}"#);
        assert_eq!(v, json!({"k\"ey": 2}));
    }
}
