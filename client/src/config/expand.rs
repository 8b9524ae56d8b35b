//! `${VAR}` / `$VAR` expansion from an injected environment, with `$$` as a literal `$`.
//!
//! Syntax (the POSIX-shell forms, with docker compose's `$$` escape):
//! - `${NAME}` and `$NAME`: the value of NAME, which must be set (it may be empty);
//! - `${NAME:-default}`: the value of NAME or, when NAME is unset or empty, `default` expanded
//!   by these same rules (so `${A:-${B}}` and `${A:-$B}` fall back to B, as in a shell);
//! - `$$`: a literal `$`;
//! - any other `$` (followed by a character that cannot start a name, or at the end) is kept.
//!
//! NAME is `[A-Za-z_][A-Za-z0-9_]*`. A value that comes from the environment is inserted as it
//! is, never expanded again. A default is expanded only when it is used, so an unset variable in
//! an unused default is no error. The `}` that closes `${` is the one that balances it: braces
//! opened by `${` inside the default nest, and `$$` before a brace makes it literal.

/// Why a value could not be expanded. Only variable names appear in messages, never the text
/// around them: the text may be a secret (an ARGS element, an ENV value, a TOKEN).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// A `${VAR}` without a default names an unset variable.
    #[error("environment variable {name} is not set")]
    Unset {
        /// The variable.
        name: String,
    },
    /// A `${` without its `}`.
    #[error("`${{` is not closed by `}}`")]
    Unterminated,
    /// Not a variable name (and optional default) inside `${...}`.
    #[error(
        "`${{...}}` must hold a variable name ([A-Za-z_][A-Za-z0-9_]*), optionally followed by \
         `:-default` (write `$$` for a literal `$`)"
    )]
    InvalidReference,
    /// Defaults nested deeper than the bound.
    #[error("defaults are nested more than {MAX_NESTING} levels deep (`${{A:-${{B:-...}}}}`)")]
    TooDeep,
}

/// How deep `${A:-${B:-...}}` may nest. Real configs use one or two levels; the bound keeps a
/// pathological value from exhausting the stack.
pub const MAX_NESTING: usize = 8;

/// Expands `text` with `env`; see the module documentation for the syntax.
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    expand_nested(text, env, 0)
}

/// [`expand`] of a text found `nesting` defaults deep.
fn expand_nested(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    nesting: usize,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(after_escape) = after.strip_prefix('$') {
            out.push('$');
            rest = after_escape;
        } else if let Some(braced) = after.strip_prefix('{') {
            let close = closing_brace(braced).ok_or(ExpandError::Unterminated)?;
            let (name, default) = match braced[..close].split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (&braced[..close], None),
            };
            if name_len(name) != name.len() || name.is_empty() {
                return Err(ExpandError::InvalidReference);
            }
            let expand_default = |default: &str| {
                if nesting >= MAX_NESTING {
                    return Err(ExpandError::TooDeep);
                }
                expand_nested(default, env, nesting + 1)
            };
            match (env(name), default) {
                (Some(value), Some(default)) if value.is_empty() => {
                    out.push_str(&expand_default(default)?);
                }
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(&expand_default(default)?),
                (None, None) => {
                    return Err(ExpandError::Unset {
                        name: name.to_owned(),
                    });
                }
            }
            rest = &braced[close + 1..];
        } else {
            let len = name_len(after);
            if len == 0 {
                // `$5`, `a$`, `$-`: not a reference in any shell sense, so keep the `$` rather
                // than demanding `$$` in regexes and prices.
                out.push('$');
                rest = after;
                continue;
            }
            let name = &after[..len];
            let value = env(name).ok_or_else(|| ExpandError::Unset {
                name: name.to_owned(),
            })?;
            out.push_str(&value);
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The index of the `}` that closes a `${` whose content starts `text`: the first `}` not
/// claimed by a `${` opened after it. `$$` is skipped as a unit, so `$${` opens nothing.
fn closing_brace(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'$' if bytes.get(index + 1) == Some(&b'$') => index += 1,
            b'$' if bytes.get(index + 1) == Some(&b'{') => {
                depth += 1;
                index += 1;
            }
            b'}' if depth == 0 => return Some(index),
            b'}' => depth -= 1,
            _ => {}
        }
        index += 1;
    }
    None
}

