//! Reads a document in either format (YAML `MCP_SERVERS`, desktop JSON `mcpServers`; a JSON file
//! is YAML, so one parser serves both) and turns each server entry into a [`ServerConfig`].
//!
//! The document is walked with hand-written serde visitors rather than derived structs, for two
//! reasons:
//! - **Positions.** Errors raised inside a visitor get the line and column of the value being
//!   read from `yaml_serde`. Each entry is validated and resolved inside the visitor of its
//!   mapping, so even a rule violation points at the entry.
//! - **No echoed values.** serde's stock errors quote the offending value
//!   (`invalid type: string "sk-live-1234", expected a map`), and any value may be a secret.
//!   Every visitor here reports what it found by kind only. Our own error is parked in
//!   [`Ctx::failure`] and the parser's error is used only for its position; the few errors the
//!   parser raises by itself are scrubbed of quoted text (see [`super::redact::scrub_quoted`]).
//!
//! Scalars are read with `deserialize_str`, which hands over the text as written (`0755`, `1.10`
//! and `true` stay exactly that), instead of the YAML-typed value.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

use super::error::{ConfigError, Locus, ShapeError};
use super::model::ServerConfig;
use super::raw::{Dialect, RawServer, env_field};
use super::redact;

/// What the later stages do with what this one reads, given by the caller so that parsing
/// knows nothing of them. Both run inside the visitor of the entry, so their errors get its
/// position.
pub(super) struct Stages<'a> {
    /// Judges a server name as soon as it is read (rule 1 of `validate`): in the YAML format
    /// it is checked before anything inside the entry.
    pub name: &'a dyn Fn(&str) -> Result<(), ConfigError>,
    /// Turns a complete raw entry into a server (`validate`, then `resolve`).
    pub entry: &'a dyn Fn(RawServer) -> Result<ServerConfig, ConfigError>,
}

/// The fields of a server entry, in both dialects.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Field {
    Command,
    Args,
    Dir,
    Env,
    Timeout,
    RequiresConsent,
    EofGrace,
    TermGrace,
    /// Which protocol era to speak: `auto`, `modern` or `legacy`.
    Era,
    /// The bound on the `server/discover` probe of `auto`.
    ProbeTimeout,
    /// How many restarts after an unexpected exit (0: never).
    Restart,
    /// The wait before the first restart (doubling after).
    RestartBackoff,
    Url,
    Auth,
    Token,
    Username,
    /// Desktop only: `type` (`stdio`, `http`, `sse`, ...), checked against command/url.
    Type,
    /// Desktop only: `disabled: true` drops the entry.
    Disabled,
}

impl Field {
    const ALL: [Field; 18] = [
        Field::Command,
        Field::Args,
        Field::Dir,
        Field::Env,
        Field::Timeout,
        Field::RequiresConsent,
        Field::EofGrace,
        Field::TermGrace,
        Field::Era,
        Field::ProbeTimeout,
        Field::Restart,
        Field::RestartBackoff,
        Field::Url,
        Field::Auth,
        Field::Token,
        Field::Username,
        Field::Type,
        Field::Disabled,
    ];

