//! Loading, validating, expanding and redacting the server configuration, through the public API.

use std::collections::BTreeMap;
use std::error::Error as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_stdio_client::config::{
    AuthMode, Config, ConfigError, DEFAULT_EOF_GRACE, DEFAULT_TERM_GRACE, DEFAULT_TIMEOUT,
    DurationError, ExpandError, HttpConfig, ServerConfig, ShapeError, StdioConfig, Transport,
    Violation,
};

const SOURCE: &str = "servers.yaml";

/// The environment every test loads with, instead of the process environment.
fn test_env(name: &str) -> Option<String> {
    let value = match name {
        "HOME" => "/home/alice",
        "GH_TOKEN" => "gh-secret-from-env",
        "REMOTE_TOKEN" => "remote-secret-from-env",
        "EMPTY" => "",
        "CMD" => "/usr/bin/server",
        "HOST" => "example.invalid",
        _ => return None,
    };
    Some(value.to_owned())
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_str_with_env(text, SOURCE, &test_env)
}

fn load_ok(text: &str) -> Config {
    load(text).unwrap_or_else(|err| panic!("{}", chain(&err)))
}

fn load_err(text: &str) -> ConfigError {
    match load(text) {
        Ok(config) => panic!("loaded, expected an error: {config:?}"),
        Err(err) => err,
    }
}

/// A document with one server whose entry is written in YAML flow style.
fn one(name: &str, entry: &str) -> String {
    format!("MCP_SERVERS:\n  {name}: {entry}\n")
}

fn server(text: &str, name: &str) -> ServerConfig {
    load_ok(text).servers.remove(name).expect("server loaded")
}

fn stdio(server: &ServerConfig) -> &StdioConfig {
    match &server.transport {
        Transport::Stdio(stdio) => stdio,
        Transport::Http(_) => panic!("expected a stdio server"),
    }
}

fn http(server: &ServerConfig) -> &HttpConfig {
    match &server.transport {
        Transport::Http(http) => http,
        Transport::Stdio(_) => panic!("expected an HTTP server"),
    }
}

/// The error and all its sources, joined the way `anyhow` prints `{:#}`.
fn chain(err: &ConfigError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn violation(err: &ConfigError) -> &Violation {
    match err {
        ConfigError::Invalid { violation, .. } => violation,
        other => panic!("expected a rule violation, got: {}", chain(other)),
    }
}

fn shape(err: &ConfigError) -> &ShapeError {
    match err {
        ConfigError::Shape { problem, .. } => problem,
        other => panic!("expected a shape error, got: {}", chain(other)),
    }
}

const STDIO_ONLY_TEXT: &str =
    "AUTH bearer/basic requires an HTTP endpoint; stdio (COMMAND) servers transmit no credentials";

mod model {
    use super::*;

    #[test]
    fn the_contract_example_loads() {
        let text = r#"
MCP_SERVERS:
  fs:
    COMMAND: npx
    ARGS: ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"]
    DIR: /srv/fs
    ENV: { GITHUB_TOKEN: "${GH_TOKEN}" }
    TIMEOUT: 30s
    REQUIRES_CONSENT: false
    EOF_GRACE: 2s
    TERM_GRACE: 2s
  remote:
    URL: https://example.invalid/mcp
    AUTH: bearer
    TOKEN: "${REMOTE_TOKEN}"
    USERNAME: alice
"#;
        let config = load_ok(text);
        assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["fs", "remote"]);

        let fs = &config.servers["fs"];
        assert_eq!(fs.name, "fs");
        assert_eq!(fs.timeout, Duration::from_secs(30));
        assert!(!fs.requires_consent);
        assert!(fs.serial);
        let expected = StdioConfig {
            command: "npx".into(),
            args: vec![
                "-y".into(),
                "@modelcontextprotocol/server-filesystem".into(),
                "/home/alice/notes".into(),
            ],
            dir: Some(PathBuf::from("/srv/fs")),
            env: BTreeMap::from([("GITHUB_TOKEN".into(), "gh-secret-from-env".into())]),
            eof_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            era: mcp_stdio_client::EraSetting::Auto,
            probe_timeout: mcp_stdio_client::DEFAULT_PROBE_TIMEOUT,
            restart: mcp_stdio_client::RestartPolicy::default(),
        };
        assert_eq!(stdio(fs), &expected);

        let remote = &config.servers["remote"];
        assert_eq!(remote.timeout, DEFAULT_TIMEOUT);
        assert!(remote.requires_consent);
        assert!(remote.serial);
        assert_eq!(
            http(remote),
            &HttpConfig {
                url: "https://example.invalid/mcp".into(),
                auth: AuthMode::Bearer,
                token: Some("remote-secret-from-env".into()),
                // USERNAME is only used by AUTH basic (and auto), so bearer drops it.
                username: None,
            }
        );
    }

    #[test]
    fn a_bare_stdio_entry_gets_every_default() {
        let fs = server(&one("fs", "{COMMAND: npx}"), "fs");
        assert_eq!(fs, ServerConfig::stdio("fs", StdioConfig::new("npx")));
        assert_eq!(fs.timeout, Duration::from_secs(300));
        assert!(fs.requires_consent && fs.serial);
        let stdio = stdio(&fs);
        assert!(stdio.args.is_empty() && stdio.env.is_empty() && stdio.dir.is_none());
        assert_eq!(stdio.eof_grace, DEFAULT_EOF_GRACE);
        assert_eq!(stdio.term_grace, DEFAULT_TERM_GRACE);
        assert_eq!(DEFAULT_EOF_GRACE, Duration::from_secs(2));
        assert_eq!(DEFAULT_TERM_GRACE, Duration::from_secs(2));
    }

    #[test]
    fn a_bare_http_entry_gets_every_default() {
        let remote = server(&one("remote", "{URL: \"https://h.invalid/mcp\"}"), "remote");
        assert_eq!(
            remote,
            ServerConfig::http("remote", HttpConfig::new("https://h.invalid/mcp"))
        );
        assert_eq!(http(&remote).auth, AuthMode::Auto);
        assert_eq!(http(&remote).token, None);
    }

    #[test]
    fn servers_are_keyed_and_sorted_by_name() {
        let text = "MCP_SERVERS:\n  zeta: {COMMAND: z}\n  alpha: {COMMAND: a}\n  mid: {URL: \"http://m.invalid\"}\n";
        let config = load_ok(text);
        assert_eq!(
            config.servers.keys().collect::<Vec<_>>(),
            ["alpha", "mid", "zeta"]
        );
        assert!(
            config
                .servers
                .iter()
                .all(|(key, server)| *key == server.name)
        );
    }

    #[test]
    fn an_empty_servers_key_is_an_empty_config() {
        for text in [
            "MCP_SERVERS:\n",
            "MCP_SERVERS: {}\n",
            "MCP_SERVERS: ~\n",
            r#"{"mcpServers": {}}"#,
        ] {
            assert_eq!(load_ok(text), Config::default(), "{text}");
        }
    }

    #[test]
    fn scalars_are_taken_as_written() {
        let fs = server(
            &one(
                "fs",
                "{COMMAND: srv, ARGS: [--port, 8080, 0755, 1.10, true, 0x1F, '', ~x], ENV: {DEBUG: 1, RATIO: 1.50, ON: true}}",
            ),
            "fs",
        );
        assert_eq!(
            stdio(&fs).args,
            ["--port", "8080", "0755", "1.10", "true", "0x1F", "", "~x"]
        );
        assert_eq!(stdio(&fs).env["DEBUG"], "1");
        assert_eq!(stdio(&fs).env["RATIO"], "1.50");
        assert_eq!(stdio(&fs).env["ON"], "true");
    }

    #[test]
    fn tags_on_strings_are_ignored() {
        let fs = server(
            &one("fs", "{COMMAND: !!str npx, ARGS: [!!int abc, !custom 1]}"),
            "fs",
        );
        assert_eq!(stdio(&fs).command, "npx");
        assert_eq!(stdio(&fs).args, ["abc", "1"]);
    }

    #[test]
    fn null_fields_count_as_absent() {
        let fs = server(
            &one(
                "fs",
                "{COMMAND: npx, URL: ~, ARGS: null, DIR: , TIMEOUT: ~}",
            ),
            "fs",
        );
        assert_eq!(fs, ServerConfig::stdio("fs", StdioConfig::new("npx")));
    }

    #[test]
    fn other_top_level_keys_are_ignored() {
        let text = "OTHER_TOOL: {anything: [1, 2]}\nMCP_SERVERS:\n  fs: {COMMAND: npx}\nMORE: x\n";
        assert_eq!(load_ok(text).servers.len(), 1);
    }

    #[test]
    fn anchors_and_aliases_work() {
        let text = "defaults: &env {A: \"1\"}\nMCP_SERVERS:\n  a: {COMMAND: x, ENV: *env}\n  b: {COMMAND: y, ENV: *env}\n";
        let config = load_ok(text);
        assert_eq!(stdio(&config.servers["b"]).env["A"], "1");
    }

    #[test]
    fn durations_accept_every_unit() {
        for (text, expected) in [
            ("300ms", Duration::from_millis(300)),
            ("2s", Duration::from_secs(2)),
            ("5m", Duration::from_secs(300)),
            ("1h", Duration::from_secs(3600)),
        ] {
            let fs = server(
                &one(
                    "fs",
                    &format!(
                        "{{COMMAND: x, TIMEOUT: {text}, EOF_GRACE: {text}, TERM_GRACE: {text}}}"
                    ),
                ),
                "fs",
            );
            assert_eq!(fs.timeout, expected);
            assert_eq!(stdio(&fs).eof_grace, expected);
            assert_eq!(stdio(&fs).term_grace, expected);
        }
    }

    #[test]
    fn load_reads_a_file_and_names_it_in_errors() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(b"MCP_SERVERS:\n  fs: {COMMAND: npx}\n")
            .unwrap();
        assert_eq!(Config::load(file.path()).unwrap().servers.len(), 1);

        let mut bad = tempfile::NamedTempFile::new().unwrap();
        bad.write_all(b"MCP_SERVERS:\n  fs: {URL: x, COMMAND: y}\n")
            .unwrap();
        let err = Config::load(bad.path()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&bad.path().display().to_string()),
            "{err}"
        );

        let missing = bad.path().with_extension("missing");
        let err = Config::load(&missing).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
        assert!(err.to_string().contains(&missing.display().to_string()));
        assert!(err.source().is_some());
    }
}

