//! `nodewright-operator`: the NodeWright operator process; `nodewright-operator cleanup` removes
//! what would stay stuck after an uninstall (the chart's post-delete hook).

#[cfg(not(feature = "system-allocator"))]
use nodewright_shell::allocator::{CONF, Conf, Jemalloc};

#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: Jemalloc = Jemalloc;

/// jemalloc's options, read when it starts (shell/src/allocator.rs).
#[cfg(not(feature = "system-allocator"))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: Conf = CONF;

fn main() -> std::process::ExitCode {
    if std::env::args().nth(1).as_deref() == Some("cleanup") {
        return nodewright_shell::cleanup::main();
    }
    nodewright_shell::operator::main()
}