    /// The name used in messages for both dialects (the YAML spelling), so that one vocabulary
    /// runs through errors, logs and docs.
    pub(super) fn name(self) -> &'static str {
        match self {
            Field::Command => "COMMAND",
            Field::Args => "ARGS",
            Field::Dir => "DIR",
            Field::Env => "ENV",
            Field::Timeout => "TIMEOUT",
            Field::RequiresConsent => "REQUIRES_CONSENT",
            Field::EofGrace => "EOF_GRACE",
            Field::TermGrace => "TERM_GRACE",
            Field::Era => "ERA",
            Field::ProbeTimeout => "PROBE_TIMEOUT",
            Field::Restart => "RESTART",
            Field::RestartBackoff => "RESTART_BACKOFF",
            Field::Url => "URL",
            Field::Auth => "AUTH",
            Field::Token => "TOKEN",
            Field::Username => "USERNAME",
            Field::Type => "type",
            Field::Disabled => "disabled",
        }
    }

    fn key(self, dialect: Dialect) -> Option<&'static str> {
        match (dialect, self) {
            (Dialect::Yaml, Field::Type | Field::Disabled) => None,
            (Dialect::Yaml, field) => Some(field.name()),
            (Dialect::Desktop, field) => Some(match field {
                Field::Command => "command",
                Field::Args => "args",
                Field::Dir => "cwd",
                Field::Env => "env",
                Field::Timeout => "timeout",
                Field::RequiresConsent => "requiresConsent",
                Field::EofGrace => "eofGrace",
                Field::TermGrace => "termGrace",
                Field::Era => "era",
                Field::ProbeTimeout => "probeTimeout",
                Field::Restart => "restart",
                Field::RestartBackoff => "restartBackoff",
                Field::Url => "url",
                Field::Auth => "auth",
                Field::Token => "token",
                Field::Username => "username",
                Field::Type => "type",
                Field::Disabled => "disabled",
            }),
        }
    }

    fn from_key(dialect: Dialect, key: &str) -> Option<Field> {
        Field::ALL
            .into_iter()
            .find(|field| field.key(dialect) == Some(key))
    }

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// Desktop keys that hosts write for their own purposes and that have no meaning here; they are
/// ignored without a warning because nearly every real config has them.
const QUIET_DESKTOP_KEYS: [&str; 4] =
    ["alwaysAllow", "autoApprove", "description", "transportType"];

/// Parses `text` and returns its servers in document order, each validated and resolved.
pub(super) fn parse_document(
    text: &str,
    source_name: &str,
    stages: &Stages<'_>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let ctx = Ctx {
        source_name,
        stages,
        failure: RefCell::new(None),
    };
    let result = DocumentSeed { ctx: &ctx }.deserialize(yaml_serde::Deserializer::from_str(text));
    match result {
        Ok(Some(servers)) => Ok(servers),
        Ok(None) => Err(ConfigError::Shape {
            locus: Locus::document(source_name),
            problem: ShapeError::NoServersKey,
        }),
        Err(error) => {
            let position = error.location().map(|at| (at.line(), at.column()));
            match ctx.failure.take() {
                Some(mut failure) => {
                    if let Some((line, column)) = position {
                        failure.set_position(line, column);
                    }
                    Err(failure)
                }
                None => {
                    let mut locus = Locus::document(source_name);
                    locus.line = position.map(|(line, _)| line);
                    locus.column = position.map(|(_, column)| column);
                    Err(ConfigError::Syntax {
                        locus,
                        message: redact::scrub_quoted(&error.to_string()),
                    })
                }
            }
        }
    }
}

/// State shared by every visitor of one document.
struct Ctx<'a> {
    source_name: &'a str,
    stages: &'a Stages<'a>,
    /// The error our code raised, if any. serde errors can only carry a message, and the
    /// message is replaced by the parser's position anyway, so the structured error waits here
    /// and the parser's error is used only for where it happened.
    failure: RefCell<Option<ConfigError>>,
}

impl Ctx<'_> {
    fn fail<E: de::Error>(&self, error: ConfigError) -> E {
        self.failure.replace(Some(error));
        E::custom("invalid configuration")
    }

    fn locus(&self, server: Option<&str>) -> Box<Locus> {
        match server {
            Some(server) => Locus::server(self.source_name, server),
            None => Locus::document(self.source_name),
        }
    }

    fn shape<E: de::Error>(&self, server: Option<&str>, problem: ShapeError) -> E {
        self.fail(ConfigError::Shape {
            locus: self.locus(server),
            problem,
        })
    }

    fn wrong_type<E: de::Error>(
        &self,
        server: Option<&str>,
        what: &str,
        expected: &'static str,
        found: &'static str,
    ) -> E {
        self.shape(
            server,
            ShapeError::WrongType {
                what: what.to_owned(),
                expected,
                found,
            },
        )
    }
}

