//! NodeWright's shell: everything that talks to the cluster. Watches feed a [`Snapshot`] to the
//! pure core, the [`interpret::Interpreter`] applies the resulting plan, and the process serves
//! admission webhooks, metrics and probes.
//!
//! [`Snapshot`]: nodewright_core::Snapshot

/// The kind-naming functions of `kube::Resource` for a wrapper of `K`, answered by `K`'s own
/// (used inside `impl Resource for Wrapper<K>`).
macro_rules! resource_kind_of {
    ($k:ident) => {
        fn kind(dt: &$k::DynamicType) -> std::borrow::Cow<'_, str> {
            $k::kind(dt)
        }

        fn group(dt: &$k::DynamicType) -> std::borrow::Cow<'_, str> {
            $k::group(dt)
        }

        fn version(dt: &$k::DynamicType) -> std::borrow::Cow<'_, str> {
            $k::version(dt)
        }

        fn api_version(dt: &$k::DynamicType) -> std::borrow::Cow<'_, str> {
            $k::api_version(dt)
        }

        fn plural(dt: &$k::DynamicType) -> std::borrow::Cow<'_, str> {
            $k::plural(dt)
        }
    };
}

pub mod allocator;
pub mod args;
pub mod cache;
pub mod cleanup;
pub mod cli;
pub mod client;
pub mod error;
pub mod health;
pub mod interpret;
pub mod leader;
pub mod logging;
pub mod merge;
pub mod metrics;
pub mod metrics_auth;
pub mod metrics_format;
pub mod metrics_process;
pub mod operator;
pub mod runner;
pub mod server;
pub mod trace;
pub mod version;
pub mod webhook;