/// The rules, in the contract's order.
mod rules {
    use super::*;

    #[test]
    fn rule_1_names_must_match_the_pattern() {
        for name in ["Fs", "FS", "my_server", "\"\"", "a.b", &"a".repeat(25)] {
            let err = load_err(&one(name, "{COMMAND: npx}"));
            assert_eq!(violation(&err), &Violation::BadName, "{name}");
            assert!(err.to_string().contains("^[a-z0-9-]{1,24}$"), "{err}");
        }
        load_ok(&one(&"a".repeat(24), "{COMMAND: npx}"));
        load_ok(&one("my-server-2", "{COMMAND: npx}"));
        load_ok(&one("0", "{COMMAND: npx}"));
    }

    #[test]
    fn rule_1_comes_before_everything_in_the_entry() {
        for entry in [
            "{COMMAND: a, URL: b}",
            "{ARG: x}",
            "{COMMAND: a, ARGS: {}}",
            "not-a-mapping",
            "{COMMAND: a, AUTH: bearer}",
        ] {
            let err = load_err(&one("Bad_Name", entry));
            assert_eq!(violation(&err), &Violation::BadName, "{entry}");
            assert_eq!(err.server(), Some("Bad_Name"));
        }
    }

    #[test]
    fn rule_2_both_command_and_url_is_an_error() {
        let err = load_err(&one("fs", "{COMMAND: npx, URL: \"https://h.invalid\"}"));
        assert_eq!(violation(&err), &Violation::CommandAndUrl);
        assert_eq!(err.server(), Some("fs"));
        assert!(
            err.to_string().contains("COMMAND and URL are both set"),
            "{err}"
        );
    }

    #[test]
    fn rule_2_neither_command_nor_url_is_an_error() {
        for entry in ["{TIMEOUT: 5s}", "{}", "{COMMAND: ~}"] {
            let err = load_err(&one("fs", entry));
            assert_eq!(violation(&err), &Violation::NoCommandOrUrl, "{entry}");
        }
    }

    #[test]
    fn rule_2_empty_command_or_url_is_an_error() {
        let err = load_err(&one("fs", "{COMMAND: \"\"}"));
        assert_eq!(violation(&err), &Violation::Empty { field: "COMMAND" });
        let err = load_err(&one("fs", "{URL: \"  \"}"));
        assert_eq!(violation(&err), &Violation::Empty { field: "URL" });
    }

    #[test]
    fn rule_2_comes_before_rule_3() {
        let err = load_err(&one(
            "fs",
            "{COMMAND: npx, URL: \"https://h.invalid\", ARGS: [a], DIR: /x}",
        ));
        assert_eq!(violation(&err), &Violation::CommandAndUrl);
    }

    #[test]
    fn rule_3_stdio_fields_without_command_are_errors() {
        for (field, value) in [
            ("ARGS", "[a]"),
            ("DIR", "/srv"),
            ("ENV", "{A: b}"),
            ("EOF_GRACE", "2s"),
            ("TERM_GRACE", "2s"),
        ] {
            let err = load_err(&one(
                "remote",
                &format!("{{URL: \"https://h.invalid\", {field}: {value}}}"),
            ));
            assert_eq!(violation(&err), &Violation::StdioOnly { field }, "{field}");
            assert!(
                err.to_string()
                    .contains(&format!("{field} requires COMMAND")),
                "{err}"
            );
        }
    }

    #[test]
    fn rule_3_comes_before_rules_4_to_6() {
        let err = load_err(&one(
            "remote",
            "{URL: \"https://h.invalid\", ARGS: [a], AUTH: bearer, TIMEOUT: 0s}",
        ));
        assert_eq!(violation(&err), &Violation::StdioOnly { field: "ARGS" });
    }

    #[test]
    fn rule_3_empty_dir_is_an_error() {
        let err = load_err(&one("fs", "{COMMAND: npx, DIR: \"\"}"));
        assert_eq!(violation(&err), &Violation::Empty { field: "DIR" });
    }

    #[test]
    fn rule_4_bearer_or_basic_on_stdio_is_a_mode_conflict_not_a_token_error() {
        for entry in [
            "{COMMAND: npx, AUTH: bearer}",
            "{COMMAND: npx, AUTH: bearer, TOKEN: \"\"}",
            "{COMMAND: npx, AUTH: bearer, TOKEN: \"${UNSET_VAR}\"}",
            "{COMMAND: npx, AUTH: bearer, TOKEN: t}",
            "{COMMAND: npx, AUTH: basic}",
            "{COMMAND: npx, AUTH: basic, USERNAME: \"\", TOKEN: \"\"}",
            "{COMMAND: npx, AUTH: Bearer}",
            "{COMMAND: npx, AUTH: bearer, TIMEOUT: 0s}",
        ] {
            let err = load_err(&one("fs", entry));
            assert_eq!(violation(&err), &Violation::CredentialsOnStdio, "{entry}");
            let text = chain(&err);
            assert!(text.contains(STDIO_ONLY_TEXT), "{text}");
            assert!(!text.contains("TOKEN"), "{text}");
            assert!(!text.contains("USERNAME"), "{text}");
        }
    }

    #[test]
    fn rule_4_tolerates_auto_gh_none_and_empty_auth_on_stdio() {
        for auth in ["auto", "gh", "none", "\"\"", "~", "GH"] {
            let fs = server(&one("fs", &format!("{{COMMAND: npx, AUTH: {auth}}}")), "fs");
            assert_eq!(
                fs,
                ServerConfig::stdio("fs", StdioConfig::new("npx")),
                "{auth}"
            );
        }
    }

    #[test]
    fn rule_4_tolerates_a_stray_token_on_stdio_and_never_expands_it() {
        let fs = server(
            &one(
                "fs",
                "{COMMAND: npx, AUTH: gh, TOKEN: \"${UNSET_VAR}\", USERNAME: \"${ALSO_UNSET}\"}",
            ),
            "fs",
        );
        assert_eq!(fs, ServerConfig::stdio("fs", StdioConfig::new("npx")));
    }

    #[test]
    fn rule_4_rejects_an_unknown_auth_mode() {
        let err = load_err(&one("fs", "{COMMAND: npx, AUTH: oauth}"));
        assert_eq!(violation(&err), &Violation::UnknownAuth);
        let err = load_err(&one("remote", "{URL: \"https://h.invalid\", AUTH: token}"));
        assert_eq!(violation(&err), &Violation::UnknownAuth);
    }

    #[test]
    fn rule_5_bearer_needs_a_token() {
        for entry in [
            "{URL: \"https://h.invalid\", AUTH: bearer}",
            "{URL: \"https://h.invalid\", AUTH: bearer, TOKEN: \"\"}",
            "{URL: \"https://h.invalid\", AUTH: bearer, TOKEN: \" \"}",
        ] {
            let err = load_err(&one("remote", entry));
            assert_eq!(
                violation(&err),
                &Violation::MissingCredential {
                    field: "TOKEN",
                    auth: AuthMode::Bearer
                },
                "{entry}"
            );
            assert!(err.to_string().contains("TOKEN must not be empty"), "{err}");
        }
    }

