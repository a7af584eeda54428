//! Admission validation as pure functions (01-api.md §4.3–§4.6, decisions D1 and D9).
//!
//! The operator's webhooks, the core (re-validation when the webhook was bypassed), the CLI and
//! the simulator all call these. Every rejection is a typed [`ValidationError`] whose `Display`
//! is the exact message returned to the user. Packages are visited in key order, so the reported
//! error is deterministic when several packages are invalid.

mod error;
mod graph;
mod nodewright;
mod package;
mod policy;
mod update;

pub use error::ValidationError;
pub use graph::find_cycle;
pub use nodewright::{validate_nodewright, validate_policy_reference, validate_spec};
pub use package::{
    ImageSuffix, glob_matches, is_sha256_digest, is_valid_package_name, split_image_reference,
};
pub use policy::{validate_policy, validate_policy_delete};
pub use update::{is_fully_uninstalled, validate_nodewright_update};
