//! After the steps: the process table, the ledger and the captured log,
//! checked against the scenario's expectations; then cleanup.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use super::{
    Exec, Run, SURVIVOR_SETTLE, WAIT_BOUND, consistency, describe_survivors, subject::describe,
};
use crate::{
    capture::split_log,
    observer,
    outcome::SurvivorOutcome,
    scenario::{LedgerExpect, fixture_binary},
};

/// A ledger event's bare name (for expectations) and its detailed form (for
/// the snapshot).
type NamedEvent = (String, String);

impl Exec<'_> {
    /// Observes the process table, checks every expectation, cleans up.
    pub(super) fn finish(mut self, log: String) -> Run {
        let ledger = self.env.ledger();
        let mut fixture_of: BTreeMap<u32, String> = BTreeMap::new();
        // Expectations name bare events; the snapshot also shows each
        // request's method, the protocol era it was made in and, for a
        // handshake, the client it names.
        let mut per_process: Vec<(u32, String, Vec<NamedEvent>)> = Vec::new();
        for record in &ledger {
            let (pid, fixture, event) = (record.pid, record.fixture.clone(), record.event.clone());
            let detailed = match (record.raw["method"].as_str(), record.raw["era"].as_str()) {
                // A handshake names the client that made it.
                (Some(method), Some(era)) if record.raw.get("client").is_some() => {
                    let client = record.raw["client"].as_str().unwrap_or("no clientInfo");
                    format!("{event} {method} ({era}) from {client}")
                }
                (Some(method), Some(era)) => format!("{event} {method} ({era})"),
                (Some(method), None) => format!("{event} {method}"),
                // A progress record (a flood's running count) is written as
                // often as the machine's speed allows before the close: the
                // snapshot shows that it happened, not how often (runs of
                // them collapse below; bounds are asserted in code).
                _ if record.raw["count"].is_u64() => format!("{event} (count [N])"),
                _ => event.clone(),
            };
            fixture_of.entry(pid).or_insert_with(|| fixture.clone());
            match per_process.iter_mut().find(|(p, _, _)| *p == pid) {
                Some((_, _, events)) => events.push((event, detailed)),
                None => per_process.push((pid, fixture, vec![(event, detailed)])),
            }
        }
        for pid in fixture_of.keys() {
            self.rec.normalizer.add_pid(*pid);
        }
        // Processes of one fixture are told apart as `name#2`, `name#3` in the
        // order of their event lists, not of their start: several servers
        // started at once start in any order.
        let mut by_fixture: BTreeMap<String, Vec<Vec<NamedEvent>>> = BTreeMap::new();
        for (_, fixture, events) in &per_process {
            by_fixture
                .entry(fixture.clone())
                .or_default()
                .push(events.clone());
        }
        let mut ledger_by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut detailed_by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (fixture, mut processes) in by_fixture {
            processes.sort();
            for (index, events) in processes.into_iter().enumerate() {
                let key = if index == 0 {
                    fixture.clone()
                } else {
                    format!("{fixture}#{}", index + 1)
                };
                let (names, mut detailed): (Vec<String>, Vec<String>) = events.into_iter().unzip();
                detailed
                    .dedup_by(|next, previous| next == previous && next.ends_with(" (count [N])"));
                ledger_by_name.insert(key.clone(), names);
                detailed_by_name.insert(key, detailed);
            }
        }

        // Survivors, found by marker. Processes SIGKILLed by a drop die
        // asynchronously, so this waits (bounded) for the table to settle on
        // the expected survivors; a real leak is still there after the wait.
        let expected = self.expected_survivors();
        let settle = Instant::now() + SURVIVOR_SETTLE;
        let survivor_outcomes = loop {
            let alive = self.env.alive(&self.groups());
            if alive == expected || Instant::now() > settle {
                break alive;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let me = std::process::id();
        let leaders: BTreeSet<u32> = self.subject.leaders().iter().map(|l| l.pid).collect();
        let known: BTreeSet<u32> = fixture_of
            .keys()
            .copied()
            .chain(leaders.iter().copied())
            .collect();
        // The library's servers are this process's children: unreaped, they
        // count. An external client's children re-parent to the runner
        // (subreaper) when its program ends, as they would to init: what
        // counts is what it left unreaped while it ran (`zombies_at_end`).
        let in_process = self.subject.library().is_some();
        let mut zombies = known
            .iter()
            .filter(|pid| observer::is_zombie(**pid))
            // Orphans re-parented to the runner (subreaper) are the runner's
            // to reap, not the client's; the client's own children always count.
            .filter(|pid| {
                (in_process && leaders.contains(pid)) || observer::parent_of(**pid) != Some(me)
            })
            .count() as u32;
        if let Some(external) = self.subject.external() {
            zombies += external.zombies_at_end;
            for problem in std::mem::take(&mut external.problems) {
                self.rec.check("driver", false, problem);
            }
        }
        observer::kill_and_reap(&self.env.marker, &known, WAIT_BOUND);

        let (events, session_events, stdout_skipped) = match self.subject.library() {
            Some(library) => (
                std::mem::take(&mut library.events),
                std::mem::take(&mut library.session_events),
                library.stdout_skipped,
            ),
            None => (Vec::new(), Vec::new(), 0),
        };
        self.rec.outcome.stdout_skipped = stdout_skipped;
        self.check_survivors(&survivor_outcomes);
        let expected_zombies = self.scenario.expect.zombies;
        self.rec.check(
            "zombies",
            zombies == expected_zombies,
            format!("{zombies} zombie(s), expected {expected_zombies}"),
        );
        self.check_ledger(&ledger_by_name);
        // A stderr flood the server could not finish: its client closed the
        // pipe instead of draining it (rule 4.stderr.drain), whatever else
        // the scenario expects.
        for record in ledger
            .iter()
            .filter(|r| r.event == "stderr_flood" && r.raw["cut_short"] == true)
        {
            self.rec.check(
                &format!("ledger.{}.stderr_drained", record.fixture),
                false,
                format!(
                    "the client stopped reading the server's stderr: {} could write only {} of {} bytes ({})",
                    record.fixture,
                    record.raw["bytes"],
                    record.raw["requested"],
                    record.raw["error"].as_str().unwrap_or("write failed")
                ),
            );
        }
        // The client's log: captured in process, or the driver's stderr.
        let log = match self.subject.external() {
            Some(external) => std::mem::take(&mut external.stderr),
            None => log,
        };
        self.check_streams(&log);
        self.check_load();

        self.rec.outcome.events = events
            .iter()
            .filter_map(|event| describe(&event.kind))
            .collect();
        self.rec.outcome.events.extend(session_events);
        self.rec.outcome.ledger = detailed_by_name;
        self.rec.outcome.survivors = survivor_outcomes;
        self.rec.outcome.zombies = zombies;
        for event in &events {
            if let mcp_stdio_client::EventKind::StdoutLineSkipped { reason, .. } = &event.kind {
                let reason = serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned));
                *self
                    .rec
                    .outcome
                    .stdout_skipped_by_reason
                    .entry(reason.unwrap_or_default())
                    .or_default() += 1;
            }
        }
        self.rec.outcome.stderr_forwarded = self.stderr_lines > 0;
        for step in &mut self.rec.outcome.steps {
            if let Some(message) = &step.message {
                step.message = Some(self.rec.normalizer.apply(message));
            }
        }
        self.check_secrets(&log, &events);
        Run {
            skipped: self.rec.skipped,
            outcome: self.rec.outcome,
            checks: self.rec.checks,
            log,
        }
    }

    fn check_survivors(&mut self, survivors: &[SurvivorOutcome]) {
        let expected = self.expected_survivors();
        self.rec.check(
            "survivors",
            survivors == expected.as_slice(),
            format!(
                "survivors: {}; expected: {}",
                describe_survivors(survivors),
                describe_survivors(&expected)
            ),
        );
    }

    fn check_ledger(&mut self, ledger: &BTreeMap<String, Vec<String>>) {
        for expect in &self.scenario.expect.ledger {
            let fixture = fixture_binary(&expect.fixture);
            let id = format!("ledger.{fixture}");
            // Every process of the fixture must meet the expectation.
            let processes: Vec<Vec<String>> = ledger
                .iter()
                .filter(|(key, _)| *key == &fixture || key.starts_with(&format!("{fixture}#")))
                .map(|(_, events)| events.clone())
                .collect();
            if processes.is_empty() {
                self.rec
                    .check(&id, false, format!("no ledger records from {fixture}"));
                continue;
            }
            for events in processes {
                self.check_process_ledger(&id, expect, &events);
            }
        }
    }

    fn check_process_ledger(&mut self, id: &str, expect: &LedgerExpect, events: &[String]) {
        if let Some(exact) = &expect.events {
            // The legacy era adds `notifications/initialized` to the
            // handshake; the scenarios' exact lists are the library's
            // (modern) era, and clients of both eras are graded alike.
            let era_neutral: Vec<String>;
            let events =
                if self.subject.library().is_none() && !exact.iter().any(|e| e == "initialized") {
                    era_neutral = events
                        .iter()
                        .filter(|e| *e != "initialized")
                        .cloned()
                        .collect();
                    &era_neutral[..]
                } else {
                    events
                };
            // An external client's kill may show the close ladder the
            // contract allows before it (`killed_alike`), and its requests
            // are its own choice (`requests_alike`).
            let external = self.subject.library().is_none();
            let alike = external && killed_alike(exact, events);
            let more_requests = external && !alike && requests_alike(exact, events);
            self.rec.check(
                &format!("{id}.events"),
                events == exact.as_slice() || alike || more_requests,
                if alike {
                    format!(
                        "events {events:?}: {exact:?}, then steps of the close ladder the contract allows before a kill"
                    )
                } else if more_requests {
                    format!(
                        "events {events:?}: {exact:?} with more requests of the client's own (the lifecycle records are the same)"
                    )
                } else {
                    format!("events {events:?}, expected {exact:?}")
                },
            );
        }
        for event in &expect.contains {
            self.rec.check(
                &format!("{id}.contains"),
                events.contains(event),
                format!("{event} in {events:?}"),
            );
        }
        for event in &expect.absent {
            self.rec.check(
                &format!("{id}.absent"),
                !events.contains(event),
                format!("{event} must not be in {events:?}"),
            );
        }
        if !expect.order.is_empty() {
            let mut wanted = expect.order.iter().peekable();
            for event in events {
                if wanted.peek() == Some(&event) {
                    wanted.next();
                }
            }
            self.rec.check(
                &format!("{id}.order"),
                wanted.peek().is_none(),
                format!("{:?} in this order within {events:?}", expect.order),
            );
        }
    }

    fn check_streams(&mut self, log: &str) {
        for file in self.scenario.expect.files.clone() {
            let path = self.env.substitute(&file);
            let exists = std::path::Path::new(&path).is_file();
            self.rec.check(
                "files",
                exists,
                format!("{file} was written (a process saved its state)"),
            );
        }
        if self.subject.library().is_none() {
            // Forwarded stderr and skipped stdout lines are what the library
            // logs and counts: an external client reports neither.
            return;
        }
        let (_, stderr_lines) = split_log(log);
        let report = self.subject.library().and_then(|l| l.last_report.clone());
        if let Some(report) = report {
            consistency::stderr(self, &report, &stderr_lines);
            consistency::restarts(self, &report);
        }
        // Forwarded means logged by the client: counted in its log, so a
        // failed connect (which leaves no client to ask) counts too.
        self.stderr_lines = stderr_lines.len() as u64;
        if let Some(expect) = &self.scenario.expect.stderr {
            if let Some(min) = expect.min_lines {
                let got = self.stderr_lines;
                self.rec.check(
                    "stderr.min_lines",
                    got >= min,
                    format!("{got} stderr lines forwarded, expected at least {min}"),
                );
            }
            for needle in &expect.contains {
                let found = stderr_lines
                    .iter()
                    .any(|line| line.contains(needle.as_str()));
                self.rec.check(
                    "stderr.contains",
                    found,
                    format!("a forwarded stderr line contains {needle:?}"),
                );
            }
        }
        if let Some(expect) = &self.scenario.expect.stdout_skipped {
            let got = self.rec.outcome.stdout_skipped;
            let ok =
                expect.min.is_none_or(|min| got >= min) && expect.max.is_none_or(|max| got <= max);
            self.rec.check(
                "stdout_skipped",
                ok,
                format!(
                    "{got} stdout lines skipped, expected {:?}..={:?}",
                    expect.min, expect.max
                ),
            );
        }
    }

    fn check_load(&mut self) {
        let Some(expect) = &self.scenario.expect.load else {
            return;
        };
        let Some(load) = &self.rec.outcome.load else {
            return;
        };
        let (ok, error) = (load.ok, load.error.clone().unwrap_or_default());
        let servers: Vec<(String, String, bool, bool)> = load
            .servers
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.transport.clone(),
                    s.requires_consent,
                    s.serial,
                )
            })
            .collect();
        self.rec.check(
            "load.ok",
            ok == expect.ok,
            if ok {
                "the config loaded".into()
            } else {
                format!("the config did not load: {error}")
            },
        );
        for needle in &expect.error_contains {
            self.rec.check(
                "load.error",
                error.contains(needle.as_str()),
                format!("error must contain {needle:?}: {error}"),
            );
        }
        for needle in &expect.error_not_contains {
            self.rec.check(
                "load.error",
                !error.contains(needle.as_str()),
                format!("error must not contain {needle:?}: {error}"),
            );
        }
        for flags in &expect.servers {
            let id = format!("load.servers.{}", flags.name);
            let Some((_, transport, consent, serial)) = servers.iter().find(|s| s.0 == flags.name)
            else {
                self.rec
                    .check(&id, false, format!("server {} not loaded", flags.name));
                continue;
            };
            let ok = flags.transport.as_ref().is_none_or(|t| t == transport)
                && flags.requires_consent.is_none_or(|c| c == *consent)
                && flags.serial.is_none_or(|s| s == *serial);
            self.rec.check(
                &id,
                ok,
                format!(
                    "{transport}, requires_consent {consent}, serial {serial}; expected {flags:?}"
                ),
            );
        }
    }

    fn check_secrets(&mut self, log: &str, events: &[mcp_stdio_client::Event]) {
        let secrets = self.scenario.expect.secrets_absent.clone();
        if secrets.is_empty() {
            return;
        }
        // An external client's whole stderr is its own output.
        let own_lines = match self.subject.library() {
            Some(_) => split_log(log).0,
            None => log.lines().collect(),
        };
        let mut sources: Vec<(String, String)> = own_lines
            .iter()
            .map(|line| ("log".to_owned(), (*line).to_owned()))
            .collect();
        sources.extend(
            self.rec
                .words
                .iter()
                .map(|w| ("error or Debug output".to_owned(), w.clone())),
        );
        sources.push((
            "events".into(),
            serde_json::to_string(events).unwrap_or_default(),
        ));
        sources.push(("outcome".into(), self.rec.outcome.render()));
        for secret in &secrets {
            let leak = sources
                .iter()
                .find(|(_, text)| text.contains(secret.as_str()));
            let message = match leak {
                Some((kind, text)) => {
                    format!("secret {secret:?} leaked in the client's {kind}: {text}")
                }
                None => format!("secret {secret:?} appears nowhere in the client's own output"),
            };
            self.rec.check("secrets", leak.is_none(), message);
        }
    }
}

