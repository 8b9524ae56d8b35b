//! The fixture servers in each host's own configuration format
//! (`mcp-conformance host --format`), written into the run's temporary home
//! or working directory; and the environment that points each model SDK at
//! the stand-in endpoint (`--model-api`).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde_json::{Value, json};

use crate::client_check::host::Entry;

use super::model::MODEL;

/// A host's configuration format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `{"mcpServers": …}` in the run directory's `mcp.json`: Claude Code's `--mcp-config`,
    /// the MCP Inspector's `--config`.
    McpJson,
    /// Claude Code's user config, `{home}/.claude.json` (`mcpServers` at
    /// user scope).
    ClaudeJson,
    /// Codex's `{home}/.codex/config.toml` (`[mcp_servers.NAME]`, and a
    /// model provider for the stand-in endpoint); `CODEX_HOME` is set.
    CodexToml,
    /// Gemini CLI's `{home}/.gemini/settings.json`, the servers trusted, the
    /// working directory a trusted folder.
    GeminiSettings,
    /// Qwen Code's `{home}/.qwen/settings.json` (Gemini CLI's format).
    QwenSettings,
    /// opencode's `{dir}/opencode.json` (`mcp` entries of type `local`, and
    /// a provider for the stand-in endpoint).
    OpencodeJson,
}

/// The wire format the host's model SDK speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelApi {
    /// Anthropic Messages: `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`.
    Anthropic,
    /// OpenAI Chat Completions: `OPENAI_BASE_URL` (…/v1), `OPENAI_API_KEY`.
    Openai,
    /// OpenAI Responses: the same variables as `openai`.
    OpenaiResponses,
    /// Gemini: `GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY`.
    Gemini,
}

/// The dummy key every SDK is given: the endpoint accepts any.
pub const DUMMY_KEY: &str = "sk-mcp-conformance-stand-in";

/// Where the run's files are.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `{home}`: the host's `HOME`.
    pub home: PathBuf,
    /// `{dir}`: the host's working directory.
    pub dir: PathBuf,
}

/// The environment that points `api`'s SDKs at the endpoint `url`
/// (`http://127.0.0.1:PORT`), with `layout`'s home.
pub fn environment(api: Option<ModelApi>, url: &str, layout: &Layout) -> BTreeMap<String, String> {
    let home = layout.home.display().to_string();
    let mut env = BTreeMap::from([
        ("HOME".to_owned(), home.clone()),
        // A host that follows XDG keeps its state in the run's home too.
        ("XDG_CONFIG_HOME".to_owned(), format!("{home}/.config")),
        ("XDG_DATA_HOME".to_owned(), format!("{home}/.local/share")),
        ("XDG_STATE_HOME".to_owned(), format!("{home}/.local/state")),
        ("XDG_CACHE_HOME".to_owned(), format!("{home}/.cache")),
        ("CODEX_HOME".to_owned(), format!("{home}/.codex")),
        ("MCP_CONFORMANCE_MODEL_URL".to_owned(), url.to_owned()),
        // The host runs in `{dir}`; a host that asks `PWD` for its project
        // (opencode does) must not get the caller's directory.
        ("PWD".to_owned(), layout.dir.display().to_string()),
    ]);
    let vars: &[(&str, String)] = match api {
        None => &[],
        Some(ModelApi::Anthropic) => &[
            ("ANTHROPIC_BASE_URL", url.to_owned()),
            ("ANTHROPIC_API_KEY", DUMMY_KEY.to_owned()),
        ],
        Some(ModelApi::Openai | ModelApi::OpenaiResponses) => &[
            ("OPENAI_BASE_URL", format!("{url}/v1")),
            ("OPENAI_API_KEY", DUMMY_KEY.to_owned()),
            // Codex reads its own key variable before OPENAI_API_KEY.
            ("CODEX_API_KEY", DUMMY_KEY.to_owned()),
        ],
        Some(ModelApi::Gemini) => &[
            ("GOOGLE_GEMINI_BASE_URL", url.to_owned()),
            ("GEMINI_API_KEY", DUMMY_KEY.to_owned()),
            ("GOOGLE_GENAI_USE_VERTEXAI", "false".to_owned()),
        ],
    };
    env.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    env
}

