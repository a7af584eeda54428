//! Random repeated uninstall cycles for `explore` (issue 13, finding 7): one package version is
//! uninstalled, the uninstall cancelled, reinstalled and uninstalled again, so executors of an
//! earlier cycle still hold the deterministic Job names when a later cycle needs them.

use serde_json::{Value, json};

use crate::actions::{Action, TimedAction};
use crate::rng::Rng;
use crate::time::Dur;

/// Probability that a random scenario gets uninstall cycles.
pub const CHANCE: f64 = 0.3;

/// With [`CHANCE`], turns on `uninstall.enabled` for one package of NodeWright `objects[0]` that
/// no other package depends on, and
/// returns 2–5 timed `uninstall.apply` flips of it (true, false, true, ...) between 10 s and
/// `until`, 5–90 s apart, so some land while an uninstall or uninstall-interrupt runs (a cancel)
/// and some after a cycle finished. Draws from `rng` only after every other random choice, so
/// seeds without cycles stay as they were.
pub fn uninstall_cycles(rng: &mut Rng, objects: &mut [Value], until: u64) -> Vec<TimedAction> {
    if !rng.chance(CHANCE) {
        return Vec::new();
    }
    let Some(nw) = objects.first_mut() else {
        return Vec::new();
    };
    let name = nw["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Only packages nothing depends on: an uninstalled dependency would (rightly) keep its
    // dependents from ever installing, and the rollout from converging.
    let spec = nw["spec"]["packages"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let packages: Vec<String> = spec
        .keys()
        .filter(|name| {
            !spec
                .values()
                .any(|p| p.pointer(&format!("/dependsOn/{name}")).is_some())
        })
        .cloned()
        .collect();
    let Some(package) = rng.pick(&packages).cloned() else {
        return Vec::new();
    };
    nw["spec"]["packages"][&package]["uninstall"] = json!({"enabled": true});
    let flips = rng.range(2, 5);
    let mut at = 10_000;
    let mut out = Vec::new();
    for i in 0..flips {
        at += rng.range(5, 90) * 1000;
        if at > until {
            break;
        }
        let apply = i % 2 == 0;
        out.push(TimedAction {
            at: Dur(at),
            action: Action::Patch {
                kind: "NodeWright".into(),
                name: name.clone(),
                namespace: None,
                patch: json!({"spec": {"packages": {
                    package.as_str(): {"uninstall": {"enabled": true, "apply": apply}}}}}),
            },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> Vec<Value> {
        vec![json!({"metadata": {"name": "nw0"}, "spec": {"packages": {
            "alpha": {"version": "1.0.0"},
            "bravo": {"version": "1.0.0", "dependsOn": {"alpha": "1.0.0"}},
            "charlie": {"version": "1.0.0"}}}})]
    }

    #[test]
    fn cycles_alternate_apply_and_enable_uninstall() {
        let mut hit = 0;
        for seed in 0..200 {
            let mut objs = objects();
            let actions = uninstall_cycles(&mut Rng::new(seed), &mut objs, 400_000);
            if actions.is_empty() {
                continue;
            }
            hit += 1;
            let flips: Vec<bool> = actions
                .iter()
                .map(|a| match &a.action {
                    Action::Patch { patch, .. } => {
                        let p = patch["spec"]["packages"].as_object().unwrap();
                        p.values().next().unwrap()["uninstall"]["apply"] == json!(true)
                    }
                    _ => panic!("not a patch"),
                })
                .collect();
            assert!(flips[0]);
            assert!(flips.windows(2).all(|w| w[0] != w[1]));
            assert!(actions.windows(2).all(|w| w[0].at.0 < w[1].at.0));
            let pkgs = objs[0]["spec"]["packages"].as_object().unwrap();
            assert!(
                pkgs.values()
                    .any(|p| p["uninstall"]["enabled"] == json!(true))
            );
            assert!(
                pkgs["alpha"].get("uninstall").is_none(),
                "alpha has a dependent"
            );
        }
        assert!(hit > 20, "only {hit} of 200 seeds got cycles");
    }
}
