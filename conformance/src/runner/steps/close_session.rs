//! `close_session`: every server of the session closed at once.

use std::{collections::BTreeMap, time::Instant};

use mcp_stdio_client::ServerClose;

use crate::{
    outcome::StepOutcome,
    runner::{Exec, describe_survivors},
    scenario::{ClosePath, CloseSessionStep},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &CloseSessionStep) {
    let Some(session) = exec.subject.library().and_then(|l| l.session.as_ref()) else {
        return exec.no_client(id);
    };
    let start = Instant::now();
    let closes = session.close().await;
    let elapsed = start.elapsed();
    let alive = exec.env.alive(&exec.groups());
    let mut paths: BTreeMap<String, Option<ClosePath>> = BTreeMap::new();
    for (name, close) in &closes {
        match close {
            ServerClose::Stdio(outcome) => {
                exec.rec.check(
                    &format!("{id}.{name}.reaped"),
                    outcome.status.is_some(),
                    format!("{name} was reaped"),
                );
                paths.insert(name.clone(), Some(outcome.path));
            }
            ServerClose::Http => {
                paths.insert(name.clone(), None);
            }
        }
    }
    let shown = |path: Option<&Option<ClosePath>>| match path {
        Some(Some(path)) => path.to_string(),
        Some(None) => "http".into(),
        None => "not started".into(),
    };
    for (name, expected) in &step.expect.paths {
        let got = paths.get(name);
        exec.rec.check(
            &format!("{id}.{name}.path"),
            got == Some(&Some(*expected)),
            format!("{name} closed by {}, expected {expected}", shown(got)),
        );
    }
    let mut bounded = None;
    if let Some(bound) = step.expect.faster_than {
        bounded = Some(elapsed < bound.0);
        exec.rec.check(
            &format!("{id}.faster_than"),
            elapsed < bound.0,
            format!("closed in {elapsed:?}, bound {bound}"),
        );
    }
    let expected = exec.expected_survivors();
    exec.rec.check(
        &format!("{id}.nothing_left"),
        alive == expected,
        format!(
            "alive when the session closed: {}; expected: {}",
            describe_survivors(&alive),
            describe_survivors(&expected)
        ),
    );
    exec.rec.push(StepOutcome {
        step: "close_session".into(),
        result: "ok".into(),
        text: Some(
            paths
                .iter()
                .map(|(n, p)| format!("{n}: {}", shown(Some(p))))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        status: bounded.map(|b| if b { "within bound" } else { "over bound" }.to_owned()),
        ..StepOutcome::default()
    });
    let library = exec.subject.library().expect("a session is the library's");
    if let Some(session) = library.session.take() {
        library.collect_session(&session);
    }
}
