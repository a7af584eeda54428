//! Package ConfigMaps and config updates (R6.4c, §9).

use super::ctx::Ctx;
use super::view::NwView;

/// R6.4c; true when a config update committed (End 2 s, B3).
pub fn sync(_ctx: &mut Ctx, _v: &NwView) -> bool {
    false
}
