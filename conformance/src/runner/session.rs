//! The session steps of a scenario: build, discover, call (in `step`), close.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use mcp_stdio_client::{
    Connection, ServerClose, Session, SessionOptions, config::parse_duration, error_chain as chain,
};

use super::{Exec, NO_GH, describe, describe_survivors};
use crate::{
    outcome::StepOutcome,
    scenario::{BuildSessionStep, CloseSessionStep, DiscoverToolsStep},
};

impl Exec<'_> {
    pub(super) async fn build_session(&mut self, id: &str, step: &BuildSessionStep) {
        let Some(config) = self.config.clone() else {
            self.check(&format!("{id}.config"), false, "the config did not load");
            return;
        };
        let options = SessionOptions {
            gh_command: step
                .gh_command
                .as_deref()
                .map_or(NO_GH.to_owned(), |gh| self.substitute(gh)),
            ..SessionOptions::default()
        };
        let logged_before = self.capture.text().len();
        let start = Instant::now();
        let session = Session::build(&config, &options).await;
        let elapsed = start.elapsed();
        let started: Vec<String> = session.servers().map(str::to_owned).collect();
        let failed: BTreeMap<String, String> = session
            .failures()
            .iter()
            .map(|f| (f.server.clone(), f.error.kind().as_str().to_owned()))
            .collect();
        for failure in session.failures() {
            self.words.push(chain(&failure.error));
            self.words.push(format!("{:?}", failure.error));
        }
        for name in &started {
            if let Some(Connection::Stdio(client)) = session.connection(name) {
                self.session_leaders
                    .push((client.pid() as i32, client.pgid() as i32));
                self.normalizer.add_pid(client.pid() as i32);
            }
        }
        let expect = &step.expect;
        if let Some(expected) = &expect.started {
            self.check(
                &format!("{id}.started"),
                &started == expected,
                format!("started {started:?}, expected {expected:?}"),
            );
        }
        self.check(
            &format!("{id}.failed"),
            failed == expect.failed,
            format!("failed {failed:?}, expected {:?}", expect.failed),
        );
        let mut bounded = None;
        if let Some(bound) = &expect.faster_than {
            let limit = parse_duration(bound).expect("validated");
            bounded = Some(elapsed < limit);
            self.check(
                &format!("{id}.faster_than"),
                elapsed < limit,
                format!("built in {elapsed:?}, bound {bound}"),
            );
        }
        if let Some(runs) = expect.gh_runs {
            self.check(
                &format!("{id}.gh_runs"),
                session.gh_runs() == runs,
                format!("gh ran {} time(s), expected {runs}", session.gh_runs()),
            );
        }
        if expect.no_warnings {
            let log = self.capture.text();
            let warnings: Vec<&str> = log[logged_before..]
                .lines()
                .filter(|l| l.contains(" WARN "))
                .collect();
            self.check(
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
        self.outcome.steps.push(StepOutcome {
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
        self.session = Some(session);
    }

    pub(super) async fn discover_tools(&mut self, id: &str, step: &DiscoverToolsStep) {
        let Some(session) = &mut self.session else {
            return self.no_client(id);
        };
        let tools = session
            .discover_tools(Duration::from_secs(10))
            .await
            .to_vec();
        let expect = &step.expect;
        if let Some(count) = expect.count {
            self.check(
                &format!("{id}.count"),
                tools.len() == count,
                format!("{} tools, expected {count}", tools.len()),
            );
        }
        for name in &expect.contains {
            let found = tools.iter().any(|t| &t.qualified_name == name);
            self.check(
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
            self.check(
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
        self.outcome.steps.push(StepOutcome {
            step: "discover_tools".into(),
            result: "ok".into(),
            count: Some(tools.len()),
            text: Some(names.join("; ")),
            ..StepOutcome::default()
        });
    }

    pub(super) async fn close_session(&mut self, id: &str, step: &CloseSessionStep) {
        let Some(session) = &self.session else {
            return self.no_client(id);
        };
        let start = Instant::now();
        let closes = session.close().await;
        let elapsed = start.elapsed();
        let mut paths = BTreeMap::new();
        for (name, close) in &closes {
            match close {
                ServerClose::Stdio(outcome) => {
                    self.check(
                        &format!("{id}.{name}.reaped"),
                        outcome.status.is_some(),
                        format!("{name} was reaped"),
                    );
                    paths.insert(name.clone(), outcome.path.to_string());
                }
                ServerClose::Http => {
                    paths.insert(name.clone(), "http".into());
                }
            }
        }
        for (name, expected) in &step.expect.paths {
            let got = paths
                .get(name)
                .cloned()
                .unwrap_or_else(|| "not started".into());
            self.check(
                &format!("{id}.{name}.path"),
                &got == expected,
                format!("{name} closed by {got}, expected {expected}"),
            );
        }
        let mut bounded = None;
        if let Some(bound) = &step.expect.faster_than {
            let limit = parse_duration(bound).expect("validated");
            bounded = Some(elapsed < limit);
            self.check(
                &format!("{id}.faster_than"),
                elapsed < limit,
                format!("closed in {elapsed:?}, bound {bound}"),
            );
        }
        let alive = self.alive_now();
        let expected = self.expected_survivors();
        self.check(
            &format!("{id}.nothing_left"),
            alive == expected,
            format!(
                "alive when the session closed: {}; expected: {}",
                describe_survivors(&alive),
                describe_survivors(&expected)
            ),
        );
        self.outcome.steps.push(StepOutcome {
            step: "close_session".into(),
            result: "ok".into(),
            text: Some(
                paths
                    .iter()
                    .map(|(n, p)| format!("{n}: {p}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            status: bounded.map(|b| if b { "within bound" } else { "over bound" }.to_owned()),
            ..StepOutcome::default()
        });
        if let Some(session) = self.session.take() {
            self.collect_session(&session);
        }
    }

    /// Keeps every stdio server's events, as `server: event`.
    pub(super) fn collect_session(&mut self, session: &Session) {
        let names: Vec<String> = session.servers().map(str::to_owned).collect();
        for name in names {
            if let Some(Connection::Stdio(client)) = session.connection(&name) {
                self.session_events.extend(
                    client
                        .events()
                        .iter()
                        .filter_map(|e| describe(&e.kind))
                        .map(|e| format!("{name}: {e}")),
                );
                self.stdout_skipped += client.stdout_lines_skipped();
            }
        }
    }
}
