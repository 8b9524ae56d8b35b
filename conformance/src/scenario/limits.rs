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
//! The scan is the client's own (`mcp_stdio_client::config::deepest_token_beyond`):
//! one scanner wrapper in the workspace.

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
    mcp_stdio_client::config::deepest_token_beyond(input, max).map(|position| position.line)
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
