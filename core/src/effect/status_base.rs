//! §13.7 status precondition: a `PatchStatus` computed from snapshot version `v` expects `v`, or
//! the version our own finalizer write made of `v` (that write changes metadata only, so both
//! versions carry the same status). The shell and the simulator keep one of these per operator.

use std::collections::BTreeMap;

/// Per NodeWright, the last finalizer write that started from a known version (`from` → `to`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalizerChain {
    writes: BTreeMap<String, (String, String)>,
}

impl FinalizerChain {
    /// Records our finalizer write on `nodewright`: `from` is the version it was guarded on when
    /// that was the snapshot's (first attempt), `to` the version it produced; otherwise forgets.
    pub fn record(&mut self, nodewright: &str, from: Option<String>, to: Option<String>) {
        match (from, to) {
            (Some(from), Some(to)) => {
                self.writes.insert(nodewright.to_string(), (from, to));
            }
            _ => {
                self.writes.remove(nodewright);
            }
        }
    }

    /// The resourceVersion a status patch computed from snapshot version `rv` must expect.
    pub fn expected(&self, nodewright: &str, rv: String) -> String {
        match self.writes.get(nodewright) {
            Some((from, to)) if *from == rv => to.clone(),
            _ => rv,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r13_7_status_expects_the_version_our_finalizer_write_made() {
        let mut chain = FinalizerChain::default();
        assert_eq!(chain.expected("nw", "1".into()), "1");
        chain.record("nw", Some("1".into()), Some("2".into()));
        assert_eq!(chain.expected("nw", "1".into()), "2");
        assert_eq!(
            chain.expected("nw", "3".into()),
            "3",
            "a newer snapshot expects itself"
        );
        assert_eq!(chain.expected("other", "1".into()), "1");
        chain.record("nw", None, Some("4".into()));
        assert_eq!(
            chain.expected("nw", "1".into()),
            "1",
            "a retried write forgets the chain"
        );
    }
}
