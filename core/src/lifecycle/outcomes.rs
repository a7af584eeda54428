//! Executor outcome recording (02-lifecycle.md §7.9; T4, T5, T9–T12, T20).

use super::ctx::Ctx;
use super::view::NwView;

/// Records finished, unprocessed executors into the working node state.
pub fn record(_ctx: &mut Ctx, _views: &[NwView]) {}
