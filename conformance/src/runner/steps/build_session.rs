//! `build_session`: `Session::build` over every server of the config.

use std::{collections::BTreeMap, time::Instant};

use mcp_stdio_client::{Connection, ErrorKind, Session, SessionOptions};

use crate::{
    outcome::StepOutcome,
    runner::{
        Exec, NO_GH,
        subject::{Failure, Leader, library::kind_of},
    },
    scenario::BuildSessionStep,
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &BuildSessionStep) {
    let Some(config) = exec.config.clone() else {
        exec.rec
            .check(&format!("{id}.config"), false, "the config did not load");
        return;
    };
    if exec.subject.library().is_none() {
        return exec.library_only(id, "build_session");
    }
    let options = SessionOptions {
        gh_command: step
            .gh_command
            .as_deref()
            .map_or(NO_GH.to_owned(), |gh| exec.env.substitute(gh)),
        // The harness's own runs contain their servers.
        contain: mcp_stdio_client::Contain::On,
        ..SessionOptions::default()
    };
    let logged_before = exec.capture.text().len();
    let start = Instant::now();
    let session = Session::build(&config, &options).await;
    let elapsed = start.elapsed();
    let started: Vec<String> = session.servers().map(str::to_owned).collect();
    let failed: BTreeMap<String, ErrorKind> = session
        .failures()
        .iter()
        .map(|f| (f.server.clone(), kind_of(&f.error)))
        .collect();
    for failure in session.failures() {
        exec.rec.words.extend(Failure::of(&failure.error).words);
    }
    let mut leaders = Vec::new();
    for name in &started {
        if let Some(Connection::Stdio(client)) = session.connection(name) {
            // The harness's own sighting of the server (the client's report
            // only chooses among the servers it sees).
            let mut taken = exec.subject.leaders();
            taken.extend(leaders.iter().copied());
            if let Some(leader) = Leader::observed(&exec.env, client.pid(), &taken) {
                leaders.push(leader);
            }
            exec.rec.normalizer.add_pid(client.pid());
        }
    }
    let expect = &step.expect;
    if let Some(expected) = &expect.started {
        exec.rec.check(
            &format!("{id}.started"),
            &started == expected,
            format!("started {started:?}, expected {expected:?}"),
        );
    }
    exec.rec.check(
        &format!("{id}.failed"),
        failed == expect.failed,
        format!("failed {failed:?}, expected {:?}", expect.failed),
    );
    let mut bounded = None;
    if let Some(bound) = expect.faster_than {
        bounded = Some(elapsed < bound.0);
        exec.rec.check(
            &format!("{id}.faster_than"),
            elapsed < bound.0,
            format!("built in {elapsed:?}, bound {bound}"),
        );
    }
    if let Some(runs) = expect.gh_runs {
        exec.rec.check(
            &format!("{id}.gh_runs"),
            session.gh_runs() == runs,
            format!("gh ran {} time(s), expected {runs}", session.gh_runs()),
        );
    }
    if expect.no_warnings {
        let log = exec.capture.text();
        let warnings: Vec<&str> = log[logged_before..]
            .lines()
            .filter(|l| l.contains(" WARN "))
            .collect();
        exec.rec.check(
            &format!("{id}.no_warnings"),
            warnings.is_empty(),
            format!("warnings while building: {warnings:?}"),
        );
    }
    let failed_text = failed
        .iter()
        .map(|(s, k)| format!("{s} ({k})"))
        .collect::<Vec<_>>()
        .join(", ");
    exec.rec.push(StepOutcome {
        step: "build_session".into(),
        result: "ok".into(),
        text: Some(format!(
            "started: {}; failed: {}",
            started.join(", "),
            if failed_text.is_empty() {
                "none".into()
            } else {
                failed_text
            }
        )),
        status: bounded.map(|b| if b { "within bound" } else { "over bound" }.to_owned()),
        ..StepOutcome::default()
    });
    let library = exec.subject.library().expect("checked above");
    library.session_leaders.extend(leaders);
    library.session = Some(session);
}