    #[test]
    fn rule_5_basic_needs_a_username_and_a_token() {
        let err = load_err(&one(
            "remote",
            "{URL: \"https://h.invalid\", AUTH: basic, TOKEN: t}",
        ));
        assert_eq!(
            violation(&err),
            &Violation::MissingCredential {
                field: "USERNAME",
                auth: AuthMode::Basic
            }
        );
        let err = load_err(&one(
            "remote",
            "{URL: \"https://h.invalid\", AUTH: basic, USERNAME: u}",
        ));
        assert_eq!(
            violation(&err),
            &Violation::MissingCredential {
                field: "TOKEN",
                auth: AuthMode::Basic
            }
        );
        let remote = server(
            &one(
                "remote",
                "{URL: \"https://h.invalid\", AUTH: basic, USERNAME: u, TOKEN: t}",
            ),
            "remote",
        );
        assert_eq!(http(&remote).username.as_deref(), Some("u"));
        assert_eq!(http(&remote).token.as_deref(), Some("t"));
    }

    #[test]
    fn rule_5_comes_before_rule_6() {
        let err = load_err(&one(
            "remote",
            "{URL: \"https://h.invalid\", AUTH: bearer, TIMEOUT: 0s}",
        ));
        assert!(matches!(
            violation(&err),
            Violation::MissingCredential { .. }
        ));
    }

    #[test]
    fn rule_5_does_not_apply_to_other_modes() {
        for auth in ["auto", "gh", "none"] {
            load_ok(&one(
                "remote",
                &format!("{{URL: \"https://h.invalid\", AUTH: {auth}}}"),
            ));
        }
    }

    #[test]
    fn rule_6_durations_must_be_positive() {
        for field in ["TIMEOUT", "EOF_GRACE", "TERM_GRACE"] {
            for zero in ["0s", "0ms", "0m", "0h"] {
                let err = load_err(&one("fs", &format!("{{COMMAND: npx, {field}: {zero}}}")));
                match &err {
                    ConfigError::Duration {
                        field: f, source, ..
                    } => {
                        assert_eq!(*f, field);
                        assert_eq!(source, &DurationError::Zero);
                    }
                    other => panic!("{}", chain(other)),
                }
                assert_eq!(err.server(), Some("fs"));
                assert!(chain(&err).contains(&format!("invalid {field}")), "{err}");
                assert!(chain(&err).contains("greater than zero"), "{err}");
            }
        }
        let err = load_err(&one("remote", "{URL: \"https://h.invalid\", TIMEOUT: 0s}"));
        assert!(matches!(
            err,
            ConfigError::Duration {
                field: "TIMEOUT",
                ..
            }
        ));
    }

    #[test]
    fn rule_6_durations_must_parse() {
        for (text, expected) in [
            ("soon", DurationError::NotANumber),
            ("30", DurationError::MissingUnit),
            ("1.5s", DurationError::NotANumber),
            ("3d", DurationError::UnknownUnit),
            ("\"\"", DurationError::Empty),
        ] {
            let err = load_err(&one("fs", &format!("{{COMMAND: npx, TIMEOUT: {text}}}")));
            match err {
                ConfigError::Duration { source, .. } => assert_eq!(source, expected, "{text}"),
                other => panic!("{}", chain(&other)),
            }
        }
    }

    #[test]
    fn the_first_bad_server_in_document_order_is_reported() {
        let text = "MCP_SERVERS:\n  b: {COMMAND: x, URL: y}\n  a: {TIMEOUT: 1s}\n";
        assert_eq!(load_err(text).server(), Some("b"));
    }
}

mod expansion {
    use super::*;

    #[test]
    fn expands_in_every_field_that_allows_it() {
        let text = r#"
MCP_SERVERS:
  fs:
    COMMAND: "${CMD}"
    ARGS: ["$HOME", "--dir=${HOME}/x", plain]
    DIR: "${HOME}/work"
    ENV: { TOKEN_VAR: "${GH_TOKEN}", MIXED: "a-$GH_TOKEN-b" }
  remote:
    URL: "https://${HOST}/mcp"
    AUTH: bearer
    TOKEN: "Bearer-less ${REMOTE_TOKEN}"
"#;
        let config = load_ok(text);
        let fs = stdio(&config.servers["fs"]);
        assert_eq!(fs.command, "/usr/bin/server");
        assert_eq!(fs.args, ["/home/alice", "--dir=/home/alice/x", "plain"]);
        assert_eq!(fs.dir, Some(PathBuf::from("/home/alice/work")));
        assert_eq!(fs.env["TOKEN_VAR"], "gh-secret-from-env");
        assert_eq!(fs.env["MIXED"], "a-gh-secret-from-env-b");
        let remote = http(&config.servers["remote"]);
        assert_eq!(remote.url, "https://example.invalid/mcp");
        assert_eq!(
            remote.token.as_deref(),
            Some("Bearer-less remote-secret-from-env")
        );
    }

    #[test]
    fn an_unset_variable_names_the_variable_the_server_and_the_field() {
        for (entry, field) in [
            ("{COMMAND: \"${NOPE}\"}", "COMMAND"),
            ("{COMMAND: x, ARGS: [a, b, \"pre-${NOPE}\"]}", "ARGS[2]"),
            ("{COMMAND: x, DIR: \"$NOPE/dir\"}", "DIR"),
            (
                "{COMMAND: x, ENV: {GITHUB_TOKEN: \"${NOPE}\"}}",
                "ENV.GITHUB_TOKEN",
            ),
            ("{URL: \"https://${NOPE}/mcp\"}", "URL"),
            (
                "{URL: \"https://h.invalid\", AUTH: bearer, TOKEN: \"${NOPE}\"}",
                "TOKEN",
            ),
            ("{URL: \"https://h.invalid\", TOKEN: \"${NOPE}\"}", "TOKEN"),
        ] {
            let err = load_err(&one("fs", entry));
            match &err {
                ConfigError::Expand {
                    field: f, source, ..
                } => {
                    assert_eq!(f, field, "{entry}");
                    assert_eq!(
                        source,
                        &ExpandError::Unset {
                            name: "NOPE".into()
                        }
                    );
                }
                other => panic!("{entry}: {}", chain(other)),
            }
            assert_eq!(err.server(), Some("fs"));
            let text = chain(&err);
            assert!(text.contains("NOPE"), "{text}");
            assert!(text.contains(field), "{text}");
            assert!(text.contains("\"fs\""), "{text}");
        }
    }

    #[test]
    fn double_dollar_is_a_literal_dollar() {
        let fs = server(
            &one(
                "fs",
                "{COMMAND: \"a$$b\", ARGS: [\"$${HOME}\", \"pa$$word\"], ENV: {P: \"$$NOPE\"}}",
            ),
            "fs",
        );
        assert_eq!(stdio(&fs).command, "a$b");
        assert_eq!(stdio(&fs).args, ["${HOME}", "pa$word"]);
        assert_eq!(stdio(&fs).env["P"], "$NOPE");
    }

    #[test]
    fn a_default_applies_when_the_variable_is_unset_or_empty() {
        let fs = server(
            &one(
                "fs",
                "{COMMAND: x, ARGS: [\"${NOPE:-fallback}\", \"${EMPTY:-e}\", \"${HOME:-h}\"]}",
            ),
            "fs",
        );
        assert_eq!(stdio(&fs).args, ["fallback", "e", "/home/alice"]);
    }

    #[test]
    fn a_nested_reference_in_a_default_is_expanded_not_kept_literally() {
        let fs = server(
            &one(
                "fs",
                "{COMMAND: x, ARGS: [\"${NOPE:-${HOME}}\", \"${NOPE:-$HOME/x}\", \
                 \"${EMPTY:-${NOPE:-${HOST}}}\", \"${HOME:-${UNSET}}\"]}",
            ),
            "fs",
        );
        assert_eq!(
            stdio(&fs).args,
            [
                "/home/alice",
                "/home/alice/x",
                "example.invalid",
                "/home/alice"
            ]
        );
        let err = load_err(&one("fs", "{COMMAND: x, ARGS: [\"${NOPE:-${UNSET}}\"]}"));
        assert!(
            matches!(
                &err,
                ConfigError::Expand {
                    source: ExpandError::Unset { name },
                    ..
                } if name == "UNSET"
            ),
            "{}",
            chain(&err)
        );
    }

