//! Strategies with their defaults applied at read time, and the batch-size functions
//! (05-rollout.md §2.1, §5.3; 02-lifecycle.md §6.3).

use nodewright_crds::{BatchProcessingState, DeploymentStrategy, StrategyType};

use nodewright_crds::defaults;

/// Default `initialBatch`.
pub const DEFAULT_INITIAL_BATCH: i64 = defaults::DEFAULT_INITIAL_BATCH as i64;
/// Default linear `delta`.
pub const DEFAULT_DELTA: i64 = defaults::DEFAULT_DELTA as i64;
/// Default exponential `growthFactor`.
pub const DEFAULT_GROWTH_FACTOR: i64 = defaults::DEFAULT_GROWTH_FACTOR as i64;
/// Default `batchThreshold` (percent).
pub const DEFAULT_BATCH_THRESHOLD: i64 = defaults::DEFAULT_BATCH_THRESHOLD as i64;
/// Default `safetyLimit` (percent).
pub const DEFAULT_SAFETY_LIMIT: i64 = defaults::DEFAULT_SAFETY_LIMIT as i64;

/// How a strategy grows its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// Every batch is `initialBatch`.
    Fixed,
    /// `+delta` after a passing batch, `−delta` after a failing one below the safety limit.
    Linear {
        /// Step size.
        delta: i64,
    },
    /// `×growthFactor` after a passing batch, `÷growthFactor` after a failing one below the limit.
    Exponential {
        /// Multiplier.
        growth_factor: i64,
    },
}

/// A strategy with every default applied (the webhook may have been bypassed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strategy {
    /// Growth rule.
    pub growth: Growth,
    /// First batch size (≥ 1).
    pub initial_batch: i64,
    /// Minimum success percentage of a passing batch.
    pub batch_threshold: i64,
    /// Consecutive failed batches that stop the compartment; `None` never stops.
    pub failure_threshold: Option<i64>,
    /// Progress percentage at or above which failures neither shrink nor stop.
    pub safety_limit: i64,
}

impl Strategy {
    /// Resolves the API object: the first set variant (fixed, linear, exponential) with defaults
    /// filled and values clamped to the schema ranges; `None` when no variant is set.
    pub fn resolve(spec: &DeploymentStrategy) -> Option<Self> {
        if let Some(f) = &spec.fixed {
            Some(Self::with(
                Growth::Fixed,
                f.initial_batch,
                f.batch_threshold,
                f.failure_threshold,
                f.safety_limit,
            ))
        } else if let Some(l) = &spec.linear {
            let delta = opt(l.delta, DEFAULT_DELTA).max(1);
            Some(Self::with(
                Growth::Linear { delta },
                l.initial_batch,
                l.batch_threshold,
                l.failure_threshold,
                l.safety_limit,
            ))
        } else if let Some(e) = &spec.exponential {
            let growth_factor = opt(e.growth_factor, DEFAULT_GROWTH_FACTOR).max(2);
            Some(Self::with(
                Growth::Exponential { growth_factor },
                e.initial_batch,
                e.batch_threshold,
                e.failure_threshold,
                e.safety_limit,
            ))
        } else {
            None
        }
    }

    /// A fixed strategy of `initial_batch` with all other defaults (the legacy compartment).
    pub fn fixed(initial_batch: i64) -> Self {
        Self::with(
            Growth::Fixed,
            Some(initial_batch.clamp(1, i64::from(i32::MAX)) as i32),
            None,
            None,
            None,
        )
    }

    fn with(
        growth: Growth,
        initial_batch: Option<i32>,
        batch_threshold: Option<i32>,
        failure_threshold: Option<i32>,
        safety_limit: Option<i32>,
    ) -> Self {
        Self {
            growth,
            initial_batch: opt(initial_batch, DEFAULT_INITIAL_BATCH).max(1),
            batch_threshold: opt(batch_threshold, DEFAULT_BATCH_THRESHOLD).clamp(1, 100),
            failure_threshold: failure_threshold.map(|f| i64::from(f).max(1)),
            safety_limit: opt(safety_limit, DEFAULT_SAFETY_LIMIT).clamp(1, 100),
        }
    }

    /// The metric / tie-break name of this strategy.
    pub fn strategy_type(&self) -> StrategyType {
        match self.growth {
            Growth::Fixed => StrategyType::Fixed,
            Growth::Linear { .. } => StrategyType::Linear,
            Growth::Exponential { .. } => StrategyType::Exponential,
        }
    }

    /// `CalculateBatchSize(total, state)` (05-rollout.md §5.3).
    pub fn batch_size(&self, total: i64, state: &BatchProcessingState) -> i64 {
        let processed = i64::from(state.completed_nodes) + i64::from(state.failed_nodes);
        let remaining = total - processed;
        let last = i64::from(state.last_batch_size);
        let shrink = state.last_batch_failed && progress(processed, total) < self.safety_limit;
        let size = match self.growth {
            Growth::Fixed => self.initial_batch,
            Growth::Linear { .. } | Growth::Exponential { .. } if total <= 0 => return 0,
            _ if last <= 0 => self.initial_batch,
            Growth::Linear { delta } if shrink => (last - delta).max(1),
            Growth::Linear { delta } => last.saturating_add(delta),
            Growth::Exponential { growth_factor } if shrink => (last / growth_factor).max(1),
            Growth::Exponential { growth_factor } => last.saturating_mul(growth_factor).min(total),
        };
        size.min(remaining).max(1)
    }
}

/// `floor(processed × 100 / total)`, 0 when `total` is 0.
pub fn progress(processed: i64, total: i64) -> i64 {
    if total <= 0 {
        0
    } else {
        processed.saturating_mul(100) / total
    }
}

/// Tie-break rank: fixed 0 < linear 1 < exponential 2 < no strategy 999 (05-rollout.md §4.2).
pub fn safety_rank(strategy: Option<&Strategy>) -> u32 {
    match strategy.map(Strategy::strategy_type) {
        Some(StrategyType::Fixed) => 0,
        Some(StrategyType::Linear) => 1,
        Some(StrategyType::Exponential) => 2,
        Some(StrategyType::Unknown) | None => 999,
    }
}

fn opt(value: Option<i32>, default: i64) -> i64 {
    value.map_or(default, i64::from)
}
