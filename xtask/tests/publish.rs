//! The crates are ready for crates.io (docs/releasing.md): each has the
//! metadata the registry shows, its licenses and README inside the package,
//! and `mcp-conformance`'s package holds the scenarios and the contract its
//! build script embeds. The full `cargo package --workspace --exclude xtask`
//! (every crate built from its package) takes many minutes, so it is a step
//! of the release recipe, not of the test suite; `cargo package --list`
//! reads the same file selection in a fraction of a second.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

/// The crates published, in dependency order.
const CRATES: [&str; 5] = [
    "mcp-stdio-process",
    "mcp-conformance-report",
    "mcp-fixtures",
    "mcp-stdio-client",
    "mcp-conformance",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace());
    command
}

fn packages() -> Vec<Value> {
    let output = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "cargo metadata failed");
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    metadata["packages"].as_array().unwrap().clone()
}

/// The files `cargo package` would put in `name`'s package.
fn package_list(name: &str) -> Vec<String> {
    let output = cargo()
        .args(["package", "--list", "--allow-dirty", "-p", name])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo package --list -p {name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_published_crate_has_the_registrys_metadata_and_its_licenses() {
    let packages = packages();
    let names: Vec<&str> = packages
        .iter()
        .map(|package| package["name"].as_str().unwrap())
        .collect();
    for name in CRATES {
        assert!(names.contains(&name), "no crate {name} in the workspace");
    }
    for package in &packages {
        let name = package["name"].as_str().unwrap();
        if name == "xtask" {
            assert_eq!(
                package["publish"],
                serde_json::json!([]),
                "xtask is never published"
            );
            continue;
        }
        assert!(
            CRATES.contains(&name),
            "{name} is not in the publishing order"
        );
        assert!(package["publish"].is_null(), "{name} is publishable");
        for field in ["description", "license", "repository", "readme"] {
            let value = package[field].as_str().unwrap_or_default();
            assert!(!value.trim().is_empty(), "{name} has no {field}");
        }
        assert_eq!(package["license"], "MIT OR Apache-2.0", "{name}");
        let keywords = package["keywords"].as_array().unwrap();
        assert!(
            (1..=5).contains(&keywords.len()),
            "{name}: crates.io takes 1 to 5 keywords, not {}",
            keywords.len()
        );
        assert!(
            !package["categories"].as_array().unwrap().is_empty(),
            "{name} has no category"
        );
        let files = package_list(name);
        for file in ["LICENSE-MIT", "LICENSE-APACHE", "Cargo.toml"] {
            assert!(
                files.iter().any(|listed| listed == file),
                "{name}'s package lacks {file}"
            );
        }
        // The readme, wherever the manifest points, lands as README.md.
        assert!(
            files.iter().any(|listed| listed == "README.md"),
            "{name}'s package lacks its readme"
        );
    }
}

#[test]
fn the_report_package_holds_the_contract() {
    let files = package_list("mcp-conformance-report");
    assert!(files.iter().any(|file| file == "contract.md"), "{files:?}");
}

#[test]
fn the_conformance_package_holds_every_scenario() {
    let files = package_list("mcp-conformance");
    assert!(files.iter().any(|file| file == "build.rs"), "{files:?}");
    let root = workspace().join("scenarios");
    let mut expected = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let relative = path.strip_prefix(&root).unwrap();
                expected.push(format!("scenarios/{}", relative.display()));
            }
        }
    }
    assert!(expected.len() > 40, "the scenarios: {}", expected.len());
    let missing: Vec<&String> = expected
        .iter()
        .filter(|file| !files.contains(file))
        .collect();
    assert!(missing.is_empty(), "not in the package: {missing:?}");
}
