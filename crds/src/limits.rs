//! Size bounds on user input that the operator walks (docs/operations.md "Webhook limits").
//!
//! The CRD schema carries the map bounds as `maxProperties`, so the apiserver rejects an
//! oversized object before any webhook sees it; validation checks the same bounds again because
//! the webhook endpoint can be reached directly and the core must not trust a bypassed webhook.

/// Most packages in one NodeWright (`spec.packages`, CRD `maxProperties`).
pub const MAX_PACKAGES: usize = 1000;

/// Most `dependsOn` entries of one package (CRD `maxProperties`); never more than there can be
/// packages to depend on.
pub const MAX_DEPENDS_ON: usize = MAX_PACKAGES;

/// Most `configInterrupts` entries of one package (CRD `maxProperties`).
pub const MAX_CONFIG_INTERRUPTS: usize = 1000;

/// Most glob matches one package may need at admission: `configInterrupts` globs (keys with a
/// `*` that are not themselves `configMap` keys) times `configMap` keys.
pub const MAX_GLOB_CHECKS: usize = 100_000;

/// Most `*` wildcards in one `configInterrupts` glob; the matcher's depth and time grow with it.
pub const MAX_GLOB_WILDCARDS: usize = 64;

/// The first `max` characters of `text`, with an ellipsis when cut (for error messages that
/// quote user input).
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}
