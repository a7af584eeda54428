//! docs/rules.md resolves every rule id the code cites: each cited id and each test named after an
//! id has a row there, and the generated columns (where the id is cited, which tests are named
//! after it) match the tree. `NODEWRIGHT_UPDATE_RULES=1` rewrites those columns in place.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

/// Most places listed per id; the rest is counted.
const MAX_LISTED: usize = 6;
/// Crate directories scanned for citations and tests.
const SCANNED: [&str; 5] = ["crds", "core", "shell", "sim", "tests"];

/// One source file, relative to the repository root.
struct Source {
    path: String,
    text: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under the scanned crates, in path order (iterative walk).
fn sources(root: &Path) -> Vec<Source> {
    let mut stack: Vec<PathBuf> = SCANNED.iter().map(|d| root.join(d)).collect();
    let mut out = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && entry.file_name() != "target" {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push(Source {
                    path: rel,
                    text: fs::read_to_string(&path).unwrap(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn is_test_file(s: &Source) -> bool {
    s.path.contains("/tests/") || s.path.ends_with("/tests.rs") || s.path.starts_with("tests/")
}

/// The item a citation on line `i` belongs to: the next item for a `///` comment, the module for
/// `//!`, otherwise the enclosing (nearest preceding) function.
fn owner(lines: &[&str], i: usize, item: &Regex) -> Option<String> {
    let line = lines[i].trim_start();
    if line.starts_with("//!") {
        return None;
    }
    if line.starts_with("///") {
        return lines[i + 1..]
            .iter()
            .take(40)
            .find_map(|l| item.captures(l))
            .map(|c| c[1].to_string());
    }
    lines[..=i]
        .iter()
        .rev()
        .find_map(|l| item.captures(l))
        .map(|c| c[1].to_string())
}

/// Citations outside tests: id → places (`path` or `path::item`).
fn citations(src: &[Source], id: &Regex) -> BTreeMap<String, BTreeSet<String>> {
    let item = Regex::new(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:const\s+)?(?:fn|struct|enum|trait|const|type)\s+([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in src.iter().filter(|s| !is_test_file(s)) {
        let body = s.text.split("#[cfg(test)]").next().unwrap_or_default();
        let lines: Vec<&str> = body.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            for m in id.find_iter(line) {
                let place = match owner(&lines, i, &item) {
                    Some(name) => format!("{}::{name}", s.path),
                    None => s.path.clone(),
                };
                out.entry(m.as_str().to_string()).or_default().insert(place);
            }
        }
    }
    out
}

/// Test functions named after ids (`d18_…`, `b1_inv16_3_e04_…`, `a01_…`): id → test names; plus
/// simulator scenarios `sim/scenarios/aNN-*.yaml`.
fn named_tests(src: &[Source], root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let func = Regex::new(r"\bfn ([a-z][a-z0-9_]*)").unwrap();
    let token = Regex::new(r"^([abdekmqt])0*([1-9][0-9]?)$").unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in src
        .iter()
        .filter(|s| is_test_file(s) || s.text.contains("#[cfg(test)]"))
    {
        let tests = if is_test_file(s) {
            s.text.as_str()
        } else {
            s.text.split("#[cfg(test)]").nth(1).unwrap_or("")
        };
        for c in func.captures_iter(tests) {
            let name = &c[1];
            for t in name.split('_').filter_map(|t| token.captures(t)) {
                let id = format!("{}{}", t[1].to_uppercase(), &t[2]);
                out.entry(id).or_default().insert(name.to_string());
            }
        }
    }
    let scenarios = fs::read_dir(root.join("sim/scenarios"))
        .into_iter()
        .flatten()
        .flatten();
    for e in scenarios {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(t) = name
            .split(['-', '.'])
            .next()
            .and_then(|t| token.captures(t.trim_end_matches(char::is_alphabetic)))
        {
            let id = format!("{}{}", t[1].to_uppercase(), &t[2]);
            out.entry(id)
                .or_default()
                .insert(format!("sim/scenarios/{name}"));
        }
    }
    out
}

fn listed(items: Option<&BTreeSet<String>>) -> String {
    let Some(items) = items else {
        return String::from("—");
    };
    let mut cell: Vec<String> = items
        .iter()
        .take(MAX_LISTED)
        .map(|i| format!("`{i}`"))
        .collect();
    if items.len() > MAX_LISTED {
        cell.push(format!("and {} more", items.len() - MAX_LISTED));
    }
    cell.join(", ")
}

/// Splits rules.md into the text before the table and the rows (id, statement).
fn parse(doc: &str) -> (String, Vec<(String, String)>) {
    let mut head = String::new();
    let mut rows = Vec::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if line.starts_with("| ") && cells.len() >= 4 && !cells[1].is_empty() && cells[1] != "Id" {
            if !cells[1].starts_with("---") {
                rows.push((cells[1].trim_matches('*').to_string(), cells[2].to_string()));
            }
        } else if rows.is_empty() && !line.starts_with("| Id") && !line.starts_with("|---") {
            head.push_str(line);
            head.push('\n');
        }
    }
    (head, rows)
}

#[test]
fn rules_md_is_current() {
    let root = root();
    let path = root.join("docs/rules.md");
    let doc = fs::read_to_string(&path).expect("docs/rules.md exists");
    let (head, rows) = parse(&doc);
    let src = sources(&root);
    let id = Regex::new(r"\b(?:[ABDEKMQT][1-9][0-9]?|R[1-9](?:\.[1-9][a-z]?)?)\b").unwrap();
    let cited = citations(&src, &id);
    let tests = named_tests(&src, &root);

    let known: BTreeSet<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    let missing: Vec<&String> = cited
        .keys()
        .chain(tests.keys())
        .filter(|i| !known.contains(i.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "ids cited or used in test names without a row in docs/rules.md: {missing:?}"
    );

    let mut out = head;
    out.push_str("| Id | Rule | Cited in | Tests named after it |\n|---|---|---|---|\n");
    for (rule, statement) in &rows {
        out.push_str(&format!(
            "| **{rule}** | {statement} | {} | {} |\n",
            listed(cited.get(rule)),
            listed(tests.get(rule))
        ));
    }
    if std::env::var_os("NODEWRIGHT_UPDATE_RULES").is_some() {
        fs::write(&path, &out).unwrap();
    } else {
        assert!(
            out == doc,
            "docs/rules.md is stale: run NODEWRIGHT_UPDATE_RULES=1 cargo test -p nodewright-tests --test rules"
        );
    }
}
