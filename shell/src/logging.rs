//! Structured logs: JSON lines (`LOG_ENCODER=json`, default) or human-readable console output,
//! level from `LOG_LEVEL` (or `RUST_LOG` when set, for per-crate filters).

use tracing_subscriber::EnvFilter;

/// The filter for a `LOG_LEVEL`: our crates at that level, client libraries quieter.
pub fn filter_for(level: &str) -> String {
    let level = match level.to_ascii_lowercase().as_str() {
        "debug" | "trace" | "warn" | "error" | "info" => level.to_ascii_lowercase(),
        _ => "info".to_string(),
    };
    format!(
        "{level},kube_runtime=warn,kube_client=warn,hyper=warn,hyper_util=warn,rustls=warn,tower=warn"
    )
}

/// Installs the global subscriber.
pub fn init(encoder: &str, level: &str) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(filter_for(level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = if encoder == "console" {
        builder.try_init()
    } else {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    };
    // A second init (tests) keeps the first subscriber.
    drop(result);
}