    #[test]
    fn a_set_but_empty_variable_is_not_an_error() {
        let fs = server(&one("fs", "{COMMAND: x, ARGS: [\"[${EMPTY}]\"]}"), "fs");
        assert_eq!(stdio(&fs).args, ["[]"]);
    }

    #[test]
    fn malformed_references_are_errors() {
        let err = load_err(&one("fs", "{COMMAND: x, ARGS: [\"${HOME\"]}"));
        assert!(matches!(
            err,
            ConfigError::Expand {
                source: ExpandError::Unterminated,
                ..
            }
        ));
        let err = load_err(&one("fs", "{COMMAND: x, ENV: {A: \"${not valid}\"}}"));
        assert!(matches!(
            err,
            ConfigError::Expand {
                source: ExpandError::InvalidReference,
                ..
            }
        ));
    }

    #[test]
    fn names_keys_usernames_and_unused_tokens_are_not_expanded() {
        let text = one(
            "remote",
            "{URL: \"https://h.invalid\", AUTH: basic, USERNAME: \"${HOME}\", TOKEN: t}",
        );
        assert_eq!(
            http(&server(&text, "remote")).username.as_deref(),
            Some("${HOME}")
        );

        let fs = server(&one("fs", "{COMMAND: x, ENV: {\"$HOME\": v}}"), "fs");
        assert!(stdio(&fs).env.contains_key("$HOME"));

        for auth in ["gh", "none"] {
            let remote = server(
                &one(
                    "remote",
                    &format!("{{URL: \"https://h.invalid\", AUTH: {auth}, TOKEN: \"${{NOPE}}\"}}"),
                ),
                "remote",
            );
            assert_eq!(http(&remote).token, None, "{auth}");
        }
    }

    #[test]
    fn a_token_that_expands_to_nothing_is_an_error_when_it_is_needed() {
        let err = load_err(&one(
            "remote",
            "{URL: \"https://h.invalid\", AUTH: bearer, TOKEN: \"${EMPTY}\"}",
        ));
        assert_eq!(
            violation(&err),
            &Violation::EmptyAfterExpansion { field: "TOKEN" }
        );
        let remote = server(
            &one(
                "remote",
                "{URL: \"https://h.invalid\", TOKEN: \"${EMPTY}\"}",
            ),
            "remote",
        );
        assert_eq!(http(&remote).token, None);
    }

    #[test]
    fn a_command_that_expands_to_nothing_is_an_error() {
        let err = load_err(&one("fs", "{COMMAND: \"${EMPTY}\"}"));
        assert_eq!(
            violation(&err),
            &Violation::EmptyAfterExpansion { field: "COMMAND" }
        );
    }

    #[test]
    fn the_expanded_url_must_be_http() {
        for url in [
            "example.invalid/mcp",
            "ftp://example.invalid",
            "https://",
            "${HOME}",
        ] {
            let err = load_err(&one("remote", &format!("{{URL: \"{url}\"}}")));
            assert_eq!(violation(&err), &Violation::NotHttpUrl, "{url}");
        }
    }

    /// reqwest turns a URL's user-info into an `Authorization: Basic` header, and an AUTH mode
    /// that sends one adds a second: the server gets two. The entry is refused at load time,
    /// naming the server and never the URL's password.
    #[test]
    fn user_info_in_the_url_with_an_auth_that_sends_a_header_is_an_error() {
        let password = "pw-in-url-4b1e";
        for (url, rest, auth) in [
            (
                "https://alice:{pw}@h.invalid/mcp",
                "AUTH: bearer, TOKEN: t",
                AuthMode::Bearer,
            ),
            (
                "https://alice:{pw}@h.invalid/mcp",
                "AUTH: basic, USERNAME: u, TOKEN: t",
                AuthMode::Basic,
            ),
            ("https://alice:{pw}@h.invalid/mcp", "AUTH: gh", AuthMode::Gh),
            // auto sends the TOKEN when there is one.
            (
                "https://alice:{pw}@h.invalid/mcp",
                "TOKEN: t",
                AuthMode::Auto,
            ),
            // A user name alone is user-info too; so is one that came from a variable.
            (
                "https://{pw}@h.invalid/mcp",
                "AUTH: bearer, TOKEN: t",
                AuthMode::Bearer,
            ),
            (
                "https://alice:{pw}@${HOST}/mcp",
                "AUTH: bearer, TOKEN: \"${REMOTE_TOKEN}\"",
                AuthMode::Bearer,
            ),
        ] {
            let url = url.replace("{pw}", password);
            let entry = format!("{{URL: \"{url}\", {rest}}}");
            let err = load_err(&one("remote", &entry));
            assert_eq!(
                violation(&err),
                &Violation::UserInfoWithAuth { auth },
                "{entry}"
            );
            let text = format!("{} {err:?}", chain(&err));
            assert!(text.contains("server \"remote\""), "{text}");
            assert!(text.contains(&format!("AUTH {auth}")), "{text}");
            assert!(!text.contains(password), "{text}");
            assert!(!text.contains("alice"), "{text}");
        }
        // The URL's user-info alone is the credential: AUTH none, or auto without a TOKEN.
        for rest in ["AUTH: none", "AUTH: auto", "AUTH: none, TOKEN: t"] {
            let entry = format!("{{URL: \"https://alice:{password}@h.invalid/mcp\", {rest}}}");
            load_ok(&one("remote", &entry));
        }
        // An `@` after the authority is not user-info.
        load_ok(&one(
            "remote",
            "{URL: \"https://h.invalid/mcp/@me?x=a@b\", AUTH: bearer, TOKEN: t}",
        ));
    }

    #[test]
    fn the_process_environment_is_the_default() {
        // PATH is set in every environment the tests run in; nothing is written to the
        // environment, which other tests may be reading concurrently.
        let path = std::env::var("PATH").expect("PATH is set");
        let config =
            Config::from_str(&one("fs", "{COMMAND: x, ENV: {P: \"$PATH\"}}"), SOURCE).unwrap();
        assert_eq!(stdio(&config.servers["fs"]).env["P"], path);
    }
}

mod flags {
    use super::*;

    fn flags(entry: &str) -> (bool, bool) {
        let server = server(&one("s", entry), "s");
        (server.requires_consent, server.serial)
    }

    #[test]
    fn stdio_requires_consent_and_is_serial_unless_consent_is_overridden() {
        assert_eq!(flags("{COMMAND: x}"), (true, true));
        assert_eq!(
            flags("{COMMAND: x, REQUIRES_CONSENT: false}"),
            (false, true)
        );
        assert_eq!(flags("{COMMAND: x, REQUIRES_CONSENT: true}"), (true, true));
    }

    #[test]
    fn http_is_consent_free_and_parallel_only_on_readonly_paths() {
        assert_eq!(flags("{URL: \"https://h.invalid/mcp\"}"), (true, true));
        assert_eq!(
            flags("{URL: \"https://h.invalid/mcp/readonly\"}"),
            (false, false)
        );
        assert_eq!(
            flags("{URL: \"https://h.invalid/readonly/\"}"),
            (false, false)
        );
        assert_eq!(
            flags("{URL: \"https://h.invalid/readonly?x=1\"}"),
            (false, false)
        );
        assert_eq!(
            flags("{URL: \"https://h.invalid/readonly/tools\"}"),
            (true, true)
        );
        assert_eq!(
            flags("{URL: \"https://h.invalid/notreadonly\"}"),
            (true, true)
        );
        assert_eq!(
            flags("{URL: \"https://h.invalid/x?p=/readonly\"}"),
            (true, true)
        );
    }

    #[test]
    fn requires_consent_overrides_consent_but_not_serial_for_http() {
        assert_eq!(
            flags("{URL: \"https://h.invalid/readonly\", REQUIRES_CONSENT: true}"),
            (true, false)
        );
        assert_eq!(
            flags("{URL: \"https://h.invalid/mcp\", REQUIRES_CONSENT: false}"),
            (false, true)
        );
    }

    #[test]
    fn requires_consent_must_be_a_boolean() {
        let err = load_err(&one("s", "{COMMAND: x, REQUIRES_CONSENT: yes}"));
        assert_eq!(
            shape(&err),
            &ShapeError::NotABool {
                field: "REQUIRES_CONSENT"
            }
        );
    }

    #[test]
    fn the_convenience_constructors_derive_the_same_flags() {
        let readonly = ServerConfig::http("r", HttpConfig::new("https://h.invalid/readonly"));
        assert!(!readonly.requires_consent && !readonly.serial);
        let plain = ServerConfig::http("p", HttpConfig::new("https://h.invalid/mcp"));
        assert!(plain.requires_consent && plain.serial);
        assert!(HttpConfig::new("https://h.invalid/readonly").is_readonly());
    }
}

