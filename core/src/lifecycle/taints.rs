//! Runtime-required taint: auto-taint (R3, §10.3) and removal (R8, §10.2).

use super::ctx::Ctx;
use super::view::NwView;

/// R3; true when anything was written.
pub fn auto_taint(_ctx: &mut Ctx, _views: &[NwView]) -> bool {
    false
}

/// R8.
pub fn remove_runtime_required(_ctx: &mut Ctx, _views: &[NwView]) {}
