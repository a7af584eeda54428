//! Crash points named by what the plan writes rather than by effect counts: `crashBefore:
//! state-recorded` crashes the operator right before the first write of each Job's
//! `nodewright.nvidia.com/state-recorded` marker (once per Job), so every outcome is recorded in
//! node state by one operator life and its marker written by the next.

use std::collections::BTreeSet;

use nodewright_core::Effect;
use nodewright_crds::keys;

/// The Jobs (name, uid) whose marker write the operator already crashed before.
#[derive(Clone, Debug, Default)]
pub struct MarkerCrashes {
    done: BTreeSet<(String, String)>,
}

impl MarkerCrashes {
    /// Index of the first effect in `effects` that sets annotation `nodewright.nvidia.com/<marker>`
    /// on a Job not crashed before yet, and remembers that Job; `None` when there is none.
    pub fn next(&mut self, marker: &str, effects: &[Effect]) -> Option<usize> {
        let key = format!("{}/{marker}", keys::PREFIX);
        let (index, job) = effects.iter().enumerate().find_map(|(i, e)| match e {
            Effect::PatchJob {
                name,
                uid,
                annotations,
                ..
            } if annotations.get(&key).is_some_and(Option::is_some)
                && !self.done.contains(&(name.clone(), uid.clone())) =>
            {
                Some((i, (name.clone(), uid.clone())))
            }
            _ => None,
        })?;
        self.done.insert(job);
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_core::Context;

    fn marker(name: &str, uid: &str) -> Effect {
        Effect::PatchJob {
            name: name.into(),
            uid: uid.into(),
            suspend: None,
            ttl_seconds_after_finished: Some(3600),
            annotations: [(keys::STATE_RECORDED.to_string(), Some("true".to_string()))].into(),
            context: Context::default(),
        }
    }

    #[test]
    fn crashes_before_each_jobs_marker_once() {
        let other = Effect::AddFinalizer {
            nodewright: "demo".into(),
            uid: "u".into(),
        };
        let plan = vec![other.clone(), marker("a", "1"), marker("b", "2")];
        let mut crashes = MarkerCrashes::default();
        assert_eq!(crashes.next("state-recorded", &plan), Some(1));
        assert_eq!(crashes.next("state-recorded", &plan), Some(2), "next Job");
        assert_eq!(crashes.next("state-recorded", &plan), None, "each once");
        let recreated = vec![marker("a", "3")];
        assert_eq!(
            crashes.next("state-recorded", &recreated),
            Some(0),
            "new uid"
        );
        assert_eq!(crashes.next("other-marker", &[marker("c", "4")]), None);
        assert_eq!(
            MarkerCrashes::default().next("state-recorded", &[other]),
            None
        );
    }
}
