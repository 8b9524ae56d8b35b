//! The contract, `docs/contract.md`: its rules, parsed from the copy of the
//! document embedded in this binary, so a scenario's `rules:` can be checked
//! wherever the tool runs, inside the repository or not.
//!
//! The document's format is strict on purpose (see its "Adding a rule"
//! section): each rule is an anchor line `<a id="ID"></a>`, then a level-3
//! heading `### ID: title`, then text, then one `Proved by:` paragraph
//! listing the scenarios that cite the rule, or `none`. A test checks that
//! those lists and the scenarios' own `rules:` agree.
//!
//! It lives in this small crate, not in the harness, so that the harness
//! (scenario files' `rules:`) and `cargo xtask` (`conformance --rules`, the
//! report's rule links) share one implementation without xtask building the
//! harness's runtime stack.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::OnceLock,
};

/// The contract as it was when this binary was built.
pub const DOCUMENT: &str = include_str!("../contract.md");

/// Where the document lives in the repository, for messages and links.
pub const PATH: &str = "docs/contract.md";

/// One rule of the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `4.close.eof`: the anchor and the id scenarios cite.
    pub id: String,
    /// The heading's text after the id.
    pub title: String,
    /// The 1-based line of the rule's heading.
    pub line: usize,
    /// The scenarios its `Proved by:` paragraph lists, in document order.
    pub proved_by: Vec<String>,
    /// The 1-based line where `Proved by:` starts.
    pub proved_by_line: usize,
}

/// The contract document does not follow its format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}", PATH)]
pub struct ContractError {
    /// The 1-based line of the problem.
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

/// The rules of the embedded document, parsed once.
pub fn rules() -> Result<&'static [Rule], ContractError> {
    static RULES: OnceLock<Result<Vec<Rule>, ContractError>> = OnceLock::new();
    RULES
        .get_or_init(|| parse(DOCUMENT))
        .as_deref()
        .map_err(Clone::clone)
}

/// Whether `id` has the shape of a rule id: a section number, then one or
/// more dot-separated words of `[a-z0-9_]` (`4.close.eof`, `1.validate.4`).
pub fn is_id(id: &str) -> bool {
    let mut parts = id.split('.');
    let section = parts.next().unwrap_or_default();
    let words: Vec<&str> = parts.collect();
    !section.is_empty()
        && section.bytes().all(|b| b.is_ascii_digit())
        && !words.is_empty()
        && words.iter().all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

/// The defined id closest to `unknown` (edit distance at most 3), for a
/// "did you mean" hint.
pub fn suggest<'a>(unknown: &str, rules: &'a [Rule]) -> Option<&'a str> {
    rules
        .iter()
        .map(|rule| (strsim::levenshtein(unknown, &rule.id), rule.id.as_str()))
        .filter(|(distance, _)| *distance <= 3)
        .min()
        .map(|(_, id)| id)
}

/// Parses a contract document.
pub fn parse(text: &str) -> Result<Vec<Rule>, ContractError> {
    let lines: Vec<&str> = text.lines().collect();
    let error = |index: usize, message: String| ContractError {
        line: index + 1,
        message,
    };
    let mut rules: Vec<Rule> = Vec::new();
    // The rule being read: its index in `rules` and whether its
    // `Proved by:` was seen.
    let mut open: Option<(usize, bool)> = None;
    let mut section: Option<String> = None;
    let mut in_fence = false;
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            index += 1;
            continue;
        }
        if in_fence {
            index += 1;
            continue;
        }
        let anchor = anchor_id(line);
        let heading_level = line.bytes().take_while(|b| *b == b'#').count();
        let is_heading = heading_level > 0 && line[heading_level..].starts_with(' ');
        // A new rule, or any heading of level 3 or above, ends the open rule.
        if anchor.is_some() || (is_heading && heading_level <= 3) {
            close_rule(&rules, open.take(), &error)?;
        }
        if is_heading && heading_level == 2 {
            section = line[3..]
                .split_once('.')
                .map(|(number, _)| number.trim().to_owned())
                .filter(|number| number.bytes().all(|b| b.is_ascii_digit()));
        }
        if let Some(id) = anchor {
            let heading_index = index + 1;
            let heading = lines.get(heading_index).copied().unwrap_or_default();
            let Some(rest) = heading.strip_prefix("### ") else {
                return Err(error(
                    heading_index,
                    format!("the anchor of `{id}` must be followed by its heading `### {id}: ...`"),
                ));
            };
            let (heading_id, title) = rest.split_once(": ").unwrap_or((rest, ""));
            if heading_id != id {
                return Err(error(
                    heading_index,
                    format!("the heading after the anchor `{id}` names `{heading_id}`"),
                ));
            }
            if title.trim().is_empty() {
                return Err(error(
                    heading_index,
                    format!("the heading of `{id}` needs a title: `### {id}: what the rule says`"),
                ));
            }
            if !is_id(id) {
                return Err(error(
                    index,
                    format!(
                        "`{id}` is not a rule id: a section number, then dot-separated \
                         words of a-z, 0-9 and _ (`4.close.eof`)"
                    ),
                ));
            }
            let id_section = id.split('.').next().unwrap_or_default();
            if section.as_deref() != Some(id_section) {
                return Err(error(
                    index,
                    format!(
                        "rule `{id}` is not under its section: put it under `## {id_section}. ...`"
                    ),
                ));
            }
            if let Some(earlier) = rules.iter().find(|rule| rule.id == id) {
                return Err(error(
                    index,
                    format!(
                        "rule `{id}` is defined twice (first at line {})",
                        earlier.line
                    ),
                ));
            }
            rules.push(Rule {
                id: id.to_owned(),
                title: title.trim().to_owned(),
                line: heading_index + 1,
                proved_by: Vec::new(),
                proved_by_line: 0,
            });
            open = Some((rules.len() - 1, false));
            index = heading_index + 1;
            continue;
        }
        if is_heading && heading_level == 3 && line[4..].starts_with(|c: char| c.is_ascii_digit()) {
            return Err(error(
                index,
                "a rule heading needs the anchor line `<a id=\"ID\"></a>` right above it".into(),
            ));
        }
        if let Some(rest) = line.strip_prefix("Proved by:") {
            let Some((rule_index, seen)) = open.as_mut() else {
                return Err(error(index, "`Proved by:` outside a rule".into()));
            };
            let rule = &mut rules[*rule_index];
            if *seen {
                return Err(error(
                    index,
                    format!(
                        "rule `{}` has a second `Proved by:` (the first is at line {})",
                        rule.id, rule.proved_by_line
                    ),
                ));
            }
            *seen = true;
            rule.proved_by_line = index + 1;
            let start = index;
            // The paragraph goes on until a blank line.
            let mut paragraph = rest.to_owned();
            while let Some(next) = lines.get(index + 1).filter(|next| !next.trim().is_empty()) {
                paragraph.push(' ');
                paragraph.push_str(next);
                index += 1;
            }
            rule.proved_by = proved_by(&paragraph)
                .map_err(|message| error(start, format!("rule `{}`: {message}", rule.id)))?;
        }
        index += 1;
    }
    close_rule(&rules, open, &error)?;
    if rules.is_empty() {
        return Err(error(0, "the document defines no rule".into()));
    }
    Ok(rules)
}