/// Length in bytes of the variable name at the start of `text` (0 if none starts there).
fn name_len(text: &str) -> usize {
    let mut chars = text.char_indices();
    match chars.next() {
        Some((_, c)) if c == '_' || c.is_ascii_alphabetic() => {}
        _ => return 0,
    }
    chars
        .find(|&(_, c)| !(c == '_' || c.is_ascii_alphanumeric()))
        .map_or(text.len(), |(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/alice".to_owned()),
            "EMPTY" => Some(String::new()),
            "DOLLAR" => Some("${HOME}$$".to_owned()),
            "A_1" => Some("x".to_owned()),
            _ => None,
        }
    }

    fn ok(text: &str) -> String {
        expand(text, &env).unwrap()
    }

    #[test]
    fn expands_both_reference_forms() {
        assert_eq!(ok("${HOME}/notes"), "/home/alice/notes");
        assert_eq!(ok("$HOME/notes"), "/home/alice/notes");
        assert_eq!(ok("a${A_1}b$A_1"), "axbx");
        assert_eq!(ok("$A_1-$A_1.$A_1"), "x-x.x");
        assert_eq!(ok("no references"), "no references");
        assert_eq!(ok(""), "");
    }

    #[test]
    fn a_set_empty_variable_expands_to_empty() {
        assert_eq!(ok("[${EMPTY}]"), "[]");
    }

    #[test]
    fn double_dollar_is_a_literal_dollar() {
        assert_eq!(ok("$$"), "$");
        assert_eq!(ok("$${HOME}"), "${HOME}");
        assert_eq!(ok("$$HOME"), "$HOME");
        assert_eq!(ok("$$$HOME"), "$/home/alice");
        assert_eq!(ok("pa$$word"), "pa$word");
    }

    #[test]
    fn a_dollar_that_starts_no_name_is_kept() {
        assert_eq!(ok("^a$"), "^a$");
        assert_eq!(ok("5$ each"), "5$ each");
        assert_eq!(ok("$1"), "$1");
        assert_eq!(ok("$-x"), "$-x");
    }

    #[test]
    fn defaults_apply_when_unset_or_empty() {
        assert_eq!(ok("${NOPE:-fallback}"), "fallback");
        assert_eq!(ok("${EMPTY:-fallback}"), "fallback");
        assert_eq!(ok("${HOME:-fallback}"), "/home/alice");
        assert_eq!(ok("${NOPE:-}"), "");
    }

    #[test]
    fn defaults_are_expanded_when_used() {
        assert_eq!(ok("${NOPE:-${HOME}}"), "/home/alice");
        assert_eq!(ok("${NOPE:-$HOME}"), "/home/alice");
        assert_eq!(ok("${NOPE:-${EMPTY:-${A_1}}}/x"), "x/x");
        assert_eq!(ok("${NOPE:-a${A_1}b}c"), "axbc");
        assert_eq!(ok("${NOPE:-$${HOME}}"), "${HOME}");
        assert_eq!(ok("${NOPE:-$$}"), "$");
        // Not used, so not expanded: an unset variable there is no error.
        assert_eq!(ok("${HOME:-${UNSET}}"), "/home/alice");
        assert_eq!(
            expand("${NOPE:-${UNSET}}", &env),
            Err(ExpandError::Unset {
                name: "UNSET".to_owned()
            })
        );
        assert_eq!(
            expand("${NOPE:-${HOME}", &env),
            Err(ExpandError::Unterminated)
        );
    }

    #[test]
    fn nesting_of_defaults_is_bounded() {
        let nested = |levels: usize| "${NOPE:-".repeat(levels) + "x" + &"}".repeat(levels);
        assert_eq!(ok(&nested(MAX_NESTING)), "x");
        assert_eq!(
            expand(&nested(MAX_NESTING + 1), &env),
            Err(ExpandError::TooDeep)
        );
        assert_eq!(expand(&nested(100_000), &env), Err(ExpandError::TooDeep));
    }

    #[test]
    fn values_are_not_expanded_again() {
        assert_eq!(ok("$DOLLAR"), "${HOME}$$");
    }

    #[test]
    fn an_unset_variable_is_an_error_naming_it() {
        let unset = |name: &str| ExpandError::Unset {
            name: name.to_owned(),
        };
        assert_eq!(expand("${NOPE}", &env), Err(unset("NOPE")));
        assert_eq!(expand("x/$NOPE/y", &env), Err(unset("NOPE")));
        assert_eq!(expand("$HOME$NOPE", &env), Err(unset("NOPE")));
        assert_eq!(
            expand("${NOPE}", &env).unwrap_err().to_string(),
            "environment variable NOPE is not set"
        );
    }

    #[test]
    fn malformed_references_are_errors() {
        assert_eq!(expand("${HOME", &env), Err(ExpandError::Unterminated));
        assert_eq!(expand("${}", &env), Err(ExpandError::InvalidReference));
        assert_eq!(expand("${1X}", &env), Err(ExpandError::InvalidReference));
        assert_eq!(expand("${A B}", &env), Err(ExpandError::InvalidReference));
        assert_eq!(
            expand("${env:HOME}", &env),
            Err(ExpandError::InvalidReference)
        );
        assert_eq!(
            expand("${HOME-x}", &env),
            Err(ExpandError::InvalidReference)
        );
    }

    #[test]
    fn handles_non_ascii_text_around_references() {
        assert_eq!(ok("é${HOME}ü$A_1ß"), "é/home/aliceüxß");
        assert_eq!(ok("$é"), "$é");
    }
}