/// What a server records of the close ladder, in the ladder's order: its
/// stdin EOF, a SIGTERM, its own exit.
const LADDER: [&str; 3] = ["stdin_eof", "signal", "exit"];

/// For an external client: `events` is `exact`, a server ended outright
/// (its list ends before any step of the ladder: a SIGKILL leaves no
/// record), followed by steps of the close ladder, in order. The contract
/// has a client that kills close stdin first (`4.drop`) and does not forbid
/// a SIGTERM before the SIGKILL; a server that sees those records them, and
/// may even exit on them first. Only this project's client, which kills at
/// once after the EOF, leaves such a server no time to: its exact list is
/// one correct ending among several. A client that stops waiting for a
/// request still pending (its list ends with that `request`: a timed-out
/// handshake) may first say so with `notifications/cancelled`, as a
/// client should for any request it gives up on.
fn killed_alike(exact: &[String], events: &[String]) -> bool {
    if exact.iter().any(|event| LADDER.contains(&event.as_str())) {
        return false;
    }
    let Some(mut tail) = events.strip_prefix(exact) else {
        return false;
    };
    if tail.is_empty() {
        // `events == exact`: the exact check itself.
        return false;
    }
    if exact.last().is_some_and(|event| event == "request")
        && let Some(rest) = tail.strip_prefix(&["cancelled".to_owned()])
    {
        tail = rest;
    }
    let mut ladder = LADDER.iter();
    tail.iter().all(|event| ladder.any(|step| step == event))
}

