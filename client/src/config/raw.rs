//! The raw model: one server entry as the document wrote it, before any rule is applied. It
//! is the output of `parse` and the input of `validate`, and knows neither.

/// Which of the two formats a document (or rather its servers key) is in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Dialect {
    /// `MCP_SERVERS` with UPPER_CASE fields; unknown fields are errors.
    Yaml,
    /// `mcpServers` with camelCase fields as desktop hosts write them; unknown keys are ignored.
    Desktop,
}

/// One server entry as written, before validation. It holds secrets, so it has no `Debug`.
#[derive(Default)]
pub(crate) struct RawServer {
    pub(crate) name: String,
    pub(crate) dialect: Option<Dialect>,
    pub(crate) command: Option<String>,
    pub(crate) args: Option<Vec<String>>,
    pub(crate) dir: Option<String>,
    /// In document order, without repeated keys (the parser refuses those), so that messages
    /// can name a key by its position.
    pub(crate) env: Option<Vec<(String, String)>>,
    pub(crate) timeout: Option<String>,
    pub(crate) requires_consent: Option<bool>,
    pub(crate) eof_grace: Option<String>,
    pub(crate) term_grace: Option<String>,
    pub(crate) era: Option<String>,
    pub(crate) probe_timeout: Option<String>,
    pub(crate) restart: Option<String>,
    pub(crate) restart_backoff: Option<String>,
    pub(crate) url: Option<String>,
    pub(crate) auth: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) username: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) disabled: Option<bool>,
}

/// Whether `key` is a variable name (`[A-Za-z_][A-Za-z0-9_]*`), the only kind of ENV key that
/// messages show. Anything else may be a value typed where a key belongs (`TOKEN:ghp_...`,
/// `TOKEN ghp_...`), so it is described by its position instead.
pub(crate) fn is_variable_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// How messages name the value of ENV key `key`, the `position`th of its mapping (from 1):
/// `ENV.NAME`, or `the value of ENV key #2` when the key is not a variable name and must not be
/// shown.
pub(crate) fn env_field(key: &str, position: usize) -> String {
    if is_variable_name(key) {
        format!("ENV.{key}")
    } else {
        format!("the value of ENV key #{position}")
    }
}
