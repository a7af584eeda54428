//! Finalizer and NodeWright deletion (02-lifecycle.md §14).

use nodewright_crds::keys;

use super::ctx::Ctx;
use super::view::NwView;
use super::work::Slot;
use crate::effect::Effect;

/// R6.2; true when the pass must end (finalizer added or removed, or deletion blocked).
pub fn run(ctx: &mut Ctx, v: &NwView) -> bool {
    let has = v
        .nw
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == keys::FINALIZER));
    if !v.deleting {
        if !has {
            ctx.work.push(
                Slot::Before,
                Effect::AddFinalizer {
                    nodewright: v.name.clone(),
                    uid: v.uid.clone(),
                },
            );
        }
        return false;
    }
    false
}