mod formats {
    use super::*;

    #[test]
    fn the_desktop_json_format_loads_to_the_same_model_as_yaml() {
        let yaml = r#"
MCP_SERVERS:
  fs:
    COMMAND: npx
    ARGS: ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"]
    DIR: /srv/fs
    ENV: { GITHUB_TOKEN: "${GH_TOKEN}" }
    TIMEOUT: 30s
    REQUIRES_CONSENT: false
    EOF_GRACE: 1500ms
    TERM_GRACE: 3s
  remote:
    URL: https://example.invalid/mcp
    AUTH: basic
    USERNAME: alice
    TOKEN: "${REMOTE_TOKEN}"
  ro:
    URL: https://example.invalid/readonly
"#;
        let json = r#"{
  "mcpServers": {
    "fs": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"],
      "cwd": "/srv/fs",
      "env": {"GITHUB_TOKEN": "${GH_TOKEN}"},
      "timeout": 30,
      "requiresConsent": false,
      "eofGrace": "1500ms",
      "termGrace": "3s"
    },
    "remote": {
      "url": "https://example.invalid/mcp",
      "auth": "basic",
      "username": "alice",
      "token": "${REMOTE_TOKEN}"
    },
    "ro": {"type": "http", "url": "https://example.invalid/readonly"}
  }
}"#;
        let from_yaml = load_ok(yaml);
        let from_json = load_ok(json);
        assert_eq!(from_yaml, from_json);
        assert_eq!(from_json.servers.len(), 3);
    }

    #[test]
    fn compact_json_and_json_escapes_load() {
        let json = r#"{"mcpServers":{"fs":{"command":"npx","args":["a\/b","\u00e9","tab\there"],"env":{}}}}"#;
        let fs = server(json, "fs");
        assert_eq!(stdio(&fs).args, ["a/b", "é", "tab\there"]);
    }

    #[test]
    fn json_with_the_yaml_key_uses_the_yaml_field_names() {
        let config = load_ok(r#"{"MCP_SERVERS": {"fs": {"COMMAND": "npx"}}}"#);
        assert_eq!(config.servers.len(), 1);
        let err = load_err(r#"{"MCP_SERVERS": {"fs": {"command": "npx"}}}"#);
        assert!(matches!(shape(&err), ShapeError::UnknownField { .. }));
    }

    #[test]
    fn the_format_is_detected_by_the_top_level_key() {
        for text in [
            "",
            "# nothing\n",
            "{}",
            "servers: {}\n",
            "mcp_servers: {}\n",
        ] {
            let err = load_err(text);
            assert_eq!(shape(&err), &ShapeError::NoServersKey, "{text:?}");
            assert!(err.to_string().contains("MCP_SERVERS"), "{err}");
            assert!(err.to_string().contains("mcpServers"), "{err}");
            assert!(err.to_string().starts_with(SOURCE), "{err}");
        }
        let err = load_err("MCP_SERVERS: {}\nmcpServers: {}\n");
        assert_eq!(shape(&err), &ShapeError::BothFormats);
        assert_eq!(err.line(), Some(2));
        let err = load_err("MCP_SERVERS: {}\nMCP_SERVERS: {}\n");
        assert!(matches!(shape(&err), ShapeError::DuplicateField { .. }));
    }

    #[test]
    fn the_top_level_must_be_a_mapping() {
        for text in ["- a\n- b\n", "just text\n", "42\n"] {
            let err = load_err(text);
            assert!(
                matches!(shape(&err), ShapeError::WrongType { .. }),
                "{text}"
            );
        }
    }

    #[test]
    fn desktop_host_keys_are_tolerated_and_unknown_ones_logged() {
        let json = r#"{"mcpServers": {
            "fs": {"type": "stdio", "command": "npx", "disabled": false,
                   "alwaysAllow": ["read"], "autoApprove": [], "description": "d",
                   "transportType": "stdio", "envFile": ".env"},
            "web": {"type": "streamable-http", "url": "https://h.invalid/mcp",
                    "headers": {"Authorization": "Bearer header-secret-4321"}}
        }}"#;
        let (config, logs) = capture_logs(|| load(json));
        let config = config.unwrap();
        assert_eq!(config.servers.len(), 2);
        assert!(
            logs.contains("envFile") && logs.contains("headers"),
            "{logs}"
        );
        assert!(logs.contains("fs") && logs.contains("web"), "{logs}");
        // Keys every host writes are ignored quietly: at most a debug line, never a warning.
        let warnings: Vec<&str> = logs.lines().filter(|line| line.contains("WARN")).collect();
        assert_eq!(warnings.len(), 2, "{logs}");
        assert!(
            warnings.iter().all(|line| !line.contains("alwaysAllow")),
            "{logs}"
        );
        assert!(!logs.contains("header-secret-4321"), "{logs}");
        assert!(!logs.contains("Bearer"), "{logs}");
    }

    #[test]
    fn a_mismatched_desktop_type_is_logged_not_obeyed() {
        let json = r#"{"mcpServers": {"fs": {"type": "sse", "command": "npx"}}}"#;
        let (config, logs) = capture_logs(|| load(json));
        assert_eq!(config.unwrap().servers.len(), 1);
        assert!(logs.contains("type"), "{logs}");
    }

    #[test]
    fn disabled_desktop_entries_are_dropped_unexpanded_and_unvalidated() {
        let json = r#"{"mcpServers": {
            "on": {"command": "a"},
            "off": {"command": "${NOPE}", "url": "x", "disabled": true},
            "Not_A_Valid_Name": {"command": "b", "disabled": true}
        }}"#;
        let config = load_ok(json);
        assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["on"]);
        let err = load_err(r#"{"mcpServers": {"Bad_Name": {"command": "b", "disabled": false}}}"#);
        assert_eq!(violation(&err), &Violation::BadName);
        let err = load_err(r#"{"mcpServers": {"Bad_Name": {"command": "b", "url": "u"}}}"#);
        assert_eq!(violation(&err), &Violation::BadName);
    }

    #[test]
    fn unknown_yaml_fields_are_errors_naming_server_field_and_line() {
        let text = "MCP_SERVERS:\n  fs:\n    COMMAND: npx\n    ARG: [a, b]\n";
        let err = load_err(text);
        assert_eq!(
            shape(&err),
            &ShapeError::UnknownField {
                field: "ARG".into(),
                suggestion: Some("ARGS")
            }
        );
        assert_eq!(err.server(), Some("fs"));
        assert_eq!(err.line(), Some(4));
        assert_eq!(
            err.to_string(),
            "servers.yaml: server \"fs\": unknown field ARG (did you mean ARGS?) at line 4 column 5"
        );
        let err = load_err(&one("fs", "{command: npx}"));
        assert!(
            err.to_string()
                .contains("unknown field command (did you mean COMMAND?)"),
            "{err}"
        );
        let err = load_err(&one("fs", "{COMMAND: npx, HEADERS: {}}"));
        assert!(
            err.to_string()
                .ends_with("unknown field HEADERS at line 2 column 22"),
            "{err}"
        );
    }

    #[test]
    fn shape_errors_name_the_field_and_the_kind_found() {
        for (entry, what, found) in [
            ("{COMMAND: x, ARGS: \"-y foo\"}", "ARGS", "a string"),
            ("{COMMAND: x, ARGS: {a: b}}", "ARGS", "a mapping"),
            ("{COMMAND: x, ENV: [a]}", "ENV", "a list"),
            ("{COMMAND: x, ENV: \"A=b\"}", "ENV", "a string"),
            ("{COMMAND: [a, b]}", "COMMAND", "a list or a mapping"),
            (
                "{COMMAND: x, ARGS: [[a]]}",
                "ARGS[0]",
                "a list or a mapping",
            ),
            (
                "{COMMAND: x, ENV: {A: {b: c}}}",
                "ENV.A",
                "a list or a mapping",
            ),
        ] {
            let err = load_err(&one("fs", entry));
            match shape(&err) {
                ShapeError::WrongType {
                    what: w, found: f, ..
                } => {
                    assert_eq!((w.as_str(), *f), (what, found), "{entry}");
                }
                other => panic!("{entry}: {other}"),
            }
            assert_eq!(err.server(), Some("fs"), "{entry}");
            assert_eq!(err.line(), Some(2), "{entry}");
        }
        let err = load_err(&one("fs", "42"));
        assert!(matches!(shape(&err), ShapeError::WrongType { .. }));
    }

    #[test]
    fn null_list_elements_and_env_values_are_errors() {
        let err = load_err(&one("fs", "{COMMAND: x, ARGS: [a, ~]}"));
        assert_eq!(
            shape(&err),
            &ShapeError::Null {
                what: "ARGS[1]".into()
            }
        );
        // A key without a value is named by its position, whatever it looks like: see
        // `env_keys_that_may_be_secrets_are_named_by_position`.
        let err = load_err(&one("fs", "{COMMAND: x, ENV: {A: }}"));
        assert_eq!(shape(&err), &ShapeError::NullEnvValue { position: 1 });
    }

    #[test]
    fn duplicates_are_errors() {
        let err = load_err("MCP_SERVERS:\n  fs: {COMMAND: a}\n  fs: {COMMAND: b}\n");
        assert_eq!(shape(&err), &ShapeError::DuplicateServer);
        assert_eq!(err.line(), Some(3));
        let err = load_err(&one("fs", "{COMMAND: a, COMMAND: b}"));
        assert_eq!(
            shape(&err),
            &ShapeError::DuplicateField {
                field: "COMMAND".into()
            }
        );
        let err = load_err(&one("fs", "{COMMAND: a, ENV: {A: x, A: y}}"));
        assert_eq!(
            shape(&err),
            &ShapeError::DuplicateEnvKey {
                position: 2,
                first: 1
            }
        );
    }

    /// `NAME:value` without the space, `NAME value`, a duplicate: YAML reads the typo as one key
    /// holding the secret, and the error about that key must not quote it.
    #[test]
    fn errors_about_env_keys_that_are_not_names_give_a_position_not_the_key() {
        let secret = "ghp_x1234";
        let cases = [
            // (document, line, column of what the error points at)
            // The key.
            (
                format!("{{COMMAND: a, ENV: {{GITHUB_TOKEN:{secret}}}}}"),
                2,
                25,
            ),
            (
                format!("{{COMMAND: a, ENV: {{GITHUB_TOKEN {secret}}}}}"),
                2,
                25,
            ),
            // The second key.
            (
                format!("{{COMMAND: a, ENV: {{\"T {secret}\": x, \"T {secret}\": y}}}}"),
                2,
                44,
            ),
            // The entry (expansion errors point at the server's entry).
            (
                format!("{{COMMAND: a, ENV: {{\"T:{secret}\": \"${{NOPE}}\"}}}}"),
                2,
                7,
            ),
        ];
        for (entry, line, column) in cases {
            let err = load_err(&one("fs", &entry));
            let text = format!("{} {err:?}", chain(&err));
            assert!(!text.contains(secret), "{text}");
            assert!(!text.contains("GITHUB_TOKEN"), "{text}");
            assert!(text.contains("ENV"), "{text}");
            assert_eq!(
                (err.line(), err.locus().unwrap().column),
                (Some(line), Some(column)),
                "{text}"
            );
        }
        let err = load_err(&one("fs", "{COMMAND: a, ENV: {GITHUB_TOKEN:ghp_x1234}}"));
        assert_eq!(shape(&err), &ShapeError::NullEnvValue { position: 1 });
        assert!(err.to_string().contains("space after the colon"), "{err}");
        let err = load_err(&one("fs", "{COMMAND: a, ENV: {a-b: x, a-b: y}}"));
        assert_eq!(
            shape(&err),
            &ShapeError::DuplicateEnvKey {
                position: 2,
                first: 1
            }
        );
        // A variable name with a value is shown: it says which entry to fix.
        let err = load_err(&one("fs", "{COMMAND: a, ENV: {A_1: \"${NOPE}\"}}"));
        assert!(
            chain(&err).contains("cannot expand ENV.A_1"),
            "{}",
            chain(&err)
        );
    }

    /// A token pasted where a variable name belongs is often a valid name itself (GitHub's
    /// `ghp_...` is): a key without a value, or a repeated key, is never shown, whatever it looks
    /// like, and any key that is not a variable name is named by its position (`ENV key #2`),
    /// in both formats.
    #[test]
    fn env_keys_that_may_be_secrets_are_named_by_position() {
        let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        let desktop = |env: &str| {
            format!("{{\"mcpServers\": {{\"fs\": {{\"command\": \"a\", \"env\": {env}}}}}}}")
        };
        let cases = [
            // (document, the error expected, what the message says)
            (
                one(
                    "fs",
                    &format!("{{COMMAND: a, ENV: {{A: x, {token}: null}}}}"),
                ),
                ShapeError::NullEnvValue { position: 2 },
                "ENV key #2 has no value",
            ),
            (
                one("fs", &format!("{{COMMAND: a, ENV: {{A: x, {token}}}}}")),
                ShapeError::NullEnvValue { position: 2 },
                "ENV key #2 has no value",
            ),
            (
                one(
                    "fs",
                    &format!("{{COMMAND: a, ENV: {{{token}: x, B: y, {token}: z}}}}"),
                ),
                ShapeError::DuplicateEnvKey {
                    position: 3,
                    first: 1,
                },
                "ENV key #3 repeats key #1",
            ),
            (
                desktop(&format!("{{\"A\": \"x\", \"{token}\": null}}")),
                ShapeError::NullEnvValue { position: 2 },
                "ENV key #2 has no value",
            ),
            (
                desktop(&format!("{{\"{token}\": \"x\", \"{token}\": \"y\"}}")),
                ShapeError::DuplicateEnvKey {
                    position: 2,
                    first: 1,
                },
                "ENV key #2 repeats key #1",
            ),
            (
                one(
                    "fs",
                    &format!("{{COMMAND: a, ENV: {{A: x, \"T {token}\": [1]}}}}"),
                ),
                ShapeError::WrongType {
                    what: "the value of ENV key #2".into(),
                    expected: "a string",
                    found: "a list or a mapping",
                },
                "the value of ENV key #2 must be a string",
            ),
        ];
        for (document, expected, says) in cases {
            let err = load_err(&document);
            let text = format!("{} {err:?}", chain(&err));
            assert!(!text.contains(token), "{text}");
            assert!(!text.contains("ghp_"), "{text}");
            assert_eq!(shape(&err), &expected, "{document}");
            assert!(text.contains(says), "{text}");
            assert!(text.contains("server \"fs\""), "{text}");
        }
        // An expansion error in the value of a key that is not a variable name.
        let err = load_err(&one(
            "fs",
            &format!("{{COMMAND: a, ENV: {{A: x, \"T:{token}\": \"${{NOPE}}\"}}}}"),
        ));
        let text = format!("{} {err:?}", chain(&err));
        assert!(!text.contains(token), "{text}");
        assert!(
            text.contains("cannot expand the value of ENV key #2"),
            "{text}"
        );
    }

    #[test]
    fn env_keys_must_be_usable() {
        for key in ["\"\"", "\"A=B\""] {
            let err = load_err(&one(
                "fs",
                &format!("{{COMMAND: a, ENV: {{B: x, {key}: x}}}}"),
            ));
            assert_eq!(
                shape(&err),
                &ShapeError::InvalidEnvKey { position: 2 },
                "{key}"
            );
            assert!(err.to_string().contains("ENV key #2"), "{err}");
        }
    }

    #[test]
    fn syntax_errors_carry_the_source_and_line() {
        let err = load_err("MCP_SERVERS:\n  fs: {COMMAND: npx\n  other: 1\n");
        match &err {
            ConfigError::Syntax { locus, .. } => {
                assert_eq!(locus.source_name, SOURCE);
                assert_eq!(locus.server, None);
                assert!(locus.line.is_some());
            }
            other => panic!("{}", chain(other)),
        }
        assert!(err.to_string().starts_with("servers.yaml: "), "{err}");
        let err = load_err("---\nMCP_SERVERS: {}\n---\nMCP_SERVERS: {}\n");
        assert!(matches!(err, ConfigError::Syntax { .. }), "{err}");
    }

    #[test]
    fn rule_errors_point_at_the_entry() {
        let text = "MCP_SERVERS:\n  ok: {COMMAND: a}\n  fs:\n    COMMAND: npx\n    URL: https://h.invalid\n";
        let err = load_err(text);
        assert_eq!(violation(&err), &Violation::CommandAndUrl);
        assert_eq!(err.line(), Some(4));
        assert!(err.to_string().ends_with(" at line 4 column 5"), "{err}");
    }
}

