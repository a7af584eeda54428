//! `nodewright-operator`: the NodeWright operator process.

fn main() -> std::process::ExitCode {
    nodewright_shell::operator::main()
}