/// A visitor that reports any kind of value it does not accept as a shape error.
trait Reject {
    fn reject<E: de::Error>(&self, found: &'static str) -> E;
}

/// Implements the listed `visit_*` methods as rejections. serde's defaults for them would quote
/// the value in the error message.
macro_rules! reject {
    ($de:lifetime; $($kind:ident)*) => { $(reject!(@ $de $kind);)* };
    (@ $de:lifetime bool) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(self.reject("a boolean"))
        }
    };
    (@ $de:lifetime i64) => {
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Err(self.reject("a number"))
        }
    };
    (@ $de:lifetime u64) => {
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(self.reject("a number"))
        }
    };
    (@ $de:lifetime i128) => {
        fn visit_i128<E: de::Error>(self, _: i128) -> Result<Self::Value, E> {
            Err(self.reject("a number"))
        }
    };
    (@ $de:lifetime u128) => {
        fn visit_u128<E: de::Error>(self, _: u128) -> Result<Self::Value, E> {
            Err(self.reject("a number"))
        }
    };
    (@ $de:lifetime f64) => {
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(self.reject("a number"))
        }
    };
    (@ $de:lifetime str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Err(self.reject("a string"))
        }
    };
    (@ $de:lifetime bytes) => {
        fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Self::Value, E> {
            Err(self.reject("bytes"))
        }
    };
    (@ $de:lifetime unit) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(self.reject("null"))
        }
    };
    (@ $de:lifetime none) => {
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(self.reject("null"))
        }
    };
    (@ $de:lifetime seq) => {
        fn visit_seq<A: SeqAccess<$de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(self.reject("a list"))
        }
    };
    (@ $de:lifetime map) => {
        fn visit_map<A: MapAccess<$de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(self.reject("a mapping"))
        }
    };
    (@ $de:lifetime enum) => {
        fn visit_enum<A: EnumAccess<$de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(self.reject("a tagged value"))
        }
    };
}

