//! Reboot detection (R5, §8.8).

use super::ctx::Ctx;
use super::view::NwView;

/// R5; true when anything was written.
pub fn track(_ctx: &mut Ctx, _views: &[NwView]) -> bool {
    false
}
