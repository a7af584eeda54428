//! The validating webhook in front of the simulated apiserver: NodeWright edits on a scenario's
//! timeline pass the same checks the operator's webhook runs (01-api.md §4.3, U1–U5), so a random or
//! hand-written edit the real cluster would refuse is refused here too instead of wedging the run.

use nodewright_crds::NodeWright;
use nodewright_crds::validation::{validate_nodewright, validate_nodewright_update};
use serde_json::Value;

use crate::actions::Action;
use crate::objects::Kind;
use crate::world::World;

/// Checks a timeline action as the admission webhook would; `Err` carries the denial message.
/// Actions on other kinds, and edits of objects that do not exist (the store reports those), pass.
pub fn admit(world: &World, action: &Action) -> Result<(), String> {
    match action {
        Action::Patch {
            kind, name, patch, ..
        } if Kind::parse(kind) == Some(Kind::NodeWright) => {
            let Some(old) = world.store.get::<NodeWright>(None, name) else {
                return Ok(());
            };
            let mut value = serde_json::to_value(old).map_err(|e| e.to_string())?;
            nodewright_shell::merge::apply(&mut value, patch);
            check(old, value)
        }
        Action::Apply { object }
            if object.get("kind").and_then(Value::as_str) == Some("NodeWright") =>
        {
            let name = object.pointer("/metadata/name").and_then(Value::as_str);
            match name.and_then(|n| world.store.get::<NodeWright>(None, n)) {
                Some(old) => check(old, object.clone()),
                None => {
                    let new: NodeWright =
                        serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
                    validate_nodewright(&new).map_err(|e| e.to_string())
                }
            }
        }
        _ => Ok(()),
    }
}

fn check(old: &NodeWright, new: Value) -> Result<(), String> {
    let new: NodeWright = serde_json::from_value(new).map_err(|e| e.to_string())?;
    validate_nodewright_update(old, &new)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn world_with(spec: Value) -> World {
        let mut world = World::default();
        let object = json!({
            "apiVersion": "nodewright.nvidia.com/v1alpha1",
            "kind": "NodeWright",
            "metadata": {"name": "nw"},
            "spec": spec,
        });
        crate::actions::apply_object(&mut world, object).expect("valid fixture");
        world
    }

    fn patch(p: Value) -> Action {
        Action::Patch {
            kind: "NodeWright".into(),
            name: "nw".into(),
            namespace: None,
            patch: p,
        }
    }

    #[test]
    fn admission_denies_a_version_bump_that_breaks_depends_on() {
        let world = world_with(json!({"packages": {
            "alpha": {"version": "1.0.0", "image": "r/alpha"},
            "bravo": {"version": "1.0.0", "image": "r/bravo", "dependsOn": {"alpha": "1.0.0"}},
        }}));
        let bump = json!({"spec": {"packages": {"alpha": {"version": "1.1.0"}}}});
        assert!(admit(&world, &patch(bump)).is_err());
        let both = json!({"spec": {"packages": {
            "alpha": {"version": "1.1.0"},
            "bravo": {"dependsOn": {"alpha": "1.1.0"}},
        }}});
        assert_eq!(admit(&world, &patch(both)), Ok(()));
    }

    #[test]
    fn admission_passes_annotation_edits_and_other_kinds() {
        let world =
            world_with(json!({"packages": {"alpha": {"version": "1.0.0", "image": "r/a"}}}));
        let pause = json!({"metadata": {"annotations": {"nodewright.nvidia.com/pause": "true"}}});
        assert_eq!(admit(&world, &patch(pause)), Ok(()));
        let node = Action::Patch {
            kind: "Node".into(),
            name: "n1".into(),
            namespace: None,
            patch: json!({"spec": {"unschedulable": true}}),
        };
        assert_eq!(admit(&world, &node), Ok(()));
    }
}
