//! `discover_tools`: `Session::discover_tools`, namespaced names and flags.

use std::time::Duration;

use crate::{outcome::StepOutcome, runner::Exec, scenario::DiscoverToolsStep};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &DiscoverToolsStep) {
    let Some(session) = exec.subject.library().and_then(|l| l.session.as_mut()) else {
        return exec.no_client(id);
    };
    let tools = session
        .discover_tools(Duration::from_secs(10))
        .await
        .to_vec();
    let expect = &step.expect;
    if let Some(count) = expect.count {
        exec.rec.check(
            &format!("{id}.count"),
            tools.len() == count,
            format!("{} tools, expected {count}", tools.len()),
        );
    }
    for name in &expect.contains {
        let found = tools.iter().any(|t| &t.qualified_name == name);
        exec.rec.check(
            &format!("{id}.contains"),
            found,
            format!("tool {name} offered"),
        );
    }
    for (name, flags) in &expect.flags {
        let tool = tools.iter().find(|t| &t.qualified_name == name);
        let ok = tool.is_some_and(|t| {
            t.requires_consent == flags.requires_consent && t.serial == flags.serial
        });
        let got = tool.map(|t| {
            format!(
                "requires_consent {}, serial {}",
                t.requires_consent, t.serial
            )
        });
        exec.rec.check(
            &format!("{id}.flags.{name}"),
            ok,
            format!(
                "{name}: {}; expected {flags:?}",
                got.unwrap_or_else(|| "not offered".into())
            ),
        );
    }
    let mut names: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                "{} [{}{}]",
                t.qualified_name,
                if t.requires_consent {
                    "consent"
                } else {
                    "no-consent"
                },
                if t.serial { ", serial" } else { ", parallel" }
            )
        })
        .collect();
    names.sort();
    exec.rec.push(StepOutcome {
        step: "discover_tools".into(),
        result: "ok".into(),
        count: Some(tools.len()),
        text: Some(names.join("; ")),
        ..StepOutcome::default()
    });
}
