//! The server under test, as the client's own config: built from a
//! scenario's `server:`, or loaded from its `config:` with the client's
//! loader. Either way every stdio server is marked (marker, ledger).

use std::{collections::BTreeMap, path::PathBuf};

use mcp_stdio_client::{
    config::{Config, ServerConfig, StdioConfig, Transport},
    error_chain as chain,
};

use super::{DEFAULT_GRACE, DEFAULT_TIMEOUT, env::Env};
use crate::{
    outcome::{LoadOutcome, LoadedServer, Normalizer},
    scenario::{ServerSpec, Span},
};

/// The stdio config of a scenario's `server:`.
pub(crate) fn from_spec(env: &Env, spec: &ServerSpec) -> ServerConfig {
    let fixtures = env.fixtures.clone().unwrap_or_default();
    let mut stdio = match (&spec.fixture, &spec.command) {
        (Some(fixture), _) => {
            let mut stdio = StdioConfig::new(fixtures.join(fixture.binary()).to_string_lossy());
            stdio.args.push(format!("--marker={}", env.marker));
            stdio
        }
        (None, Some(command)) => StdioConfig::new(env.substitute(command)),
        (None, None) => unreachable!("validated: fixture or command"),
    };
    stdio
        .args
        .extend(spec.args.iter().map(|arg| env.substitute(arg)));
    for (key, value) in &spec.env {
        stdio.env.insert(key.clone(), env.substitute(value));
    }
    stdio.dir = spec
        .dir
        .as_deref()
        .map(|dir| PathBuf::from(env.substitute(dir)));
    let or = |value: Option<Span>, default| value.map_or(default, |span| span.0);
    stdio.eof_grace = or(spec.eof_grace, DEFAULT_GRACE);
    stdio.term_grace = or(spec.term_grace, DEFAULT_GRACE);
    stdio.era = spec.era.unwrap_or_default();
    stdio.probe_timeout = or(spec.probe_timeout, stdio.probe_timeout);
    stdio.restart.attempts = spec.restart.unwrap_or(0);
    stdio.restart.backoff = or(spec.restart_backoff, stdio.restart.backoff);
    env.mark(&mut stdio);
    let mut server = ServerConfig::stdio(spec.name.clone(), stdio);
    server.timeout = or(spec.timeout, DEFAULT_TIMEOUT);
    server
}

/// Loads a scenario's `config:` with the client's own loader. Returns the
/// config (if it loaded), the load outcome, and what the client said.
pub(crate) fn load_config(
    env: &Env,
    config_env: &BTreeMap<String, String>,
    text: &str,
    source: &str,
    normalizer: &Normalizer,
) -> (Option<Config>, LoadOutcome, Vec<String>) {
    let builtins = [
        ("FIXTURES", env.fixtures_dir()),
        ("MARKER", env.marker.clone()),
        ("LEDGER", env.ledger_path().to_string_lossy().into_owned()),
    ];
    let lookup = |var: &str| {
        config_env.get(var).cloned().or_else(|| {
            builtins
                .iter()
                .find(|(name, _)| *name == var)
                .map(|(_, value)| value.clone())
        })
    };
    let mut load = LoadOutcome::default();
    let mut words = Vec::new();
    match Config::from_str_with_env(text, source, &lookup) {
        Ok(mut config) => {
            load.ok = true;
            for server in config.servers.values_mut() {
                load.servers.push(LoadedServer {
                    name: server.name.clone(),
                    transport: match server.transport {
                        Transport::Stdio(_) => "stdio".into(),
                        Transport::Http(_) => "http".into(),
                    },
                    requires_consent: server.requires_consent,
                    serial: server.serial,
                });
                words.push(format!("{server:?}"));
                words.push(display(server));
                if let Transport::Stdio(stdio) = &mut server.transport {
                    env.mark(stdio);
                }
            }
            (Some(config), load, words)
        }
        Err(error) => {
            let text = chain(&error);
            words.push(text.clone());
            words.push(format!("{error:?}"));
            load.error = Some(normalizer.apply(&text));
            (None, load, words)
        }
    }
}

/// The config dump of one server, as a host would print it.
fn display(server: &ServerConfig) -> String {
    let mut config = Config::default();
    config.servers.insert(server.name.clone(), server.clone());
    config.to_string()
}
