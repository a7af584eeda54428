//! Where a plan's Events go (02-lifecycle.md §13.7: an Event is emitted only after the write it
//! describes succeeded). The interpreters send an Event only if the write right before it
//! happened, so the core puts each Event right after its write.

use std::collections::BTreeMap;

use super::work::EventAnchor;
use crate::effect::Effect;

/// §13.7: every Event goes right after the write it describes, so the interpreters send it only
/// if that write happened: a node's Event after the node's state patch (without one, after the
/// node's last write), a NodeWright's after its status patch. An Event with no such write in the
/// plan reports an observation and goes first, where nothing can hold it back. Events keep their
/// order among themselves.
pub fn place_events(effects: &mut Vec<Effect>, events: Vec<(EventAnchor, Effect)>) {
    if events.is_empty() {
        return;
    }
    let positions: Vec<Option<usize>> = {
        let mut state_write: BTreeMap<&str, usize> = BTreeMap::new();
        let mut last_write: BTreeMap<&str, usize> = BTreeMap::new();
        let mut status_write: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, e) in effects.iter().enumerate() {
            match e {
                Effect::PatchNode(p) => _ = state_write.insert(&p.node, i),
                Effect::PatchStatus { nodewright, .. } => _ = status_write.insert(nodewright, i),
                _ => {}
            }
            if let Some(node) = e.node() {
                last_write.insert(node, i);
            }
        }
        events
            .iter()
            .map(|(anchor, _)| match anchor {
                EventAnchor::Node(n) => state_write.get(n.as_str()).or(last_write.get(n.as_str())),
                EventAnchor::NodeWright(w) => status_write.get(w.as_str()),
            })
            .map(Option::<&usize>::copied)
            .collect()
    };
    let mut after: Vec<Vec<Effect>> = effects.iter().map(|_| Vec::new()).collect();
    let mut first = Vec::new();
    for ((_, event), at) in events.into_iter().zip(positions) {
        match at {
            Some(i) => after[i].push(event),
            None => first.push(event),
        }
    }
    let writes = std::mem::replace(effects, first);
    for (write, events) in writes.into_iter().zip(after) {
        effects.push(write);
        effects.extend(events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::{Context, EventSpec, NodePatch, ObjectRef};
    use nodewright_crds::NodeWrightStatus;

    fn event(name: &str) -> Effect {
        Effect::Event(Box::new(EventSpec {
            regarding: ObjectRef {
                kind: "Node".into(),
                name: name.into(),
                namespace: None,
                uid: None,
            },
            warning: false,
            reason: "R".into(),
            action: "A".into(),
            message: name.into(),
        }))
    }

    fn patch(node: &str) -> Effect {
        Effect::PatchNode(Box::new(NodePatch {
            node: node.into(),
            ..NodePatch::default()
        }))
    }

    fn evict(node: &str) -> Effect {
        Effect::Evict {
            namespace: "ns".into(),
            name: format!("pod-{node}"),
            uid: "u".into(),
            delete_instead: false,
            grace_period_seconds: None,
            context: Context {
                node: Some(node.into()),
                ..Context::default()
            },
        }
    }

    fn status(nw: &str) -> Effect {
        Effect::PatchStatus {
            nodewright: nw.into(),
            status: Box::new(NodeWrightStatus::default()),
        }
    }

    fn labels(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .map(|e| match e {
                Effect::Event(ev) => format!("event:{}", ev.message),
                Effect::PatchNode(p) => format!("patch:{}", p.node),
                Effect::PatchStatus { nodewright, .. } => format!("status:{nodewright}"),
                other => format!("{}:{}", other.kind(), other.node().unwrap_or("-")),
            })
            .collect()
    }

    /// §13.7: each Event follows the write it describes — a node's state patch (even for an
    /// Event regarding the NodeWright), else the node's last write; a NodeWright's status patch;
    /// an Event with no write goes first. A failed last write of the plan then holds back only
    /// its own Events.
    #[test]
    fn r13_7_each_event_follows_the_write_it_describes() {
        let mut effects = vec![evict("n3"), patch("n1"), patch("n2"), status("nw")];
        let n = |s: &str| EventAnchor::Node(s.into());
        let events = vec![
            (n("n2"), event("n2-apply")),
            (EventAnchor::NodeWright("nw".into()), event("nw-transition")),
            (n("n1"), event("n1-apply")),
            (n("n3"), event("n3-drain")),
            (n("n9"), event("n9-observed")),
            (n("n2"), event("n2-on-nw")),
        ];
        place_events(&mut effects, events);
        assert_eq!(
            labels(&effects),
            [
                "event:n9-observed",
                "Evict:n3",
                "event:n3-drain",
                "patch:n1",
                "event:n1-apply",
                "patch:n2",
                "event:n2-apply",
                "event:n2-on-nw",
                "status:nw",
                "event:nw-transition",
            ]
        );
    }

    /// §13.7: a plan without Events is left as it is.
    #[test]
    fn r13_7_a_plan_without_events_is_unchanged() {
        let mut effects = vec![patch("n1"), status("nw")];
        place_events(&mut effects, Vec::new());
        assert_eq!(labels(&effects), ["patch:n1", "status:nw"]);
    }
}
