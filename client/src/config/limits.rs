//! Size and nesting bounds on a config document, checked before the document is deserialized.
//!
//! The YAML scanner (libyaml) keeps one "possible simple key" per open flow collection and walks
//! all of them for every token it reads, so a document of N nested `[` costs O(N²): 100 KB of
//! `[` under a top-level key that is otherwise ignored took seconds to reject. The deserializer's
//! own recursion limit does not help, because the whole document is scanned into events before
//! deserialization starts.
//!
//! So the document is first run through the same scanner token by token, counting open
//! collections (flow and block), and the scan stops at the first token that goes deeper than
//! [`MAX_DEPTH`]. Up to that point the scanner holds at most `MAX_DEPTH` keys, so the check is
//! linear in the document's size, and the depth it measures is exactly the one the parser would
//! see: there is no second YAML grammar here to disagree with the real one. The size bound keeps
//! the linear part small, and it is checked before anything is read past it.

use std::mem::MaybeUninit;

use libyaml_rs as sys;

/// The largest config document accepted, in bytes. Real configs are a few kilobytes; this leaves
/// room for a desktop host's file with many servers and settings of its own, and keeps the
/// parse of any document within the bounds, even one that fails at its last byte, well under
/// 100 ms (see the config benchmark).
pub const MAX_BYTES: usize = 256 * 1024;

/// The deepest nesting of lists and mappings accepted, anywhere in the document (including
/// keys that are ignored). A server config needs 4 levels; settings of other tools kept in the
/// same file rarely need more than 10. The scanner's cost per token grows with the depth, so
/// this bound also bounds the cost of a document that is within it.
pub const MAX_DEPTH: usize = 32;

/// A bound the document exceeds. Messages say what the bound is and what to check, and quote
/// nothing from the document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// Larger than [`MAX_BYTES`].
    #[error(
        "the document is larger than {} KiB; a server config is a few kilobytes, so check that \
         this is the right file",
        MAX_BYTES / 1024
    )]
    TooLarge,
    /// Nested deeper than [`MAX_DEPTH`].
    #[error(
        "lists and mappings are nested more than {MAX_DEPTH} levels deep; a server config needs \
         4, so check the brackets and indentation here"
    )]
    TooDeep,
}

/// Where a bound was exceeded: the 1-based line and column of the token that went too deep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The 1-based line.
    pub line: usize,
    /// The 1-based column.
    pub column: usize,
}

/// Checks `text` against [`MAX_BYTES`] and [`MAX_DEPTH`]. A document the scanner cannot read is
/// not an error here: the parser reads it next and reports the syntax error with its own words.
pub(super) fn check(text: &str) -> Result<(), (LimitError, Option<Position>)> {
    if text.len() > MAX_BYTES {
        return Err((LimitError::TooLarge, None));
    }
    match deepest_token_beyond(text.as_bytes(), MAX_DEPTH) {
        Some(position) => Err((LimitError::TooDeep, Some(position))),
        None => Ok(()),
    }
}

/// Scans the YAML (or JSON) document `input` and returns the position of the first token that
/// opens a collection deeper than `max`, or `None` if there is none (or the scanner stops at a
/// syntax error first). Linear in the size of `input` up to that token, whatever the nesting:
/// the check to run before parsing a document from a source that may be hostile (the harness
/// bounds its scenario files with it too).
pub fn deepest_token_beyond(input: &[u8], max: usize) -> Option<Position> {
    let mut scanner = Scanner::new(input);
    let mut depth = 0usize;
    while let Some(token) = scanner.next() {
        match token.kind {
            sys::YAML_FLOW_SEQUENCE_START_TOKEN
            | sys::YAML_FLOW_MAPPING_START_TOKEN
            | sys::YAML_BLOCK_SEQUENCE_START_TOKEN
            | sys::YAML_BLOCK_MAPPING_START_TOKEN => {
                depth += 1;
                if depth > max {
                    return Some(token.position);
                }
            }
            sys::YAML_FLOW_SEQUENCE_END_TOKEN
            | sys::YAML_FLOW_MAPPING_END_TOKEN
            | sys::YAML_BLOCK_END_TOKEN => depth = depth.saturating_sub(1),
            sys::YAML_STREAM_END_TOKEN => return None,
            _ => {}
        }
    }
    None
}

