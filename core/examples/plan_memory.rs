//! Heap held by the plan of a rollout's first batch: N fresh nodes × 5 packages, 20 % budget
//! (the scale harness's fleet). Prints, per effect kind, the count and the heap its effects hold.
//!
//! Run: `cargo run --release -p nodewright-core --example plan_memory -- 10000`

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use nodewright_core::{Effect, Options, Snapshot, reconcile, shared};

#[path = "../benches/fleet/mod.rs"]
mod fleet;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The scale harness's fleet: NodeWright `scale` (priority 0, the derived
/// `NodeWrightSpec::default()`'s), 20 % budget, 5 packages, and `nodes` fresh nodes.
fn scale_fleet(nodes: usize) -> Snapshot {
    Snapshot {
        nodewrights: shared([fleet::nodewright("scale", 0, 20, 5)]),
        nodes: shared((0..nodes).map(fleet::node)),
        ..Snapshot::default()
    }
}

fn main() {
    let nodes = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let mut snapshot = scale_fleet(nodes);
    let options = Options::default();
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    // The first pass writes the statuses; the second selects the first batch and starts it.
    for pass in 1..=4 {
        let before = LIVE.load(Relaxed);
        let started = std::time::Instant::now();
        let plan = reconcile(&snapshot, &options, now);
        let planned = started.elapsed();
        let held = LIVE.load(Relaxed).saturating_sub(before);
        let mib = |b: usize| b as f64 / 1_048_576.0;
        println!(
            "pass {pass}: {} effects in {planned:.1?}, plan holds {:.1} MiB",
            plan.effects.len(),
            mib(held)
        );
        let mut kinds: BTreeMap<&str, Vec<Effect>> = BTreeMap::new();
        for effect in plan.effects {
            kinds.entry(effect.kind()).or_default().push(effect);
        }
        let mut created = false;
        for (kind, effects) in kinds {
            let count = effects.len();
            for effect in &effects {
                if let Effect::PatchStatus { status, .. } = effect {
                    let nw = std::sync::Arc::make_mut(&mut snapshot.nodewrights[0]);
                    nw.status = Some((**status).clone());
                }
            }
            created |= kind == "CreateJob";
            let before = LIVE.load(Relaxed);
            drop(effects);
            let freed = before.saturating_sub(LIVE.load(Relaxed));
            println!(
                "  {kind}: {count} effects, {:.1} MiB ({} B each)",
                mib(freed),
                freed / count
            );
        }
        if created {
            break;
        }
    }
}
