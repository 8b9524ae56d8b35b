//! Property test (proptest) of the config loader, one of the two parsers that read what
//! others wrote, over arbitrary YAML and JSON documents. The other, the stdout line framer, is
//! crate-private: its property test is a unit test (`client/src/lines/proptests.rs`).

use std::{sync::mpsc, time::Duration};

use mcp_stdio_client::config::Config;
use proptest::prelude::*;
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// The config loader

/// Keys that reach the loader's interesting paths, and some that do not.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "MCP_SERVERS", "mcpServers", "COMMAND", "command", "ARGS", "args", "ENV", "env",
            "DIR", "cwd", "URL", "url", "TIMEOUT", "EOF_GRACE", "TERM_GRACE", "ERA",
            "PROBE_TIMEOUT", "AUTH", "TOKEN", "USERNAME", "READONLY", "SERIAL", "type",
            "headers", "defaults", "DEFAULTS",
        ]).prop_map(str::to_owned),
        1 => "[a-zA-Z_$ {}.-]{0,12}",
    ]
}

/// Scalars that look like what configs hold: durations, URLs, `${VAR}`s, paths.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(vec![
            "300ms",
            "2s",
            "5m",
            "1h",
            "0s",
            "-1s",
            "http://127.0.0.1:1/mcp",
            "https://user:pw@example.invalid/x?token=abc",
            "${HOME}",
            "${NOPE}",
            "${",
            "$${X}",
            "/bin/true",
            "npx",
            "auto",
            "legacy",
            "modern",
            "bearer",
            "basic",
            "gh",
            "none",
        ])
        .prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map(key(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Documents: a value as JSON or YAML, under a real top-level key or not, or any text.
fn document() -> impl Strategy<Value = String> {
    let top = prop::sample::select(vec!["MCP_SERVERS", "mcpServers", "other"]);
    let servers = (
        top,
        proptest::collection::btree_map("[a-z]{1,6}", value(), 0..4),
    )
        .prop_map(|(top, servers)| {
            let servers = Value::Object(servers.into_iter().collect());
            serde_json::json!({ top: servers })
        });
    let value = prop_oneof![servers, value()];
    prop_oneof![
        value.clone().prop_map(|v| v.to_string()),
        value.prop_map(|v| yaml_serde::to_string(&v).unwrap_or_default()),
        ".{0,200}",
        proptest::collection::vec(any::<u8>(), 0..200)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

/// The name the loader is given for the document: every error must carry it.
const SOURCE: &str = "fuzzed-config.yaml";

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_config_loader_never_panics_never_hangs_and_names_the_file(text in document()) {
        // On its own thread, so a hang fails the test (after a bound far above the few
        // milliseconds the worst document within the limits takes) instead of stalling it,
        // and a panic is caught as one.
        let (tx, rx) = mpsc::channel();
        let input = text.clone();
        std::thread::spawn(move || {
            let env = |name: &str| (name == "HOME").then(|| "/home/fuzz".to_owned());
            let result = std::panic::catch_unwind(|| {
                Config::from_str_with_env(&input, SOURCE, &env).map_err(|e| e.to_string())
            });
            let _ = tx.send(result);
        });
        let result = rx.recv_timeout(Duration::from_secs(20));
        let result = match result {
            Ok(result) => result,
            Err(_) => return Err(TestCaseError::fail(format!("the loader hung on {text:?}"))),
        };
        let loaded = result.map_err(|_| TestCaseError::fail(format!("the loader panicked on {text:?}")))?;
        if let Err(message) = loaded {
            prop_assert!(
                message.starts_with(SOURCE),
                "the error does not name the file first: {message:?} (document {text:?})"
            );
        }
    }
}
