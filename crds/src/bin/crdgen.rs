//! Writes `chart/files/crds/*.yaml` from the Rust types; `--check` fails when the files are stale.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../chart/files/crds");
    let mut stale = Vec::new();
    for (file, crd) in nodewright_crds::crdgen::all() {
        let path = dir.join(file);
        let yaml = nodewright_crds::crdgen::to_yaml(&crd);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == yaml {
            continue;
        }
        if check {
            stale.push(path.display().to_string());
        } else if let Err(e) =
            std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, yaml))
        {
            eprintln!("crdgen: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        } else {
            println!("wrote {}", path.display());
        }
    }
    if stale.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "crdgen: stale CRDs (run `cargo run -p nodewright-crds --bin crdgen`): {stale:?}"
        );
        ExitCode::FAILURE
    }
}
