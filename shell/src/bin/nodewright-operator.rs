//! `nodewright-operator`: the NodeWright operator process; `nodewright-operator cleanup` removes
//! what would stay stuck after an uninstall (the chart's post-delete hook).

fn main() -> std::process::ExitCode {
    // Before any thread exists (docs/performance.md, "Executor slimming").
    nodewright_shell::trim::limit_arenas();
    nodewright_shell::trim::pin_mmap_threshold();
    if std::env::args().nth(1).as_deref() == Some("cleanup") {
        return nodewright_shell::cleanup::main();
    }
    nodewright_shell::operator::main()
}