/// For an external client: `events` is `exact` with more `request` records
/// inserted (a client may list the tools before it calls one, or ping): what
/// a client asks is its own choice, and the lifecycle (starts, EOF, signals,
/// exits, cancellations) is in the other records, which must be exactly the
/// expected ones in the expected order.
fn requests_alike(exact: &[String], events: &[String]) -> bool {
    let mut expected = exact.iter().peekable();
    for event in events {
        if expected.peek().is_some_and(|next| *next == event) {
            expected.next();
        } else if event != "request" {
            return false;
        }
    }
    expected.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::{killed_alike, requests_alike};

    #[test]
    fn more_requests_of_the_clients_own_are_alike_and_nothing_else_is() {
        let exact = list(&["started", "request", "request", "exit"]);
        assert!(requests_alike(&exact, &exact));
        assert!(requests_alike(
            &exact,
            &list(&["started", "request", "request", "request", "exit"])
        ));
        assert!(requests_alike(
            &exact,
            &list(&[
                "started", "request", "request", "request", "request", "exit"
            ])
        ));
        for not in [
            &["started", "request", "exit"][..],
            &["started", "request", "request", "stdin_eof", "exit"],
            &["started", "request", "request", "exit", "started"],
            &["started", "started", "request", "request", "exit"],
            &["started", "request", "request"],
        ] {
            assert!(!requests_alike(&exact, &list(not)), "{not:?}");
        }
    }

    fn list(events: &[&str]) -> Vec<String> {
        events.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_kill_may_follow_steps_of_the_close_ladder_in_order() {
        let exact = list(&["started", "request"]);
        for ok in [
            &["started", "request", "stdin_eof"][..],
            &["started", "request", "stdin_eof", "signal"],
            &["started", "request", "stdin_eof", "exit"],
            &["started", "request", "signal", "exit"],
            // A timed-out handshake, cancelled, then the ladder.
            &[
                "started",
                "request",
                "cancelled",
                "stdin_eof",
                "signal",
                "exit",
            ],
            &["started", "request", "cancelled"],
        ] {
            assert!(killed_alike(&exact, &list(ok)), "{ok:?}");
        }
        for wrong in [
            &["started", "request"][..],
            &["started", "request", "signal", "stdin_eof"],
            &["started", "request", "request", "stdin_eof"],
            &["started", "stdin_eof"],
            &["started", "request", "stdin_eof", "cancelled"],
        ] {
            assert!(!killed_alike(&exact, &list(wrong)), "{wrong:?}");
        }
        // A list that names its own ending is exact.
        let ended = list(&["started", "stdin_eof", "exit"]);
        assert!(!killed_alike(
            &ended,
            &list(&["started", "stdin_eof", "exit", "signal"])
        ));
    }
}
