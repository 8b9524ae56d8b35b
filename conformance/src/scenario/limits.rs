//! Size and nesting bounds on a scenario file, checked before the file is
//! parsed, as the client bounds a config document (`client/src/config/limits.rs`).
//!
//! The YAML scanner (libyaml) keeps one "possible simple key" per open flow
//! collection and walks all of them for every token, so N nested `[` cost
//! O(N²): 60 KB of `[` took seconds, 200 KB 85 s, and every run of the
//! harness paid it, since listing the scenarios loads each file. The
//! deserializer's recursion limit comes too late: the whole document is
//! scanned into events first.
//!
//! So the file is first run through the same scanner, token by token,
//! counting open collections, and the scan stops at the first one deeper
//! than [`MAX_DEPTH`]: up to there the scanner holds at most `MAX_DEPTH`
//! keys, so the check is linear, and the depth it measures is the parser's
//! own (no second YAML grammar to disagree with the real one). The size
//! bound is checked first and keeps the linear part small.
//!
//! The scanner wrapper repeats the client's: the client keeps its own
//! private (it is no part of a host's API), and this crate is published,
//! so it cannot compile the client's file by path as xtask does with
//! `contract.rs`.

use std::mem::MaybeUninit;

use libyaml_rs as sys;

/// The largest scenario file accepted, in bytes: the client's config bound.
/// The largest scenario is about 2 KB; a scenario that carries a whole
/// config document still fits many times over.
pub const MAX_BYTES: usize = 256 * 1024;

/// The deepest nesting of lists and mappings accepted anywhere in a
/// scenario (a `call`'s `args` included). The scenarios need at most 8;
/// the scanner's cost per token grows with the depth, so this also bounds
/// the cost of a file within it.
pub const MAX_DEPTH: usize = 32;

/// The 1-based line of the first token that opens a collection deeper than
/// `max`, or `None` if there is none (or the scanner stops at a syntax
/// error first: the parser reports that in its own words).
pub fn line_beyond(input: &[u8], max: usize) -> Option<usize> {
    let mut scanner = Scanner::new(input);
    let mut depth = 0usize;
    while let Some((kind, line)) = scanner.next() {
        match kind {
            sys::YAML_FLOW_SEQUENCE_START_TOKEN
            | sys::YAML_FLOW_MAPPING_START_TOKEN
            | sys::YAML_BLOCK_SEQUENCE_START_TOKEN
            | sys::YAML_BLOCK_MAPPING_START_TOKEN => {
                depth += 1;
                if depth > max {
                    return Some(line);
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

/// libyaml's scanner over a borrowed input, yielding each token's kind and
/// 1-based line.
///
/// The parser state is boxed because libyaml's string reader keeps a
/// pointer to the parser itself: it must not move between
/// `set_input_string` and `delete`.
struct Scanner<'input> {
    parser: Box<MaybeUninit<sys::yaml_parser_t>>,
    /// Whether `yaml_parser_initialize` succeeded, so `drop` must delete it.
    initialized: bool,
    /// Whether the scanner stopped at an error (or never started).
    failed: bool,
    _input: std::marker::PhantomData<&'input [u8]>,
}

impl<'input> Scanner<'input> {
    fn new(input: &'input [u8]) -> Self {
        let mut parser = Box::new(MaybeUninit::<sys::yaml_parser_t>::uninit());
        // SAFETY: `yaml_parser_initialize` fully initializes the parser (it
        // fails only on allocation). The input outlives the scanner
        // ('input), and the boxed parser does not move until `drop`.
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

    fn next(&mut self) -> Option<(sys::yaml_token_type_t, usize)> {
        if self.failed {
            return None;
        }
        let mut token = MaybeUninit::<sys::yaml_token_t>::uninit();
        // SAFETY: the parser was initialized in `new` and has not failed;
        // `yaml_parser_scan` initializes the token on success, and the token
        // is deleted before it goes out of scope.
        unsafe {
            if sys::yaml_parser_scan(self.parser.as_mut_ptr(), token.as_mut_ptr()).fail {
                self.failed = true;
                return None;
            }
            let token = token.as_mut_ptr();
            let result = ((*token).type_, (*token).start_mark.line as usize + 1);
            sys::yaml_token_delete(token);
            Some(result)
        }
    }
}

impl Drop for Scanner<'_> {
    fn drop(&mut self) {
        if self.initialized {
            // SAFETY: initialized in `new`, deleted exactly once.
            unsafe { sys::yaml_parser_delete(self.parser.as_mut_ptr()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_flow_and_block_nesting() {
        assert_eq!(line_beyond(b"a: [[1]]\n", 3), None);
        assert_eq!(line_beyond(b"a: [[1]]\n", 2), Some(1));
        assert_eq!(line_beyond(b"a:\n  b:\n    c: 1\n", 2), Some(3));
        assert_eq!(line_beyond(b"a:\n  b:\n    c: 1\n", 3), None);
    }

    #[test]
    fn brackets_in_scalars_and_comments_do_not_count() {
        let text = "a: \"[[[[\"\nb: '{{{{'\nc: |\n  [[[[\n# [[[[\n";
        assert_eq!(line_beyond(text.as_bytes(), 1), None);
    }

    #[test]
    fn closed_collections_do_not_add_up() {
        let text = "[".to_owned() + &"[1], ".repeat(1000) + "]";
        assert_eq!(line_beyond(text.as_bytes(), 2), None);
    }
}
