//! Embeds every scenario (`scenarios/**/*.yaml`) and its snapshot in the
//! `mcp-conformance` executable, so an installed copy runs the suite with no
//! source tree (`mcp-conformance scenarios`).
//!
//! `conformance/scenarios` is a symbolic link to the workspace's
//! `scenarios/`: the files stay where the scenario tests and their insta
//! snapshots expect them, and `cargo package` copies them into the package,
//! so a crate built from the registry embeds the same suite. The code it
//! writes comes from `src/suite/embed.rs`, which the library's tests check.

use std::path::PathBuf;

#[path = "src/suite/embed.rs"]
mod embed;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("scenarios");
    println!("cargo::rerun-if-changed={}", root.display());
    let (code, read) = embed::generate(&root);
    for path in read {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("embedded_scenarios.rs"), code)
        .unwrap_or_else(|error| panic!("cannot write embedded_scenarios.rs: {error}"));
}
