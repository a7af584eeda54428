//! `deployment-policy reset <nodewright>` (06-operations.md §1.7).

use anyhow::Result;
use kube::api::{Api, Patch, PatchParams};
use nodewright_crds::NodeWright;

use super::{Global, client, confirm_destructive};

/// Resets every compartment's batch state (explicit zeros); nodes and `nodePriority` untouched.
pub async fn reset(g: &Global, name: &str, confirm: bool) -> Result<()> {
    let api: Api<NodeWright> = Api::all(client(g).await?);
    let nw = api.get(name).await?;
    let comps = nw
        .status
        .as_ref()
        .map(|s| s.compartment_statuses.clone())
        .unwrap_or_default();
    if comps.is_empty() {
        println!("NodeWright {name:?} has no compartment statuses to reset");
        return Ok(());
    }
    let with_state = comps.values().filter(|c| c.batch_state.is_some()).count();
    println!(
        "NodeWright: {name}\nCompartments: {} total, {with_state} with batch state\nCurrent batch state:",
        comps.len()
    );
    for (c, s) in &comps {
        let b = s.batch_state.clone().unwrap_or_default();
        println!(
            "  - {c}: batch {}, {} completed, {} failed",
            b.current_batch, b.completed_nodes, b.failed_nodes
        );
    }
    if g.dry_run {
        println!(
            "\nWould reset to: CurrentBatch: 1, ConsecutiveFailures: 0, CompletedNodes: 0, FailedNodes: 0, ShouldStop: false"
        );
        println!("\n[dry-run] No changes applied");
        return Ok(());
    }
    if !confirm {
        let q = format!(
            "This will reset the batch state for NodeWright {name:?}.\nThe next reconciliation will start from batch 1.\nContinue?"
        );
        if !confirm_destructive(&q, &mut std::io::stdin().lock())? {
            println!("Aborted");
            return Ok(());
        }
    }
    let body = nodewright_core::rollout::cli_reset_patch(&comps, false);
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    println!("Successfully reset batch state for NodeWright {name:?}");
    Ok(())
}
