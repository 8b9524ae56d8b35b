//! The harness's module dependency order (`docs/architecture.md`), checked
//! on the source: every `crate::<module>` a module names is a module of a
//! lower layer, so no arrow runs back up (the runner never names `client`
//! mode). A new module must be given its layer here and in the document.

use std::{collections::BTreeMap, fs, path::Path};

/// Each top-level module and its layer, from the bottom up, as
/// `docs/architecture.md` lists them.
const LAYERS: &[(&str, u32)] = &[
    ("scenario", 0),
    ("observer", 0),
    ("logging", 0),
    ("failure_log", 0),
    ("units", 0),
    ("runtime", 0),
    ("outcome", 1),
    ("capture", 1),
    ("keeper", 2),
    ("tempdirs", 3),
    ("interrupt", 4),
    ("driver", 5),
    ("runner", 6),
    ("suite", 7),
    ("server_check", 8),
    ("client_check", 8),
    ("connect", 8),
    ("drivers", 8),
    // The one arrow between modes: host mode gives the host client mode's
    // fixture servers.
    ("host_run", 9),
    ("cli", 10),
];

/// The client library's modules (`mcp-stdio-client`), from the bottom up: the
/// data the event log names (`era`, `contain`, `error`) sits below the
/// machinery that emits it (`transport`, `handshake`, `stdio`).
const CLIENT_LAYERS: &[(&str, u32)] = &[
    ("command_path", 0),
    ("lines", 0),
    ("redact", 0),
    ("era", 0),
    ("contain", 0),
    ("config", 1),
    ("credentials", 2),
    ("error", 3),
    ("events", 4),
    ("requests", 4),
    ("transport", 5),
    ("handshake", 6),
    ("stdio", 7),
    ("http_client", 7),
    ("session", 8),
];

fn src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

fn client_src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../client/src"))
}

/// The source files of top-level module `name` under `root`: `name.rs` and
/// everything under `name/`.
fn files_of(root: &Path, name: &str) -> Vec<String> {
    let mut texts = vec![fs::read_to_string(root.join(format!("{name}.rs"))).unwrap()];
    let mut dirs = vec![root.join(name)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                texts.push(fs::read_to_string(&path).unwrap());
            }
        }
    }
    texts
}

/// The text without `//` comments (doc comments may name any module).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `text` names: `crate::x` anywhere, and each name
/// at the top level of a `use crate::{x, y::z}` group.
fn named(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut word = String::new();
            let mut at_top = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                if depth == 1 && (c.is_alphanumeric() || c == '_') {
                    if at_top {
                        word.push(c);
                    }
                    continue;
                }
                if !word.is_empty() {
                    found.push(std::mem::take(&mut word));
                    at_top = false;
                }
                if depth == 1 && c == ',' {
                    at_top = true;
                }
            }
            if !word.is_empty() {
                found.push(word);
            }
        } else {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push(word);
        }
    }
    found
}

/// Every arrow in `table` that runs up or sideways.
fn upward_arrows(root: &Path, table: &[(&str, u32)]) -> Vec<String> {
    let layers: BTreeMap<&str, u32> = table.iter().copied().collect();
    let mut problems = Vec::new();
    for (module, layer) in table {
        for text in files_of(root, module) {
            for name in named(&code(&text)) {
                let Some(below) = layers.get(name.as_str()) else {
                    continue;
                };
                if name != *module && below >= layer {
                    problems.push(format!(
                        "{module} (layer {layer}) names {name} (layer {below})"
                    ));
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// The modules `lib.rs` under `root` declares (`mod x;`, `pub mod x;`).
fn declared_modules(root: &Path) -> Vec<String> {
    let lib = fs::read_to_string(root.join("lib.rs")).unwrap();
    let declared: Vec<String> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod ").or(line.strip_prefix("mod ")))
        .map(|name| name.trim_end_matches(';').to_owned())
        .collect();
    assert!(
        !declared.is_empty(),
        "no module found in {}",
        root.display()
    );
    declared
}

#[test]
fn every_module_names_only_modules_below_it() {
    let problems = upward_arrows(src(), LAYERS);
    assert!(
        problems.is_empty(),
        "arrows running up or sideways (docs/architecture.md):\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_client_module_names_only_modules_below_it() {
    for name in declared_modules(client_src()) {
        assert!(
            CLIENT_LAYERS.iter().any(|(module, _)| *module == name),
            "client module `{name}` has no layer in this test"
        );
    }
    let problems = upward_arrows(client_src(), CLIENT_LAYERS);
    assert!(
        problems.is_empty(),
        "arrows running up or sideways in the client (docs/architecture.md):\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_module_has_a_layer_and_is_in_the_document() {
    let doc = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/architecture.md"
    ))
    .unwrap();
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared = declared_modules(src());
    for name in &declared {
        assert!(
            LAYERS.iter().any(|(module, _)| module == name),
            "module `{name}` has no layer in this test"
        );
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/architecture.md does not place module `{name}`"
        );
    }
    assert_eq!(declared.len(), LAYERS.len(), "{declared:?}");
    assert!(
        !lib.lines().any(|line| line.starts_with("pub mod ")),
        "lib.rs makes a module public; re-export what users need instead"
    );
}

#[test]
fn the_parser_finds_names_in_groups_and_paths() {
    let text = "use crate::{\n    driver::{self, Driver},\n    observer,\n};\nlet x = crate::units::human(d);";
    assert_eq!(named(text), ["driver", "observer", "units"]);
    assert_eq!(named("use crate::{a, b::c, d};"), ["a", "b", "d"]);
}