struct Token {
    kind: sys::yaml_token_type_t,
    position: Position,
}

/// libyaml's scanner over a borrowed input, yielding token kinds and positions.
///
/// The parser state is boxed because libyaml's string reader keeps a pointer to the parser
/// itself: it must not move between `set_input_string` and `delete`.
struct Scanner<'input> {
    parser: Box<MaybeUninit<sys::yaml_parser_t>>,
    /// Whether `yaml_parser_initialize` succeeded, so that `drop` must delete the parser.
    initialized: bool,
    /// Whether the scanner stopped at an error (or never started); it yields nothing more.
    failed: bool,
    _input: std::marker::PhantomData<&'input [u8]>,
}

impl<'input> Scanner<'input> {
    fn new(input: &'input [u8]) -> Self {
        let mut parser = Box::new(MaybeUninit::<sys::yaml_parser_t>::uninit());
        // SAFETY: `yaml_parser_initialize` fully initializes the zeroed parser (it can fail only
        // on allocation, which aborts in Rust). The input outlives the scanner ('input), and the
        // boxed parser does not move until it is deleted in `drop`.
        let initialized = unsafe {
            let raw = parser.as_mut_ptr();
            let initialized = !sys::yaml_parser_initialize(raw).fail;
            if initialized {
                sys::yaml_parser_set_encoding(raw, sys::YAML_UTF8_ENCODING);
                sys::yaml_parser_set_input_string(raw, input.as_ptr(), input.len() as u64);
            }
            initialized
        };
        Scanner {
            parser,
            initialized,
            failed: !initialized,
            _input: std::marker::PhantomData,
        }
    }

    fn next(&mut self) -> Option<Token> {
        if self.failed {
            return None;
        }
        let mut token = MaybeUninit::<sys::yaml_token_t>::uninit();
        // SAFETY: the parser was initialized in `new` and has not failed; `yaml_parser_scan`
        // initializes the token on success, and the token is deleted before it goes out of scope.
        unsafe {
            let raw = self.parser.as_mut_ptr();
            if sys::yaml_parser_scan(raw, token.as_mut_ptr()).fail {
                self.failed = true;
                return None;
            }
            let token = token.as_mut_ptr();
            let result = Token {
                kind: (*token).type_,
                position: Position {
                    line: (*token).start_mark.line as usize + 1,
                    column: (*token).start_mark.column as usize + 1,
                },
            };
            sys::yaml_token_delete(token);
            Some(result)
        }
    }
}

impl Drop for Scanner<'_> {
    fn drop(&mut self) {
        if self.initialized {
            // SAFETY: the parser was initialized in `new` and is deleted exactly once.
            unsafe { sys::yaml_parser_delete(self.parser.as_mut_ptr()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_flow_and_block_nesting() {
        assert_eq!(deepest_token_beyond(b"a: [[1]]\n", 3), None);
        assert_eq!(
            deepest_token_beyond(b"a: [[1]]\n", 2),
            Some(Position { line: 1, column: 5 })
        );
        assert_eq!(
            deepest_token_beyond(b"a:\n  b:\n    c: 1\n", 2),
            Some(Position { line: 3, column: 5 })
        );
        assert_eq!(deepest_token_beyond(b"a:\n  b:\n    c: 1\n", 3), None);
    }

    #[test]
    fn brackets_in_quoted_and_block_scalars_do_not_count() {
        let text = "a: \"[[[[\"\nb: '{{{{'\nc: |\n  [[[[\n# [[[[\n";
        assert_eq!(deepest_token_beyond(text.as_bytes(), 1), None);
    }

    #[test]
    fn closed_collections_do_not_add_up() {
        let text = "[".to_owned() + &"[1], ".repeat(1000) + "]";
        assert_eq!(deepest_token_beyond(text.as_bytes(), 2), None);
    }

    #[test]
    fn a_document_the_scanner_rejects_is_left_to_the_parser() {
        assert_eq!(deepest_token_beyond(b"a: \"unterminated\n", 1), None);
        assert!(check("a: [\n").is_ok());
    }
}
