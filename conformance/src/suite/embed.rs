//! The code `build.rs` writes to embed every scenario and its snapshot:
//! compiled into the build script by path, and into the library's tests, so
//! what the tests check is what the build runs. Standard library only (a
//! build script has no dependencies here).

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

/// The `&[Embedded]` expression for every scenario under `root`, sorted by
/// name, and the files it reads (for `rerun-if-changed`). Files are
/// embedded as bytes: one that is not UTF-8 fails as its own scenario when
/// it is run, instead of failing the build of the whole crate.
pub fn generate(root: &Path) -> (String, Vec<PathBuf>) {
    let mut found = Vec::new();
    walk(root, root, &mut found);
    found.sort();
    let mut code = String::from("&[\n");
    let mut read = Vec::new();
    for (name, path) in found {
        let snapshot = root
            .join("snapshots")
            .join(format!("{}.snap", name.replace('/', "__")));
        let snapshot_code = if snapshot.is_file() {
            format!("Some(include_bytes!({:?}))", snapshot.display().to_string())
        } else {
            "None".to_owned()
        };
        writeln!(
            code,
            "    Embedded {{ name: {name:?}, yaml: include_bytes!({:?}), snapshot: {snapshot_code} }},",
            path.display().to_string()
        )
        .expect("writing to a String");
        read.push(path);
        read.push(snapshot);
    }
    code.push_str("]\n");
    (code, read)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that is not UTF-8 is embedded as bytes like any other, so the
    /// crate still builds; the scenario fails when it is run.
    #[test]
    fn every_file_is_embedded_as_bytes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("x/snapshots")).unwrap();
        std::fs::create_dir_all(dir.path().join("snapshots")).unwrap();
        std::fs::write(dir.path().join("x/y.yaml"), b"description: caf\xe9\n").unwrap();
        std::fs::write(dir.path().join("snapshots/x__y.snap"), b"\xff").unwrap();
        std::fs::write(dir.path().join("x/z.yaml"), "description: d\n").unwrap();
        let (code, _) = generate(dir.path());
        let lines: Vec<&str> = code.lines().filter(|l| l.contains("Embedded")).collect();
        assert_eq!(lines.len(), 2, "{code}");
        for line in &lines {
            assert!(line.contains("yaml: include_bytes!("), "{line}");
            assert!(!line.contains("include_str!"), "{line}");
        }
        assert!(lines[0].contains("name: \"x/y\""), "{code}");
        assert!(
            lines[0].contains("snapshot: Some(include_bytes!("),
            "{code}"
        );
        assert!(lines[1].contains("snapshot: None"), "{code}");
    }

    /// The build script writes what `generate` returns: the code above is
    /// the code the crate was built with.
    #[test]
    fn the_build_embeds_what_generate_returns() {
        let built = include_str!(concat!(env!("OUT_DIR"), "/embedded_scenarios.rs"));
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        assert_eq!(generate(&root).0, built);
    }
}