/// Writes `servers` in `format` under `layout`; returns `{config}`, the
/// file written. `mcp_json` is the `mcp.json` already written.
pub fn write(
    format: Format,
    api: Option<ModelApi>,
    url: &str,
    servers: &[Entry],
    mcp_json: &Path,
    layout: &Layout,
) -> std::io::Result<PathBuf> {
    let plain =
        |entry: &Entry| json!({ "command": entry.command, "args": entry.args, "env": entry.env });
    let (path, text) = match format {
        Format::McpJson => return Ok(mcp_json.to_owned()),
        Format::ClaudeJson => {
            let servers: serde_json::Map<String, Value> = servers
                .iter()
                .map(|e| {
                    let mut entry = plain(e);
                    entry["type"] = json!("stdio");
                    (e.name.clone(), entry)
                })
                .collect();
            let dir = layout.dir.display().to_string();
            (
                layout.home.join(".claude.json"),
                pretty(&json!({
                    "hasCompletedOnboarding": true,
                    "mcpServers": servers,
                    "projects": { dir: {
                        "hasTrustDialogAccepted": true,
                        "hasCompletedProjectOnboarding": true,
                    }},
                })),
            )
        }
        Format::CodexToml => (
            layout.home.join(".codex").join("config.toml"),
            codex_toml(api, url, servers),
        ),
        Format::GeminiSettings | Format::QwenSettings => {
            let servers: serde_json::Map<String, Value> = servers
                .iter()
                .map(|e| {
                    let mut entry = plain(e);
                    // Trusted: its tools are called without a confirmation.
                    entry["trust"] = json!(true);
                    (e.name.clone(), entry)
                })
                .collect();
            let home = if format == Format::GeminiSettings {
                layout.home.join(".gemini")
            } else {
                layout.home.join(".qwen")
            };
            let dir = layout.dir.display().to_string();
            write_file(
                &home.join("trustedFolders.json"),
                &pretty(&json!({ dir: "TRUST_FOLDER" })),
            )?;
            let mut settings = json!({ "mcpServers": servers });
            // Gemini CLI takes a set GOOGLE_GEMINI_BASE_URL for a "gateway"
            // login that `-p` refuses ("Invalid auth method selected"): the
            // API key login, chosen here, reads the base URL too.
            if format == Format::GeminiSettings && api == Some(ModelApi::Gemini) {
                settings["security"] = json!({ "auth": { "selectedType": "gemini-api-key" } });
            }
            (home.join("settings.json"), pretty(&settings))
        }
        Format::OpencodeJson => (
            layout.dir.join("opencode.json"),
            opencode_json(api, url, servers),
        ),
    };
    write_file(&path, &text)?;
    Ok(path)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("a config serializes") + "\n"
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

/// A TOML basic string: a JSON string is one (same escapes).
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

fn codex_toml(api: Option<ModelApi>, url: &str, servers: &[Entry]) -> String {
    let mut out = String::from("# Written by `mcp-conformance host --format codex-toml`.\n");
    if let Some(wire) = match api {
        Some(ModelApi::Openai) => Some("chat"),
        Some(ModelApi::OpenaiResponses) => Some("responses"),
        _ => None,
    } {
        out += &format!(
            "model = {model}\nmodel_provider = \"mcp-conformance\"\napproval_policy = \"never\"\n\n\
             [model_providers.mcp-conformance]\nname = \"mcp-conformance stand-in\"\n\
             base_url = {base}\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"{wire}\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n\n",
            model = toml_string(MODEL),
            base = toml_string(&format!("{url}/v1")),
        );
    }
    for entry in servers {
        out += &format!(
            "[mcp_servers.{name}]\ncommand = {command}\nargs = [{args}]\n\n[mcp_servers.{name}.env]\n",
            name = toml_string(&entry.name),
            command = toml_string(&entry.command.display().to_string()),
            args = entry
                .args
                .iter()
                .map(|a| toml_string(a))
                .collect::<Vec<_>>()
                .join(", "),
        );
        for (key, value) in &entry.env {
            out += &format!("{} = {}\n", toml_string(key), toml_string(value));
        }
        out += "\n";
    }
    out
}

fn opencode_json(api: Option<ModelApi>, url: &str, servers: &[Entry]) -> String {
    let mcp: serde_json::Map<String, Value> = servers
        .iter()
        .map(|e| {
            let command: Vec<String> = std::iter::once(e.command.display().to_string())
                .chain(e.args.iter().cloned())
                .collect();
            (
                e.name.clone(),
                json!({ "type": "local", "command": command, "environment": e.env, "enabled": true }),
            )
        })
        .collect();
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json",
        "mcp": mcp,
        "permission": { "edit": "allow", "bash": "allow", "webfetch": "allow" },
        "autoupdate": false,
        "share": "disabled",
    });
    let models = json!({ MODEL: { "name": MODEL, "tool_call": true } });
    match api {
        Some(ModelApi::Openai | ModelApi::OpenaiResponses) => {
            config["provider"] = json!({ "mcp-conformance": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "mcp-conformance stand-in",
                "options": { "baseURL": format!("{url}/v1"), "apiKey": DUMMY_KEY },
                "models": models,
            }});
            config["model"] = json!(format!("mcp-conformance/{MODEL}"));
        }
        Some(ModelApi::Anthropic) => {
            config["provider"] = json!({ "anthropic": {
                "options": { "baseURL": format!("{url}/v1"), "apiKey": DUMMY_KEY },
                "models": models,
            }});
            config["model"] = json!(format!("anthropic/{MODEL}"));
        }
        _ => {}
    }
    pretty(&config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_strings_escape_quotes_and_backslashes() {
        assert_eq!(toml_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
