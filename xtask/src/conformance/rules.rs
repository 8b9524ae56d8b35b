//! `cargo xtask conformance --rules`: each rule of docs/contract.md with the
//! scenarios whose `rules:` cite it, the rules no scenario cites yet, and
//! every disagreement between the document's `Proved by:` lists and the
//! scenarios. It reads files only; nothing is built or run.

use std::{collections::BTreeMap, fmt::Write, path::Path};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use mcp_conformance_report::contract::{self, Rule};

use crate::root;

pub fn run() -> Result<()> {
    let rules = contract::rules()?;
    let cited = read_cited(&root().join("scenarios"))?;
    let problems = contract::disagreements(rules, &cited);
    print!("{}", render(rules, &cited, &problems));
    if !problems.is_empty() {
        bail!(
            "{} and the scenarios disagree ({}); see above",
            contract::PATH,
            super::verdict::plural(problems.len(), "problem")
        );
    }
    Ok(())
}

/// What `--rules` prints for the contract and scenarios of this checkout
/// (its problems included, when there are any).
pub fn current() -> Result<String> {
    let rules = contract::rules()?;
    let cited = read_cited(&root().join("scenarios"))?;
    let problems = contract::disagreements(rules, &cited);
    Ok(render(rules, &cited, &problems))
}

/// The part of a scenario file this listing needs; the scenario loader
/// checks the rest.
#[derive(Deserialize)]
struct Cited {
    #[serde(default)]
    rules: Vec<String>,
}

/// Every scenario under `dir` (`group/name`, as the runner names them) with
/// the rule ids it cites. The layout is the runner's: `*.yaml` files in any
/// folder but `snapshots/`, dotfiles skipped.
pub fn read_cited(dir: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let mut cited = BTreeMap::new();
    walk(dir, dir, &mut cited)?;
    if cited.is_empty() {
        bail!("no scenario found in {}", dir.display());
    }
    Ok(cited)
}

fn walk(root: &Path, dir: &Path, cited: &mut BTreeMap<String, Vec<String>>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot read {}", dir.display()))?
            .path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            if name != "snapshots" {
                walk(root, &path, cited)?;
            }
            continue;
        }
        if path.extension().is_none_or(|extension| extension != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let scenario: Cited = yaml_serde::from_str(&text)
            .with_context(|| format!("{} is not a scenario", path.display()))?;
        let relative = path
            .strip_prefix(root)
            .expect("walked from root")
            .with_extension("");
        let name = relative
            .components()
            .map(|component| component.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        cited.insert(name, scenario.rules);
    }
    Ok(())
}

/// The listing: one line per rule (id, scenarios or `none`), a totals line,
/// then the problems, if any.
pub fn render(
    rules: &[Rule],
    cited: &BTreeMap<String, Vec<String>>,
    problems: &[String],
) -> String {
    let rows: Vec<(&str, String)> = rules
        .iter()
        .map(|rule| {
            let citing: Vec<&str> = cited
                .iter()
                .filter(|(_, ids)| ids.contains(&rule.id))
                .map(|(scenario, _)| scenario.as_str())
                .collect();
            let scenarios = if citing.is_empty() {
                "none".to_owned()
            } else {
                citing.join(", ")
            };
            (rule.id.as_str(), scenarios)
        })
        .collect();
    let width = rows
        .iter()
        .map(|(id, _)| id.len())
        .chain(["RULE".len()])
        .max()
        .unwrap_or_default();
    let mut out = String::new();
    writeln!(out, "{:<width$}  SCENARIOS", "RULE").unwrap();
    for (id, scenarios) in &rows {
        writeln!(out, "{id:<width$}  {scenarios}").unwrap();
    }
    let without: Vec<&str> = rows
        .iter()
        .filter(|(_, scenarios)| scenarios == "none")
        .map(|(id, _)| *id)
        .collect();
    writeln!(
        out,
        "\n{} in {}: {} proved by scenarios, {} by none{}; {}",
        super::verdict::plural(rules.len(), "rule"),
        contract::PATH,
        rules.len() - without.len(),
        without.len(),
        if without.is_empty() {
            String::new()
        } else {
            format!(" ({})", without.join(", "))
        },
        super::verdict::plural(cited.len(), "scenario"),
    )
    .unwrap();
    if !problems.is_empty() {
        out.push_str("\nproblems:\n");
        for problem in problems {
            writeln!(out, "  {problem}").unwrap();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "## 4. Life\n\n<a id=\"4.close.eof\"></a>\n### 4.close.eof: EOF first\n\nProved by: `lifecycle/eof-close`.\n\n<a id=\"4.start.spawn\"></a>\n### 4.start.spawn: eager\n\nProved by: none.\n\n<a id=\"4.guarantee\"></a>\n### 4.guarantee: nothing left\n\nProved by: `lifecycle/eof-close`.\n";

    fn cited(entries: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(name, ids)| {
                (
                    (*name).to_owned(),
                    ids.iter().map(|id| (*id).to_owned()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn lists_each_rule_and_the_rules_without_scenarios() {
        let rules = contract::parse(DOC).unwrap();
        let cited = cited(&[
            ("lifecycle/eof-close", &["4.close.eof", "4.guarantee"]),
            ("lifecycle/launcher", &["4.guarantee"]),
            ("lifecycle/untagged", &[]),
        ]);
        let problems = contract::disagreements(&rules, &cited);
        let expected = "\
RULE           SCENARIOS
4.close.eof    lifecycle/eof-close
4.start.spawn  none
4.guarantee    lifecycle/eof-close, lifecycle/launcher

3 rules in docs/contract.md: 2 proved by scenarios, 1 by none (4.start.spawn); 3 scenarios

problems:
  docs/contract.md:16: `4.guarantee` is cited by `lifecycle/launcher`: add it to `Proved by:`
";
        assert_eq!(render(&rules, &cited, &problems), expected);
    }

    #[test]
    fn reads_the_rules_scenarios_cite() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("lifecycle")).unwrap();
        std::fs::create_dir_all(dir.path().join("snapshots")).unwrap();
        let files = [
            (
                "lifecycle/eof-close.yaml",
                "description: d\nrules: [\"4.close.eof\"]\n",
            ),
            ("lifecycle/plain.yaml", "description: d\n"),
            ("snapshots/x.yaml", "not: [a scenario"),
            (".hidden.yaml", "not: [a scenario"),
            ("notes.md", "text"),
        ];
        for (file, text) in files {
            std::fs::write(dir.path().join(file), text).unwrap();
        }
        assert_eq!(
            read_cited(dir.path()).unwrap(),
            cited(&[
                ("lifecycle/eof-close", &["4.close.eof"]),
                ("lifecycle/plain", &[])
            ])
        );
        std::fs::write(dir.path().join("lifecycle/bad.yaml"), "rules: [").unwrap();
        let error = format!("{:#}", read_cited(dir.path()).unwrap_err());
        assert!(
            error.contains("lifecycle/bad.yaml is not a scenario"),
            "{error}"
        );
    }

    #[test]
    fn the_repository_agrees_with_its_contract() {
        let rules = contract::rules().unwrap();
        let cited = read_cited(&root().join("scenarios")).unwrap();
        assert_eq!(contract::disagreements(rules, &cited), Vec::<String>::new());
    }
}
