//! Finding the line a load error is about, for the mistakes serde cannot
//! place itself (a step in the wrong order, a rule id the contract lacks).
//! Type and shape errors carry their own location from yaml_serde.

/// yaml_serde places an error in a value of a block mapping at the start
/// of the mapping; the line that holds the value the message quotes (the
/// first `...` or "..." in it), from there on, is where the mistake is.
pub fn refine(text: &str, reported: usize, message: &str) -> usize {
    let quoted = |quote: char| {
        let mut parts = message.split(quote);
        parts.next()?;
        parts.next().filter(|part| !part.is_empty())
    };
    let Some(needle) = quoted('`').or_else(|| quoted('"')) else {
        return reported;
    };
    text.lines()
        .enumerate()
        .skip(reported.saturating_sub(1))
        .find(|(_, line)| line.contains(needle))
        .map_or(reported, |(index, _)| index + 1)
}

/// The 1-based line of the top-level key `key:`.
pub fn of_key(text: &str, key: &str) -> Option<usize> {
    let prefix = format!("{key}:");
    text.lines()
        .position(|line| line.starts_with(&prefix))
        .map(|index| index + 1)
}

/// The 1-based line of the first `key:` at any depth.
pub fn of_nested_key(text: &str, key: &str) -> Option<usize> {
    let prefix = format!("{key}:");
    text.lines()
        .position(|line| {
            let line = line
                .trim_start()
                .trim_start_matches("- ")
                .trim_start_matches('{');
            line.starts_with(&prefix)
        })
        .map(|index| index + 1)
}

/// The 1-based line of step `index` (0-based) of the block list `steps:`:
/// the `- ` items at the indentation of the first one. Falls back to the
/// `steps:` line (a flow list, `steps: [...]`).
pub fn of_step(text: &str, index: usize) -> Option<usize> {
    let start = of_key(text, "steps")?;
    let mut indent = None;
    let mut seen = 0;
    for (number, line) in text.lines().enumerate().skip(start) {
        let trimmed = line.trim_start();
        let depth = line.len() - trimmed.len();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if depth == 0 && !trimmed.starts_with('-') {
            break;
        }
        if !trimmed.starts_with("- ") && trimmed != "-" {
            continue;
        }
        match indent {
            None => indent = Some(depth),
            Some(first) if first != depth => continue,
            Some(_) => {}
        }
        if seen == index {
            return Some(number + 1);
        }
        seen += 1;
    }
    Some(start)
}

/// The 1-based line of rule `id` in the `rules:` list: the first line from
/// the top-level `rules:` key on that holds it (an id may also appear in a
/// description, before the list).
pub fn of_rule(text: &str, id: &str) -> Option<usize> {
    let start = text.lines().position(|line| line.starts_with("rules:"))?;
    text.lines()
        .enumerate()
        .skip(start)
        .find(|(_, line)| {
            line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .any(|token| token == id)
        })
        .map(|(index, _)| index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_moves_to_the_line_of_the_value_it_quotes() {
        let text = "server:\n  fixture: x\n  eof_grace: soon\n";
        assert_eq!(refine(text, 2, "server: `soon`: a duration is..."), 3);
        assert_eq!(refine(text, 2, "unknown signal \"x\""), 2);
        assert_eq!(refine(text, 2, "invalid length 2"), 2);
        assert_eq!(refine(text, 1, "`absent`"), 1);
    }

    #[test]
    fn a_step_is_found_by_its_list_item() {
        let text = "description: d\nsteps:\n  - connect: {}\n  - call:\n      tool: echo\n      args:\n        - not a step\n  - close: {}\nexpect: {}\n";
        assert_eq!(of_step(text, 0), Some(3));
        assert_eq!(of_step(text, 1), Some(4));
        assert_eq!(of_step(text, 2), Some(8));
        assert_eq!(of_step("steps: [{connect: {}}]\n", 0), Some(1));
    }
}