/// The whole document: finds the servers key and ignores every other top-level key, since the
/// file may carry settings for other tools (desktop hosts keep theirs there).
struct DocumentSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
}

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_, '_> {
    type Value = Option<Vec<ServerConfig>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Reject for DocumentSeed<'_, '_> {
    fn reject<E: de::Error>(&self, found: &'static str) -> E {
        self.ctx
            .wrong_type(None, "the top level", "a mapping", found)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_, '_> {
    type Value = Option<Vec<ServerConfig>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let found = Cell::new(None);
        let mut servers = None;
        while let Some(key) = map.next_key_seed(TopKeySeed {
            ctx: self.ctx,
            found: &found,
        })? {
            match key {
                Some(dialect) => {
                    servers = Some(map.next_value_seed(ServersSeed {
                        ctx: self.ctx,
                        dialect,
                    })?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(servers)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    reject!('de; bool i64 u64 i128 u128 f64 str bytes seq enum);
}

/// A top-level key: `Some(dialect)` for a servers key, `None` for anything else.
struct TopKeySeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    found: &'c Cell<Option<Dialect>>,
}

impl<'de> DeserializeSeed<'de> for TopKeySeed<'_, '_> {
    type Value = Option<Dialect>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for TopKeySeed<'_, '_> {
    type Value = Option<Dialect>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        expecting_string(self.ctx, None, "a top-level key", f)
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        let dialect = match key {
            "MCP_SERVERS" => Dialect::Yaml,
            "mcpServers" => Dialect::Desktop,
            _ => return Ok(None),
        };
        match self.found.replace(Some(dialect)) {
            None => Ok(Some(dialect)),
            Some(earlier) if earlier == dialect => Err(self.ctx.shape(
                None,
                ShapeError::DuplicateField {
                    field: key.to_owned(),
                },
            )),
            Some(_) => Err(self.ctx.shape(None, ShapeError::BothFormats)),
        }
    }
}

/// `deserialize_str` raises its own error for a list or a mapping, with our visitor's
/// `expecting` as the text; that call is the one place we learn about it, so it records the
/// shape error there. The parser's message would be safe (it names only the kind), but this
/// keeps every shape error structured and naming its server.
fn expecting_string(
    ctx: &Ctx<'_>,
    server: Option<&str>,
    what: &str,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    ctx.failure.replace(Some(ConfigError::Shape {
        locus: ctx.locus(server),
        problem: ShapeError::WrongType {
            what: what.to_owned(),
            expected: "a string",
            found: "a list or a mapping",
        },
    }));
    f.write_str("a string")
}

/// The value of the servers key: a mapping from names to entries (null means no servers).
struct ServersSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    dialect: Dialect,
}

impl ServersSeed<'_, '_> {
    fn key(&self) -> &'static str {
        match self.dialect {
            Dialect::Yaml => "MCP_SERVERS",
            Dialect::Desktop => "mcpServers",
        }
    }
}

impl<'de> DeserializeSeed<'de> for ServersSeed<'_, '_> {
    type Value = Vec<ServerConfig>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Reject for ServersSeed<'_, '_> {
    fn reject<E: de::Error>(&self, found: &'static str) -> E {
        self.ctx.wrong_type(
            None,
            self.key(),
            "a mapping of server names to entries",
            found,
        )
    }
}

impl<'de> Visitor<'de> for ServersSeed<'_, '_> {
    type Value = Vec<ServerConfig>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping of server names to entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let names = RefCell::new(BTreeSet::new());
        let mut servers = Vec::new();
        while let Some(name) = map.next_key_seed(ServerNameSeed {
            ctx: self.ctx,
            names: &names,
        })? {
            let server = map.next_value_seed(ServerSeed {
                ctx: self.ctx,
                dialect: self.dialect,
                name: &name,
            })?;
            servers.extend(server);
        }
        Ok(servers)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    reject!('de; bool i64 u64 i128 u128 f64 str bytes seq enum);
}

/// A server name (a key of the servers mapping); duplicates are errors.
struct ServerNameSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    names: &'c RefCell<BTreeSet<String>>,
}

impl<'de> DeserializeSeed<'de> for ServerNameSeed<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for ServerNameSeed<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        expecting_string(self.ctx, None, "a server name", f)
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
        if !self.names.borrow_mut().insert(name.to_owned()) {
            return Err(self.ctx.shape(Some(name), ShapeError::DuplicateServer));
        }
        Ok(name.to_owned())
    }
}

/// One server entry. In the YAML format rule 1 (the name) is checked before anything inside the
/// entry; the other rules and expansion run once the whole entry is read, still inside this
/// visitor so that their errors carry the entry's position.
struct ServerSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    dialect: Dialect,
    name: &'c str,
}

impl ServerSeed<'_, '_> {
    fn check_name<E: de::Error>(&self) -> Result<(), E> {
        (self.ctx.stages.name)(self.name).map_err(|error| self.ctx.fail(error))
    }

    fn value<'de, A: MapAccess<'de>>(
        &self,
        map: &mut A,
        field: Field,
    ) -> Result<Option<String>, A::Error> {
        map.next_value_seed(OptionalSeed(StrSeed {
            ctx: self.ctx,
            server: self.name,
            what: field.name(),
        }))
    }

    fn flag<'de, A: MapAccess<'de>>(
        &self,
        map: &mut A,
        field: Field,
    ) -> Result<Option<bool>, A::Error> {
        map.next_value_seed(OptionalSeed(BoolSeed {
            ctx: self.ctx,
            server: self.name,
            field: field.name(),
        }))
    }
}

impl<'de> DeserializeSeed<'de> for ServerSeed<'_, '_> {
    type Value = Option<ServerConfig>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Reject for ServerSeed<'_, '_> {
    fn reject<E: de::Error>(&self, found: &'static str) -> E {
        match self.check_name::<E>() {
            Err(error) => error,
            Ok(()) => {
                self.ctx
                    .wrong_type(Some(self.name), "the entry", "a mapping of fields", found)
            }
        }
    }
}

impl<'de> Visitor<'de> for ServerSeed<'_, '_> {
    type Value = Option<ServerConfig>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping of fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // A desktop entry may turn out to be `disabled`, and hosts accept names the contract
        // does not; such an entry must not fail the load, so there the name waits for
        // `validate::check`, which starts with it.
        if self.dialect == Dialect::Yaml {
            self.check_name()?;
        }
        let seen = Cell::new(0);
        let mut raw = RawServer {
            name: self.name.to_owned(),
            dialect: Some(self.dialect),
            ..RawServer::default()
        };
        while let Some(field) = map.next_key_seed(FieldSeed {
            ctx: self.ctx,
            dialect: self.dialect,
            server: self.name,
            seen: &seen,
        })? {
            let Some(field) = field else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            match field {
                Field::Command => raw.command = self.value(&mut map, field)?,
                Field::Dir => raw.dir = self.value(&mut map, field)?,
                Field::Timeout => raw.timeout = self.value(&mut map, field)?,
                Field::EofGrace => raw.eof_grace = self.value(&mut map, field)?,
                Field::TermGrace => raw.term_grace = self.value(&mut map, field)?,
                Field::Era => raw.era = self.value(&mut map, field)?,
                Field::ProbeTimeout => raw.probe_timeout = self.value(&mut map, field)?,
                Field::Restart => raw.restart = self.value(&mut map, field)?,
                Field::RestartBackoff => raw.restart_backoff = self.value(&mut map, field)?,
                Field::Url => raw.url = self.value(&mut map, field)?,
                Field::Auth => raw.auth = self.value(&mut map, field)?,
                Field::Token => raw.token = self.value(&mut map, field)?,
                Field::Username => raw.username = self.value(&mut map, field)?,
                Field::Type => raw.kind = self.value(&mut map, field)?,
                Field::RequiresConsent => raw.requires_consent = self.flag(&mut map, field)?,
                Field::Disabled => raw.disabled = self.flag(&mut map, field)?,
                Field::Args => {
                    raw.args = map.next_value_seed(OptionalSeed(ArgsSeed {
                        ctx: self.ctx,
                        server: self.name,
                    }))?;
                }
                Field::Env => {
                    raw.env = map.next_value_seed(OptionalSeed(EnvSeed {
                        ctx: self.ctx,
                        server: self.name,
                    }))?;
                }
            }
        }
        if raw.disabled == Some(true) {
            // The host would not start it either; its ${VAR}s may well be unset.
            tracing::info!(server = %self.name, "server is disabled in the desktop config; skipped");
            return Ok(None);
        }
        let server = (self.ctx.stages.entry)(raw).map_err(|e| self.ctx.fail(e))?;
        Ok(Some(server))
    }

    reject!('de; bool i64 u64 i128 u128 f64 str bytes unit none seq enum);
}

/// A key of a server entry: `Some(field)`, or `None` for a desktop key that is ignored.
struct FieldSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    dialect: Dialect,
    server: &'c str,
    /// Bits of the fields already read, to reject duplicates.
    seen: &'c Cell<u32>,
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_, '_> {
    type Value = Option<Field>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_, '_> {
    type Value = Option<Field>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        expecting_string(self.ctx, Some(self.server), "a field name", f)
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        let Some(field) = Field::from_key(self.dialect, key) else {
            return match self.dialect {
                Dialect::Yaml => Err(self.ctx.shape(
                    Some(self.server),
                    ShapeError::UnknownField {
                        field: printable_key(key),
                        suggestion: suggest_field(key),
                    },
                )),
                Dialect::Desktop => {
                    let key = printable_key(key);
                    if QUIET_DESKTOP_KEYS.contains(&key.as_str()) {
                        tracing::debug!(server = %self.server, %key, "ignoring desktop-host key");
                    } else {
                        tracing::warn!(
                            server = %self.server,
                            %key,
                            "ignoring unsupported key in desktop config entry"
                        );
                    }
                    Ok(None)
                }
            };
        };
        if self.seen.get() & field.bit() != 0 {
            return Err(self.ctx.shape(
                Some(self.server),
                ShapeError::DuplicateField {
                    field: key.to_owned(),
                },
            ));
        }
        self.seen.set(self.seen.get() | field.bit());
        Ok(Some(field))
    }
}