/// Secrets must not appear in Debug output, the dump, errors or logs.
mod redaction {
    use super::*;

    const SECRETS: [&str; 6] = [
        "sk-live-1234",
        "sk-env-5678",
        "sk-token-9012",
        "user-secret-3456",
        "gh-secret-from-env",
        "remote-secret-from-env",
    ];

    fn assert_clean(what: &str, text: &str) {
        for secret in SECRETS {
            assert!(!text.contains(secret), "{what} leaks {secret}: {text}");
        }
        // No fragment of a literal secret either.
        assert!(!text.contains("sk-"), "{what} leaks a fragment: {text}");
    }

    fn assert_error_clean(err: &ConfigError) {
        assert_clean("error Display", &err.to_string());
        assert_clean("error Debug", &format!("{err:?}"));
        assert_clean("error chain", &chain(err));
        let mut source = err.source();
        while let Some(cause) = source {
            assert_clean("error source Debug", &format!("{cause:?}"));
            source = cause.source();
        }
    }

    const SECRET_CONFIG: &str = r#"
MCP_SERVERS:
  fs:
    COMMAND: npx
    ARGS: ["-p", "sk-live-1234"]
    ENV: { API_KEY: "sk-env-5678", FROM_ENV: "${GH_TOKEN}" }
    TOKEN: "sk-token-9012"
  remote:
    URL: "https://example.invalid/mcp?key=sk-live-1234"
    AUTH: basic
    USERNAME: user-secret-3456
    TOKEN: "sk-token-9012"
  url-creds:
    URL: "https://user-secret-3456:sk-live-1234@example.invalid/mcp?key=sk-live-1234"
    AUTH: none
  env-token:
    URL: https://example.invalid/readonly
    AUTH: bearer
    TOKEN: "${REMOTE_TOKEN}"
"#;

