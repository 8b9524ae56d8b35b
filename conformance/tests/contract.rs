//! docs/contract.md against the scenarios: every rule's `Proved by:` list
//! must be exactly the scenarios whose `rules:` cite it, and every id a
//! scenario cites must be defined, so neither side can drift.

use std::collections::BTreeMap;

use mcp_conformance::{discover_scenarios, load_scenario};
use mcp_conformance_report::contract;

#[test]
fn proved_by_lists_match_the_scenarios() {
    let rules = contract::rules().unwrap_or_else(|error| panic!("{error}"));
    let mut cited = BTreeMap::new();
    let found = discover_scenarios(&mcp_conformance::scenarios_root()).expect("scenarios/");
    assert!(!found.is_empty(), "no scenario found");
    for (name, path) in found {
        // Loading also rejects an id the contract does not define.
        let loaded = load_scenario(&path).unwrap_or_else(|error| panic!("{error}"));
        cited.insert(name, loaded.rules);
    }
    let problems = contract::disagreements(rules, &cited);
    assert!(
        problems.is_empty(),
        "docs/contract.md and the scenarios disagree (`cargo xtask conformance --rules` shows \
         the whole mapping):\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_rule_is_linkable() {
    // report.md links `docs/contract.md#<id>`: each id needs its anchor,
    // exactly as the parser read it.
    for rule in contract::rules().unwrap() {
        let anchor = format!("<a id=\"{}\"></a>\n### {}: ", rule.id, rule.id);
        assert!(contract::DOCUMENT.contains(&anchor), "{}", rule.id);
    }
}