/// Wraps a seed so that null (`~`, `null`, nothing) reads as "absent".
struct OptionalSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for OptionalSeed<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for OptionalSeed<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an optional value")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}

/// A string, taken as written whatever YAML would type it as (`8080`, `0755`, `true`).
struct StrSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    server: &'c str,
    what: &'c str,
}

impl<'de> DeserializeSeed<'de> for StrSeed<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for StrSeed<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        expecting_string(self.ctx, Some(self.server), self.what, f)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(value.to_owned())
    }
}

/// An element of ARGS: a string, where null is an error rather than "absent".
struct ElementSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    server: &'c str,
    what: String,
}

impl<'de> DeserializeSeed<'de> for ElementSeed<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        match OptionalSeed(StrSeed {
            ctx: self.ctx,
            server: self.server,
            what: &self.what,
        })
        .deserialize(deserializer)?
        {
            Some(value) => Ok(value),
            None => Err(self
                .ctx
                .shape(Some(self.server), ShapeError::Null { what: self.what })),
        }
    }
}

/// REQUIRES_CONSENT and `disabled`: `true` or `false` (any case YAML 1.2 allows).
struct BoolSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    server: &'c str,
    field: &'static str,
}

impl<'de> DeserializeSeed<'de> for BoolSeed<'_, '_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for BoolSeed<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        expecting_string(self.ctx, Some(self.server), self.field, f)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        match value {
            "true" | "True" | "TRUE" => Ok(true),
            "false" | "False" | "FALSE" => Ok(false),
            _ => Err(self.ctx.shape(
                Some(self.server),
                ShapeError::NotABool { field: self.field },
            )),
        }
    }
}

