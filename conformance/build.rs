//! Embeds every scenario (`scenarios/**/*.yaml`) and its snapshot in the
//! `mcp-conformance` executable, so an installed copy runs the suite with no
//! source tree (`mcp-conformance scenarios`).
//!
//! `conformance/scenarios` is a symbolic link to the workspace's
//! `scenarios/`: the files stay where the scenario tests and their insta
//! snapshots expect them, and `cargo package` copies them into the package,
//! so a crate built from the registry embeds the same suite.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("scenarios");
    println!("cargo::rerun-if-changed={}", root.display());
    let mut found = Vec::new();
    walk(&root, &root, &mut found);
    found.sort();
    let mut code = String::from("&[\n");
    for (name, path) in &found {
        println!("cargo::rerun-if-changed={}", path.display());
        let snapshot = root
            .join("snapshots")
            .join(format!("{}.snap", name.replace('/', "__")));
        println!("cargo::rerun-if-changed={}", snapshot.display());
        let snapshot = if snapshot.is_file() {
            format!("Some(include_str!({:?}))", snapshot.display().to_string())
        } else {
            "None".to_owned()
        };
        writeln!(
            code,
            "    Embedded {{ name: {name:?}, yaml: include_str!({:?}), snapshot: {snapshot} }},",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    code.push_str("]\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("embedded_scenarios.rs"), code)
        .unwrap_or_else(|error| panic!("cannot write embedded_scenarios.rs: {error}"));
}

/// Every `*.yaml` under `dir`, named as `scenario::discover` names them:
/// the path relative to `root`, without `.yaml`, dot-entries and
/// `snapshots/` skipped.
fn walk(root: &Path, dir: &Path, found: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()))
            .path();
        let file_name = path.file_name().expect("an entry has a name");
        if file_name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            if file_name != "snapshots" {
                walk(root, &path, found);
            }
        } else if path.extension().is_some_and(|ext| ext == "yaml") {
            let relative = path.strip_prefix(root).expect("walked from root");
            let name = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            found.push((name, path));
        }
    }
}