/// Checks that the rule that just ended had its `Proved by:` line.
fn close_rule(
    rules: &[Rule],
    open: Option<(usize, bool)>,
    error: &impl Fn(usize, String) -> ContractError,
) -> Result<(), ContractError> {
    match open {
        Some((index, false)) => {
            let rule = &rules[index];
            Err(error(
                rule.line - 1,
                format!(
                    "rule `{}` has no `Proved by:` line (write `Proved by: none.` when no \
                     scenario cites it yet)",
                    rule.id
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// `ID` when `line` is exactly `<a id="ID"></a>`.
fn anchor_id(line: &str) -> Option<&str> {
    line.trim_end()
        .strip_prefix("<a id=\"")?
        .strip_suffix("\"></a>")
}

/// The scenario names of a `Proved by:` paragraph: backticked names separated
/// by commas, ending with a full stop; or `none.`.
fn proved_by(paragraph: &str) -> Result<Vec<String>, String> {
    let text = paragraph.trim();
    let text = text
        .strip_suffix('.')
        .ok_or("end the `Proved by:` list with a full stop")?;
    if text == "none" {
        return Ok(Vec::new());
    }
    let mut names = Vec::new();
    for item in text.split(',') {
        let name = item
            .trim()
            .strip_prefix('`')
            .and_then(|item| item.strip_suffix('`'))
            .filter(|name| !name.is_empty() && !name.contains('`'))
            .ok_or_else(|| {
                format!(
                    "`Proved by:` lists scenarios as `group/name`, separated by commas, or \
                     says `none.`; found `{}`",
                    item.trim()
                )
            })?;
        if names.iter().any(|known| known == name) {
            return Err(format!("`Proved by:` lists `{name}` twice"));
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Every disagreement between the rules and what the scenarios cite.
/// `cited` maps each scenario name to the ids in its `rules:`. Each message
/// says what to change.
pub fn disagreements(rules: &[Rule], cited: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    let defined: BTreeSet<&str> = rules.iter().map(|rule| rule.id.as_str()).collect();
    for (scenario, ids) in cited {
        for id in ids {
            if !defined.contains(id.as_str()) {
                let hint = suggest(id, rules)
                    .map(|near| format!(" (did you mean `{near}`?)"))
                    .unwrap_or_default();
                problems.push(format!(
                    "scenario `{scenario}` cites `{id}`, which {PATH} does not define{hint}"
                ));
            }
        }
    }
    for rule in rules {
        let listed: BTreeSet<&str> = rule.proved_by.iter().map(String::as_str).collect();
        let citing: BTreeSet<&str> = cited
            .iter()
            .filter(|(_, ids)| ids.contains(&rule.id))
            .map(|(scenario, _)| scenario.as_str())
            .collect();
        for scenario in listed.difference(&citing) {
            let why = if cited.contains_key(*scenario) {
                "which does not cite it"
            } else {
                "which is not a scenario"
            };
            problems.push(format!(
                "{PATH}:{}: `{}` lists `{scenario}`, {why}: remove it from `Proved by:`",
                rule.proved_by_line, rule.id
            ));
        }
        for scenario in citing.difference(&listed) {
            problems.push(format!(
                "{PATH}:{}: `{}` is cited by `{scenario}`: add it to `Proved by:`",
                rule.proved_by_line, rule.id
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# C\n\n## 4. Life\n\n<a id=\"4.close.eof\"></a>\n### 4.close.eof: EOF first\n\nText.\n\nProved by: `lifecycle/eof-close`,\n`many/mixed-close`.\n\n<a id=\"4.drop\"></a>\n### 4.drop: drop kills\n\nProved by: none.\n";

    fn parse_error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_ids_titles_and_lists() {
        let rules = parse(DOC).unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].id, "4.close.eof");
        assert_eq!(rules[0].title, "EOF first");
        assert_eq!(rules[0].line, 6);
        assert_eq!(
            rules[0].proved_by,
            ["lifecycle/eof-close", "many/mixed-close"]
        );
        assert_eq!(rules[1].id, "4.drop");
        assert!(rules[1].proved_by.is_empty());
    }

    #[test]
    fn the_embedded_document_parses() {
        let rules = rules().unwrap();
        assert!(rules.iter().any(|rule| rule.id == "4.close.eof"));
        assert!(rules.iter().all(|rule| is_id(&rule.id)));
    }

    #[test]
    fn examples_in_code_fences_are_not_rules() {
        let text = format!("{DOC}\n```markdown\n<a id=\"4.x\"></a>\n### 4.x: y\n```\n");
        assert_eq!(parse(&text).unwrap().len(), 2);
    }

    #[test]
    fn format_mistakes_name_the_line() {
        let no_heading = DOC.replace("### 4.drop: drop kills", "Text");
        assert_eq!(
            parse_error(&no_heading),
            "docs/contract.md:14: the anchor of `4.drop` must be followed by its heading `### 4.drop: ...`"
        );
        let mismatch = DOC.replace("### 4.drop:", "### 4.dropp:");
        assert!(parse_error(&mismatch).starts_with(
            "docs/contract.md:14: the heading after the anchor `4.drop` names `4.dropp`"
        ));
        let no_anchor = DOC.replace("<a id=\"4.drop\"></a>\n", "");
        assert!(
            parse_error(&no_anchor).contains("needs the anchor line"),
            "{}",
            parse_error(&no_anchor)
        );
        let no_list = DOC.replace("Proved by: none.\n", "");
        assert!(parse_error(&no_list).contains("rule `4.drop` has no `Proved by:` line"));
        let twice = DOC.replace("4.drop", "4.close.eof");
        assert!(parse_error(&twice).contains("defined twice (first at line 6)"));
        let wrong_section = DOC.replace("4.drop", "5.drop");
        assert!(parse_error(&wrong_section).contains("put it under `## 5. ...`"));
        let bad_id = DOC.replace("4.drop", "4.Drop");
        assert!(parse_error(&bad_id).contains("is not a rule id"));
        let bad_list = DOC.replace("Proved by: none.", "Proved by: lifecycle/x.");
        assert!(parse_error(&bad_list).contains("found `lifecycle/x`"));
        let no_stop = DOC.replace("Proved by: none.", "Proved by: none");
        assert!(parse_error(&no_stop).contains("full stop"));
        let second = DOC.replace("Proved by: none.", "Proved by: none.\n\nProved by: none.");
        assert!(parse_error(&second).contains("second `Proved by:`"));
    }

    #[test]
    fn ids_have_a_shape() {
        for id in [
            "4.close.eof",
            "1.validate.4.tolerated",
            "2.stderr_scope",
            "10.a",
        ] {
            assert!(is_id(id), "{id}");
        }
        for id in [
            "4",
            "close.eof",
            "4.",
            "4..eof",
            "4.Close",
            "4.close-eof",
            " 4.a",
        ] {
            assert!(!is_id(id), "{id}");
        }
    }

    #[test]
    fn suggests_the_nearest_id() {
        let rules = parse(DOC).unwrap();
        assert_eq!(suggest("4.close.eoff", &rules), Some("4.close.eof"));
        assert_eq!(suggest("9.something.else", &rules), None);
    }

    #[test]
    fn disagreements_say_what_to_change() {
        let rules = parse(DOC).unwrap();
        let cited = BTreeMap::from([
            (
                "lifecycle/eof-close".to_owned(),
                vec!["4.close.eof".to_owned()],
            ),
            (
                "lifecycle/drop".to_owned(),
                vec!["4.drop".to_owned(), "4.dorp".to_owned()],
            ),
        ]);
        assert_eq!(
            disagreements(&rules, &cited),
            [
                "scenario `lifecycle/drop` cites `4.dorp`, which docs/contract.md does not define (did you mean `4.drop`?)",
                "docs/contract.md:10: `4.close.eof` lists `many/mixed-close`, which is not a scenario: remove it from `Proved by:`",
                "docs/contract.md:16: `4.drop` is cited by `lifecycle/drop`: add it to `Proved by:`",
            ]
        );
    }
}
