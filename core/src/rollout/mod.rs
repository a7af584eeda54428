//! DeploymentPolicy rollouts (05-rollout.md): compartments, budgets, strategies and batches.