/// ARGS: a list of strings.
struct ArgsSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    server: &'c str,
}

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_, '_> {
    type Value = Vec<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Reject for ArgsSeed<'_, '_> {
    fn reject<E: de::Error>(&self, found: &'static str) -> E {
        self.ctx
            .wrong_type(Some(self.server), "ARGS", "a list of strings", found)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_, '_> {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of strings")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut args = Vec::new();
        while let Some(arg) = seq.next_element_seed(ElementSeed {
            ctx: self.ctx,
            server: self.server,
            what: format!("ARGS[{}]", args.len()),
        })? {
            args.push(arg);
        }
        Ok(args)
    }

    reject!('de; bool i64 u64 i128 u128 f64 str bytes unit none map enum);
}

/// ENV: a mapping of variable names to strings, in document order.
struct EnvSeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    server: &'c str,
}

impl<'de> DeserializeSeed<'de> for EnvSeed<'_, '_> {
    type Value = Vec<(String, String)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Reject for EnvSeed<'_, '_> {
    fn reject<E: de::Error>(&self, found: &'static str) -> E {
        self.ctx.wrong_type(
            Some(self.server),
            "ENV",
            "a mapping of variable names to strings",
            found,
        )
    }
}

impl<'de> Visitor<'de> for EnvSeed<'_, '_> {
    type Value = Vec<(String, String)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping of variable names to strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut env = Vec::new();
        // Each key's position (from 1), to name a repeat by the positions of both.
        let mut positions = BTreeMap::new();
        while let Some(key) = map.next_key_seed(EnvKeySeed {
            ctx: self.ctx,
            server: self.server,
            position: env.len() + 1,
            positions: &mut positions,
        })? {
            let position = env.len() + 1;
            // A key without a value is never shown, even when it is a variable name: it is the
            // shape of a secret typed where a name belongs (`ENV: {ghp_...}`).
            let value = map
                .next_value_seed(OptionalSeed(StrSeed {
                    ctx: self.ctx,
                    server: self.server,
                    what: &env_field(&key, position),
                }))?
                .ok_or_else(|| {
                    self.ctx
                        .shape(Some(self.server), ShapeError::NullEnvValue { position })
                })?;
            env.push((key, value));
        }
        Ok(env)
    }

    reject!('de; bool i64 u64 i128 u128 f64 str bytes unit none seq enum);
}

/// A key of ENV, the `position`th of its mapping: a usable variable name, not seen before in
/// this ENV. Messages about it give its position, never its text.
struct EnvKeySeed<'c, 'a> {
    ctx: &'c Ctx<'a>,
    server: &'c str,
    position: usize,
    positions: &'c mut BTreeMap<String, usize>,
}

impl<'de> DeserializeSeed<'de> for EnvKeySeed<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for EnvKeySeed<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        expecting_string(
            self.ctx,
            Some(self.server),
            &format!("ENV key #{}", self.position),
            f,
        )
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        let position = self.position;
        // The OS rejects these at spawn time with a far less helpful message.
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err(self
                .ctx
                .shape(Some(self.server), ShapeError::InvalidEnvKey { position }));
        }
        if let Some(&first) = self.positions.get(key) {
            return Err(self.ctx.shape(
                Some(self.server),
                ShapeError::DuplicateEnvKey { position, first },
            ));
        }
        self.positions.insert(key.to_owned(), position);
        Ok(key.to_owned())
    }
}

