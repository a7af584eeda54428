//! NodeWright's deterministic cluster simulator: a virtual-time apiserver, Job controller,
//! kubelets and nodes that drive the real `nodewright_core::reconcile` through the shell's own
//! effect interpreter, snapshot assembly and pass scheduling (over an in-memory cluster port), with injectable faults, invariant checks after every step,
//! scenario files, JSONL traces with replay, and timelines.

pub mod actions;
pub mod admission;
pub mod crash_points;
pub mod cycles;
pub mod expect;
pub mod explore;
pub mod facts;
pub mod invariants;
pub mod leader;
pub mod logs;
pub mod objects;
pub mod operator;
pub mod port;
pub mod rng;
pub mod scenario;
pub mod selector;
pub mod sim;
pub mod snapshot;
pub mod store;
pub mod time;
pub mod timeline;
pub mod trace;
pub mod windows;
pub mod world;