    #[test]
    fn debug_output_and_the_dump_hide_every_secret() {
        let config = load_ok(SECRET_CONFIG);
        let fs = &config.servers["fs"];
        let remote = &config.servers["remote"];
        // The secrets did load.
        assert_eq!(stdio(fs).args[1], "sk-live-1234");
        assert_eq!(http(remote).username.as_deref(), Some("user-secret-3456"));

        let outputs = [
            ("Config Debug", format!("{config:?}")),
            ("Config pretty Debug", format!("{config:#?}")),
            ("ServerConfig Debug", format!("{fs:?} {remote:?}")),
            (
                "Transport Debug",
                format!("{:?} {:?}", fs.transport, remote.transport),
            ),
            ("StdioConfig Debug", format!("{:?}", stdio(fs))),
            ("HttpConfig Debug", format!("{:?}", http(remote))),
            ("dump", config.to_string()),
        ];
        for (what, text) in &outputs {
            assert_clean(what, text);
            assert!(text.contains("REDACTED"), "{what}: {text}");
        }

        let stdio_debug = format!("{:?}", stdio(fs));
        assert!(stdio_debug.contains("command: \"npx\""), "{stdio_debug}");
        assert!(stdio_debug.contains("args: [REDACTED; 2]"), "{stdio_debug}");
        assert!(stdio_debug.contains("env: [REDACTED; 2]"), "{stdio_debug}");
        assert!(!stdio_debug.contains("API_KEY"), "{stdio_debug}");
        let http_debug = format!("{:?}", http(remote));
        assert!(
            http_debug.contains("token: Some([REDACTED])"),
            "{http_debug}"
        );
        assert!(
            http_debug.contains("username: Some([REDACTED])"),
            "{http_debug}"
        );
        assert!(
            http_debug.contains("\"https://example.invalid/mcp?[REDACTED]\""),
            "{http_debug}"
        );
        // Credentials in the URL (with AUTH none: with a mode that sends a header they are an
        // error) are redacted with the query.
        let url_debug = format!("{:?}", http(&config.servers["url-creds"]));
        assert!(
            url_debug.contains("https://[REDACTED]@example.invalid/mcp?[REDACTED]"),
            "{url_debug}"
        );
        let server_debug = format!("{fs:?}");
        assert!(server_debug.contains("name: \"fs\""), "{server_debug}");
    }

    #[test]
    fn the_dump_shows_the_effective_config() {
        let config = load_ok(SECRET_CONFIG);
        let dump = config.to_string();
        let expected = r#"MCP_SERVERS:
  env-token:
    URL: "https://example.invalid/readonly"
    AUTH: bearer
    TOKEN: [REDACTED]
    TIMEOUT: 5m
    REQUIRES_CONSENT: false
    # serial: false
  fs:
    COMMAND: "npx"
    ARGS: [REDACTED; 2]
    ENV: [REDACTED; 2]
    TIMEOUT: 5m
    EOF_GRACE: 2s
    TERM_GRACE: 2s
    ERA: auto
    PROBE_TIMEOUT: 3s
    REQUIRES_CONSENT: true
    # serial: true
  remote:
    URL: "https://example.invalid/mcp?[REDACTED]"
    AUTH: basic
    TOKEN: [REDACTED]
    USERNAME: [REDACTED]
    TIMEOUT: 5m
    REQUIRES_CONSENT: true
    # serial: true
  url-creds:
    URL: "https://[REDACTED]@example.invalid/mcp?[REDACTED]"
    AUTH: none
    TIMEOUT: 5m
    REQUIRES_CONSENT: true
    # serial: true
"#;
        assert_eq!(dump, expected);
        assert_eq!(Config::default().to_string(), "MCP_SERVERS: {}\n");
    }

    #[test]
    fn errors_never_carry_secret_values() {
        let cases: Vec<String> = [
            // Rule violations in entries holding secrets.
            "{COMMAND: npx, URL: \"https://h.invalid\", ARGS: [\"-p\", \"sk-live-1234\"], TOKEN: sk-token-9012}",
            "{URL: \"https://h.invalid\", ARGS: [\"-p\", \"sk-live-1234\"], ENV: {K: sk-env-5678}}",
            "{COMMAND: npx, AUTH: bearer, TOKEN: sk-token-9012, ARGS: [sk-live-1234]}",
            "{URL: \"https://h.invalid\", AUTH: basic, TOKEN: sk-token-9012}",
            "{COMMAND: npx, ARGS: [sk-live-1234], TIMEOUT: 0s}",
            // Values in the wrong place or of the wrong type.
            "{COMMAND: npx, ENV: \"sk-env-5678\"}",
            "{COMMAND: npx, ARGS: \"sk-live-1234\"}",
            "{COMMAND: npx, ARGS: 12345678}",
            "{COMMAND: npx, ARGS: [[sk-live-1234]]}",
            "{COMMAND: npx, ENV: {K: [sk-env-5678]}}",
            "{COMMAND: npx, ENV: !!int sk-env-5678}",
            "{COMMAND: npx, ENV: !!str sk-env-5678}",
            "{COMMAND: npx, ARGS: !!bool sk-live-1234}",
            "{COMMAND: npx, ARGS: !custom sk-live-1234}",
            "{COMMAND: npx, ARGS: [!!null sk-live-1234]}",
            "{URL: \"https://h.invalid\", TOKEN: !!null sk-token-9012}",
            "{COMMAND: npx, REQUIRES_CONSENT: sk-live-1234}",
            "{COMMAND: npx, TIMEOUT: sk-live-1234}",
            "{COMMAND: npx, TIMEOUT: 5sk-live-1234}",
            "{COMMAND: npx, AUTH: sk-token-9012}",
            "!!int sk-live-1234",
            // Expansion failures inside secret values.
            "{COMMAND: npx, ARGS: [\"sk-live-1234${NOPE}\"]}",
            "{COMMAND: npx, ARGS: [\"sk-live-1234${\"]}",
            "{COMMAND: npx, ENV: {K: \"sk-env-5678${bad name}\"}}",
            "{URL: \"https://h.invalid\", AUTH: bearer, TOKEN: \"sk-token-9012$NOPE\"}",
            "{URL: \"https://sk-live-1234@${NOPE}\"}",
            "{URL: \"sk-live-1234\"}",
        ]
        .iter()
        .map(|entry| one("fs", entry))
        .chain(
            [
                // Syntax errors next to secrets.
                "MCP_SERVERS:\n  fs: {COMMAND: npx, ARGS: [\"sk-live-1234\"\n",
                "MCP_SERVERS:\n  fs: {COMMAND: npx, TOKEN: \"sk-token-9012\n",
                "MCP_SERVERS:\n  fs:\n    ARGS:\n    - sk-live-1234\n   - x\n",
                "MCP_SERVERS: !!int sk-live-1234\n",
                "!!int sk-live-1234\n",
                "MCP_SERVERS:\n  fs: {COMMAND: npx, ARGS: *sk-live-1234}\n",
                "MCP_SERVERS:\n  fs: {COMMAND: npx, ARGS: \"\\xZZsk-live-1234\"}\n",
                r#"{"mcpServers": {"fs": {"command": "npx", "args": "sk-live-1234"}}}"#,
                r#"{"mcpServers": {"fs": {"command": "npx", "env": {"K": 5678}, "args": ["sk-live-1234", 1]}, "x": 1}}"#,
                r#"{"mcpServers": {"fs": {"url": "https://h.invalid", "auth": "bearer", "token": ""}, "y": {"token": "sk-token-9012"}}}"#,
            ]
            .iter()
            .map(|text| text.to_string()),
        )
        .collect();
        for text in &cases {
            let err = match load(text) {
                Ok(config) => panic!("loaded: {text}: {config:?}"),
                Err(err) => err,
            };
            assert_error_clean(&err);
        }
    }