/// A key as it may appear in a message or log line: as written when it is plain ASCII, quoted
/// and escaped otherwise, and cut short when long, so one odd key cannot garble the output.
pub(super) fn printable_key(key: &str) -> String {
    const MAX: usize = 64;
    let plain = key.chars().all(|c| c.is_ascii_graphic());
    let mut shown = if plain {
        key.to_owned()
    } else {
        format!("{key:?}")
    };
    if let Some((cut, _)) = shown.char_indices().nth(MAX) {
        shown.truncate(cut);
        shown.push('…');
    }
    shown
}

/// The YAML field an unknown key was probably meant to be: the same name in another case or
/// spelling (`command`, `eofGrace`), a common synonym (`CWD`), or a near miss (`ARG`).
fn suggest_field(key: &str) -> Option<&'static str> {
    fn normalize(name: &str) -> String {
        name.chars()
            .filter(|c| !matches!(c, '_' | '-'))
            .map(|c| c.to_ascii_uppercase())
            .collect()
    }
    const SYNONYMS: [(&str, &str); 7] = [
        ("CWD", "DIR"),
        ("WORKDIR", "DIR"),
        ("CMD", "COMMAND"),
        ("ARGUMENTS", "ARGS"),
        ("ENVIRONMENT", "ENV"),
        ("PASSWORD", "TOKEN"),
        ("USER", "USERNAME"),
    ];
    let wanted = normalize(key);
    let fields = Field::ALL.into_iter().filter_map(|f| f.key(Dialect::Yaml));
    if let Some(field) = fields.clone().find(|field| normalize(field) == wanted) {
        return Some(field);
    }
    if let Some((_, field)) = SYNONYMS.iter().find(|(synonym, _)| *synonym == wanted) {
        return Some(field);
    }
    fields
        .map(|field| (strsim::levenshtein(&normalize(field), &wanted), field))
        .filter(|&(distance, field)| distance <= if field.len() <= 4 { 1 } else { 2 })
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, field)| field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_intended_field() {
        assert_eq!(suggest_field("ARG"), Some("ARGS"));
        assert_eq!(suggest_field("command"), Some("COMMAND"));
        assert_eq!(suggest_field("eofGrace"), Some("EOF_GRACE"));
        assert_eq!(suggest_field("COMAND"), Some("COMMAND"));
        assert_eq!(suggest_field("TIMEOUTS"), Some("TIMEOUT"));
        assert_eq!(suggest_field("cwd"), Some("DIR"));
        assert_eq!(suggest_field("REQUIRE_CONSENT"), Some("REQUIRES_CONSENT"));
        assert_eq!(suggest_field("HEADERS"), None);
        assert_eq!(suggest_field("X"), None);
    }

    #[test]
    fn printable_key_quotes_odd_keys_and_shortens_long_ones() {
        assert_eq!(printable_key("GITHUB_TOKEN"), "GITHUB_TOKEN");
        assert_eq!(printable_key("a b"), "\"a b\"");
        assert_eq!(printable_key("line\nbreak"), "\"line\\nbreak\"");
        let long = printable_key(&"K".repeat(100));
        assert_eq!(long.chars().count(), 65);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn every_field_has_a_distinct_bit_and_round_trips_through_its_keys() {
        let mut bits = 0;
        for field in Field::ALL {
            assert_eq!(bits & field.bit(), 0);
            bits |= field.bit();
            for dialect in [Dialect::Yaml, Dialect::Desktop] {
                if let Some(key) = field.key(dialect) {
                    assert_eq!(Field::from_key(dialect, key), Some(field));
                }
            }
        }
    }
}
