//! Metric values of the pass (§12.7).

use super::ctx::Ctx;
use super::view::NwView;
use crate::plan::MetricSample;

/// Every gauge of every NodeWright, zero-filled.
pub fn collect(_ctx: &Ctx, _views: &[NwView]) -> Vec<MetricSample> {
    Vec::new()
}