    #[test]
    fn loading_logs_nothing_secret() {
        let json = r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-p", "sk-live-1234"], "env": {"K": "sk-env-5678"},
                   "token": "sk-token-9012", "username": "user-secret-3456", "auth": "gh",
                   "headers": {"Authorization": "Bearer sk-live-1234"}, "sk-live-1234-key": 1,
                   "type": "sse"},
            "remote": {"url": "https://h.invalid/mcp", "auth": "none", "token": "sk-token-9012",
                       "username": "${user-secret-3456}"},
            "off": {"command": "sk-live-1234", "disabled": true}
        }}"#;
        let (result, logs) = capture_logs(|| load(json));
        let config = result.unwrap();
        assert_clean("debug output", &format!("{config:?}"));
        // Something was logged, naming servers and fields, not values.
        assert!(
            logs.contains("TOKEN") && logs.contains("USERNAME"),
            "{logs}"
        );
        assert!(logs.contains("headers"), "{logs}");
        assert!(
            !logs.contains("sk-token") && !logs.contains("sk-env"),
            "{logs}"
        );
        assert!(!logs.contains("user-secret-3456"), "{logs}");
        // An unknown key is printed as the key it is; keys are not secret. Nothing else may
        // mention the positional or header secret.
        let without_key = logs.replace("sk-live-1234-key", "KEY");
        assert_clean("logs", &without_key);

        let (result, logs) = capture_logs(|| load(SECRET_CONFIG));
        result.unwrap();
        assert_clean("logs", &logs);
    }

    #[test]
    fn failed_loads_log_nothing_secret() {
        for text in [
            one(
                "fs",
                "{COMMAND: npx, AUTH: bearer, TOKEN: sk-token-9012, ARGS: [sk-live-1234]}",
            ),
            one("fs", "{COMMAND: npx, ENV: !!int sk-env-5678}"),
        ] {
            let (result, logs) = capture_logs(|| load(&text));
            assert_error_clean(&result.unwrap_err());
            assert_clean("logs", &logs);
        }
    }
}

/// Collects what tracing writes while `f` runs, at every level.
fn capture_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
        type Writer = Buffer;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(buffer.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, f);
    let logs = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    (result, logs)
}

/// Size and nesting bounds: a pathological document is rejected before the YAML parser, whose
/// cost grows with the square of the nesting, ever sees it.
mod bounds {
    use super::*;
    use mcp_stdio_client::config::{LimitError, MAX_BYTES, MAX_DEPTH};

    fn limit(err: &ConfigError) -> &LimitError {
        match err {
            ConfigError::Limit { problem, .. } => problem,
            other => panic!("expected a limit error, got: {}", chain(other)),
        }
    }

    #[test]
    fn deep_flow_nesting_under_an_ignored_key_is_rejected_with_its_position() {
        let text = format!("other: {}\nMCP_SERVERS: {{}}\n", "[".repeat(100_000));
        let err = load_err(&text);
        assert_eq!(limit(&err), &LimitError::TooDeep);
        assert_eq!(err.line(), Some(1));
        // `other:` opens a mapping (level 1), so the bound is passed at the MAX_DEPTH-th `[`.
        assert_eq!(err.locus().unwrap().column, Some(7 + MAX_DEPTH));
        let message = err.to_string();
        assert!(
            message.starts_with("servers.yaml: ")
                && message.contains(&format!("nested more than {MAX_DEPTH} levels"))
                && message.ends_with(&format!("at line 1 column {}", 7 + MAX_DEPTH)),
            "{message}"
        );
    }

    #[test]
    fn the_depth_bound_counts_closed_and_block_nesting_too() {
        let nested = |levels: usize| {
            format!(
                "other: {}{}\nMCP_SERVERS: {{}}\n",
                "[".repeat(levels),
                "]".repeat(levels)
            )
        };
        load_ok(&nested(MAX_DEPTH - 1));
        assert_eq!(limit(&load_err(&nested(MAX_DEPTH))), &LimitError::TooDeep);
        let mut block = String::from("MCP_SERVERS: {}\nother:\n");
        for level in 1..=MAX_DEPTH {
            block.push_str(&" ".repeat(level));
            block.push_str("a:\n");
        }
        assert_eq!(limit(&load_err(&block)), &LimitError::TooDeep);
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!(
            "MCP_SERVERS:\n  fs: {{COMMAND: x, ARGS: [\"{0}\", '{0}']}}\n# {0}\n",
            "[".repeat(1000)
        );
        assert_eq!(stdio(&server(&text, "fs")).args.len(), 2);
    }

    #[test]
    fn an_oversized_document_is_rejected_before_parsing() {
        let text = format!("MCP_SERVERS: {{}}\n#{}\n", "x".repeat(MAX_BYTES));
        let err = load_err(&text);
        assert_eq!(limit(&err), &LimitError::TooLarge);
        let expected = format!("larger than {} KiB", MAX_BYTES / 1024);
        assert!(err.to_string().contains(&expected), "{err}");
        // Right at the bound is fine.
        let text = format!("MCP_SERVERS: {{}}\n#{}", "x".repeat(MAX_BYTES - 17));
        assert_eq!(text.len(), MAX_BYTES);
        load_ok(&text);
    }

    #[test]
    fn load_reads_no_more_than_the_bound() {
        // An endless file: reading it whole would never finish.
        let err = Config::load(std::path::Path::new("/dev/zero")).unwrap_err();
        assert_eq!(limit(&err), &LimitError::TooLarge);
        assert!(err.to_string().starts_with("/dev/zero: "), "{err}");
    }

    /// The bound's point is speed: the rejection must not cost what parsing would. The real
    /// figure is in the config benchmark; this bucket only catches a return to seconds.
    #[test]
    fn a_rejected_document_fails_fast() {
        let text = format!("other: {}\nMCP_SERVERS: {{}}\n", "[".repeat(MAX_BYTES - 40));
        let started = std::time::Instant::now();
        let err = load_err(&text);
        assert_eq!(limit(&err), &LimitError::TooDeep);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
    }
}

mod eras {
    use mcp_stdio_client::{DEFAULT_PROBE_TIMEOUT, EraSetting};

    use super::*;

    #[test]
    fn era_and_probe_timeout_default_to_auto_and_a_few_seconds() {
        let fs = server(&one("fs", "{COMMAND: x}"), "fs");
        assert_eq!(stdio(&fs).era, EraSetting::Auto);
        assert_eq!(stdio(&fs).probe_timeout, DEFAULT_PROBE_TIMEOUT);
    }

    #[test]
    fn era_is_pinned_in_either_format_and_any_case() {
        let yaml = server(
            &one("old", "{COMMAND: x, ERA: Legacy, PROBE_TIMEOUT: 500ms}"),
            "old",
        );
        assert_eq!(stdio(&yaml).era, EraSetting::Legacy);
        assert_eq!(stdio(&yaml).probe_timeout, Duration::from_millis(500));
        let desktop = server(
            r#"{"mcpServers": {"new": {"command": "x", "era": "modern", "probeTimeout": 2}}}"#,
            "new",
        );
        assert_eq!(stdio(&desktop).era, EraSetting::Modern);
        assert_eq!(stdio(&desktop).probe_timeout, Duration::from_secs(2));
    }

    #[test]
    fn an_unknown_era_names_the_choices() {
        let err = load_err(&one("fs", "{COMMAND: x, ERA: future}"));
        assert_eq!(violation(&err), &Violation::UnknownEra);
        assert!(
            chain(&err).contains("ERA must be one of auto, modern, legacy"),
            "{}",
            chain(&err)
        );
    }

    #[test]
    fn era_fields_are_stdio_only() {
        let err = load_err(&one(
            "web",
            "{URL: \"https://example.invalid/mcp\", ERA: legacy}",
        ));
        assert_eq!(violation(&err), &Violation::StdioOnly { field: "ERA" });
        let err = load_err(&one(
            "web",
            "{URL: \"https://example.invalid/mcp\", PROBE_TIMEOUT: 1s}",
        ));
        assert_eq!(
            violation(&err),
            &Violation::StdioOnly {
                field: "PROBE_TIMEOUT"
            }
        );
    }
}
