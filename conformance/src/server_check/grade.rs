//! Grading: turns what the runs observed into a verdict, a one-line summary
//! and a fix hint per check, and merges repetitions (the worst one wins).

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    era::{self, Discover, Era, Initialize},
    options::{CheckId, Options},
    purity::{self, Purity},
    report::{CaseResult, CheckResult, Fmt, Verdict, human},
    runs::{
        BeforeHandshake, Ending, Handshake, HandshakeError, HostDeath, HostDeathEnd, Idle,
        InFlight, Lifecycle, Repetition, Sigterm, StartupFrom,
    },
    survivors::Survivor,
};

const HINT_RESPONDS: &str = "answer `server/discover` or `initialize` (and `tools/list`) promptly on stdout; run with -v to read the server's stderr";
const HINT_DISCOVER_WRONG: &str = "answer `server/discover` with supportedVersions (including the version asked for), capabilities and _meta[\"io.modelcontextprotocol/serverInfo\"]; a server that serves only `initialize` refuses it with -32601";
const HINT_DISCOVER_SILENT: &str = "answer `server/discover` at once, or refuse it with -32601 (method not found) if you serve only `initialize`, so probing clients need not wait out their bound";
const HINT_LEGACY: &str = "answer `initialize` with an InitializeResult, or refuse it at once with -32022 and data.supported naming your versions";
const HINT_LATENCY: &str =
    "start faster: defer expensive setup until after the handshake, or pre-install the package";
const HINT_PURITY: &str = "write only JSON-RPC messages to stdout, one per line ending in \\n; send banners and logs to stderr";
const HINT_EOF: &str = "treat EOF on stdin as shutdown: when the read loop ends, stop pending work and exit, whatever state you are in";
const HINT_DESCENDANTS_GROUP: &str =
    "stop the processes you start before you exit (or let them exit when their stdin closes)";
const HINT_DESCENDANTS_LEFT: &str = "do not detach children with setsid or by daemonizing; end them before you exit, since no group signal reaches them";
const HINT_CPU: &str =
    "end read loops when a read returns 0 bytes (EOF) instead of retrying in a busy loop";
const HINT_HOST_DEATH: &str = "treat a dead host as shutdown: exit on stdin EOF or on a failed write to stdout, whichever comes first";
const HINT_EPIPE: &str = "treat EPIPE / a closed stdout as shutdown: exit when a write fails";
const HINT_EPIPE_CPU: &str = "stop retrying a write that failed with EPIPE: treat it as shutdown and exit instead of looping";
const HINT_SIGTERM: &str =
    "exit on SIGTERM: do not ignore it, and a handler must end the process after cleaning up";
const HINT_IDLE: &str =
    "keep running while stdin is open, even when no request arrives; exit only on EOF or a signal";

/// Grades every selected check over all repetitions.
pub fn grade(reps: &[Repetition], options: &Options, fmt: Fmt) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for id in options.checks.iter().copied() {
        let result = match id {
            CheckId::HandshakeLatency => latency(reps, options, fmt),
            CheckId::Stderr => stderr(reps, fmt),
            _ => {
                let per_rep: Vec<CheckResult> = reps
                    .iter()
                    .map(|rep| grade_one(id, rep, options, fmt))
                    .collect();
                merge(per_rep)
            }
        };
        results.push(result);
    }
    results
}

fn grade_one(id: CheckId, rep: &Repetition, options: &Options, fmt: Fmt) -> CheckResult {
    let lifecycle = rep.lifecycle.as_ref();
    match id {
        CheckId::HandshakeResponds => {
            responds(lifecycle.expect("the lifecycle run ran"), options, fmt)
        }
        CheckId::HandshakeDiscover => discover(
            &lifecycle.expect("the lifecycle run ran").handshake,
            options,
            fmt,
        ),
        CheckId::HandshakeLegacy => legacy(
            &lifecycle.expect("the lifecycle run ran").handshake,
            rep.legacy.as_ref(),
            options,
            fmt,
        ),
        CheckId::StdoutPurity => stdout_purity(lifecycle.expect("the lifecycle run ran"), fmt),
        CheckId::EofExit => eof_exit(rep, options, fmt),
        CheckId::EofDescendants => descendants(lifecycle.expect("the lifecycle run ran"), fmt),
        CheckId::EofCpu => cpu(lifecycle.expect("the lifecycle run ran"), options, fmt),
        CheckId::HostDeathExit => host_death_exit(
            rep.host_death.as_ref().expect("the host-death run ran"),
            options,
            fmt,
        ),
        CheckId::EpipeExit => {
            epipe_exit(rep.epipe.as_ref().expect("the epipe run ran"), options, fmt)
        }
        CheckId::EpipeCpu => epipe_cpu(rep, options, fmt),
        CheckId::SigtermExit => sigterm(
            rep.sigterm.as_ref().expect("the sigterm run ran"),
            options,
            fmt,
        ),
        CheckId::IdleAlive => idle(rep.idle.as_ref().expect("the idle run ran"), options, fmt),
        CheckId::HandshakeLatency | CheckId::Stderr => unreachable!("graded over all repetitions"),
    }
}

/// The worst repetition wins; if only some repetitions got it, say how many.
fn merge(mut per_rep: Vec<CheckResult>) -> CheckResult {
    let total = per_rep.len();
    let worst = per_rep
        .iter()
        .map(|r| r.verdict)
        .max()
        .expect("at least one repetition");
    let count = per_rep.iter().filter(|r| r.verdict == worst).count();
    let index = per_rep
        .iter()
        .position(|r| r.verdict == worst)
        .expect("the worst is there");
    let mut result = per_rep.swap_remove(index);
    if total > 1 && worst >= Verdict::Warn && count < total {
        result
            .summary
            .push_str(&format!(" (in {count} of {total} repetitions)"));
    }
    result
}

fn responds(run: &Lifecycle, options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::HandshakeResponds;
    let handshake = &run.handshake;
    let timeout = human(options.timeout);
    let first_byte = match handshake.first_byte {
        Some(d) => format!(
            "first byte after {}",
            fmt.dur(d, "timeout", options.timeout)
        ),
        None => "nothing on stdout".into(),
    };
    let method = method_of(handshake);
    let mut result = match (&handshake.answered, &handshake.tools) {
        (Ok((_, d)), tools) => {
            let tools = match tools {
                None => Ok("no tools offered".to_owned()),
                Some(Ok(list)) => Ok(format!("tools/list: {} tools", list.len())),
                Some(Err(error)) => Err(format!("tools/list failed: {error}")),
            };
            match tools {
                Ok(tools) => CheckResult::new(
                    id,
                    Verdict::Pass,
                    format!(
                        "{method} answered after {} ({first_byte}); {tools}",
                        fmt.dur(*d, "timeout", options.timeout)
                    ),
                ),
                Err(tools) => {
                    CheckResult::new(id, Verdict::Fail, format!("{method} answered, but {tools}"))
                }
            }
        }
        (Err(HandshakeError::Request(error)), _) => {
            use super::instance::RequestError as E;
            let what = match error {
                E::Timeout(_) => format!("no answer to {method} within {timeout} ({first_byte})"),
                E::Exited(status) => format!("exited ({status}) before answering {method}"),
                E::StdoutClosed => format!("closed stdout without answering {method}"),
                E::Write(error) => format!("could not be sent {method}: {error}"),
                E::ErrorAnswer { code, message, .. } => {
                    format!("answered {method} with error {code}: {message}")
                }
            };
            CheckResult::new(id, Verdict::Fail, what)
        }
        (Err(error), _) => CheckResult::new(id, Verdict::Fail, error.to_string()),
    };
    if result.verdict == Verdict::Fail {
        result.hint = Some(HINT_RESPONDS.into());
    }
    result.details = json!({
        "first_byte_ms": handshake.first_byte.map(|d| fmt.ms(d, "timeout", options.timeout)),
        "era": handshake.era(),
        "handshake_ms": handshake.time().map(|d| fmt.ms(d, "timeout", options.timeout)),
        // The name of schema 1, kept: the same time, whichever the era.
        "initialize_ms": handshake.time().map(|d| fmt.ms(d, "timeout", options.timeout)),
        "tools": match &handshake.tools { Some(Ok(list)) => json!(list.len()), _ => Value::Null },
    });
    result
}

/// The handshake's request: the one that completed, else the last one asked.
fn method_of(handshake: &Handshake) -> &'static str {
    match (handshake.era(), &handshake.initialize) {
        (Some(Era::Modern), _) | (None, None) => "server/discover",
        _ => "initialize",
    }
}

/// `[a, b]`, or `[]` for none.
fn list(versions: &[String]) -> String {
    format!("[{}]", versions.join(", "))
}

/// A version the server claimed outside `server/discover` that belongs to
/// the modern era: in its `initialize` answer, or in a version refusal.
fn claimed_modern(handshake: &Handshake) -> Option<String> {
    let from_discover = match &handshake.discover {
        Some(Discover::Refused { supported, .. }) => supported.clone(),
        _ => Vec::new(),
    };
    let from_initialize = match &handshake.initialize {
        Some(Initialize::Served { version, .. }) => vec![version.clone()],
        Some(Initialize::Refused { supported, .. }) => supported.clone(),
        _ => Vec::new(),
    };
    from_discover
        .into_iter()
        .chain(from_initialize)
        .find(|v| era::is_modern_version(v))
}

fn discover(handshake: &Handshake, options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::HandshakeDiscover;
    let probe = human(options.probe_timeout);
    let legacy_served = handshake
        .initialize
        .as_ref()
        .is_some_and(Initialize::served);
    let Some(answer) = &handshake.discover else {
        return CheckResult::new(id, Verdict::Skip, "server/discover was not asked");
    };
    let mut lost = None;
    let (verdict, summary, hint) = match answer {
        Discover::Served { after, versions } => (
            Verdict::Pass,
            format!(
                "serves the modern era: server/discover answered after {} with supportedVersions {}, capabilities and server info",
                fmt.dur(*after, "timeout", options.timeout),
                list(versions)
            ),
            None,
        ),
        Discover::Wrong(why) => (
            Verdict::Fail,
            format!("answered server/discover, but not with a correct DiscoverResult: {why}"),
            Some(HINT_DISCOVER_WRONG),
        ),
        Discover::Refused {
            code,
            message,
            supported,
        } if *code == era::UNSUPPORTED_PROTOCOL_VERSION => {
            if supported.iter().any(|v| v == era::MODERN_VERSION) {
                (
                    Verdict::Fail,
                    format!(
                        "refused server/discover for {} (error {code}), yet lists it as supported: {}",
                        era::MODERN_VERSION,
                        list(supported)
                    ),
                    Some(HINT_DISCOVER_WRONG),
                )
            } else {
                (
                    Verdict::Warn,
                    format!(
                        "serves only modern versions this check does not speak: {} (error {code}: {message})",
                        list(supported)
                    ),
                    None,
                )
            }
        }
        Discover::Refused { code, message, .. } => match claimed_modern(handshake) {
            Some(version) => (
                Verdict::Fail,
                format!(
                    "claims MCP {version}, but answered server/discover with error {code}: {message}"
                ),
                Some(HINT_DISCOVER_WRONG),
            ),
            None => (
                Verdict::Pass,
                format!(
                    "legacy only: server/discover refused at once (error {code}: {message}); modern-only clients cannot use this server"
                ),
                None,
            ),
        },
        Discover::Silent { waited } if legacy_served => {
            lost = Some(*waited);
            (
                Verdict::Warn,
                format!(
                    "legacy, silent on server/discover: no answer within --probe-timeout {probe}, then initialize answered; every probing client loses its probe bound ({probe} here) at each start"
                ),
                Some(HINT_DISCOVER_SILENT),
            )
        }
        Discover::Silent { .. } => (
            Verdict::Fail,
            format!(
                "no answer to server/discover within --probe-timeout {probe}, and no handshake in the legacy era either (see handshake.responds)"
            ),
            Some(HINT_RESPONDS),
        ),
        Discover::Failed(error) => (
            Verdict::Fail,
            format!("server/discover: {error}"),
            Some(HINT_RESPONDS),
        ),
    };
    let mut result = CheckResult::new(id, verdict, summary);
    result.hint = hint.map(Into::into);
    let answer = match answer {
        Discover::Served { .. } => "served",
        Discover::Wrong(_) => "wrong",
        Discover::Refused { .. } => "refused",
        Discover::Silent { .. } => "silent",
        Discover::Failed(_) => "failed",
    };
    result.details = json!({
        "answer": answer,
        "probe_timeout_ms": options.probe_timeout.as_millis() as u64,
        "lost_ms": lost.map(|d| d.as_millis() as u64),
    });
    result
}

fn legacy(
    handshake: &Handshake,
    alone: Option<&Initialize>,
    options: &Options,
    fmt: Fmt,
) -> CheckResult {
    let id = CheckId::HandshakeLegacy;
    let modern = handshake.discover.as_ref().is_some_and(Discover::served);
    let Some(answer) = handshake.initialize.as_ref().or(alone) else {
        return CheckResult::new(id, Verdict::Skip, "initialize was not asked");
    };
    let (verdict, summary) = match answer {
        Initialize::Served { after, version } => (
            Verdict::Pass,
            format!(
                "serves the legacy era: initialize answered after {} (protocolVersion {version})",
                fmt.dur(*after, "timeout", options.timeout)
            ),
        ),
        Initialize::Refused {
            code,
            message,
            supported,
        } if modern => {
            let versions = if supported.is_empty() {
                String::new()
            } else {
                format!(", supported {}", list(supported))
            };
            (
                Verdict::Pass,
                format!(
                    "modern only: initialize refused at once (error {code}{versions}: {message}); legacy-only clients cannot use this server"
                ),
            )
        }
        Initialize::Refused { code, message, .. } => (
            Verdict::Fail,
            format!(
                "initialize refused (error {code}: {message}), and no modern era served either"
            ),
        ),
        Initialize::Failed(why) => (Verdict::Fail, format!("initialize: {why}")),
    };
    let mut result = CheckResult::new(id, verdict, summary);
    if verdict == Verdict::Fail {
        result.hint = Some(HINT_LEGACY.into());
    }
    result
}

fn latency(reps: &[Repetition], options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::HandshakeLatency;
    let handshakes: Vec<_> = reps
        .iter()
        .filter_map(|r| r.lifecycle.as_ref())
        .map(|l| &l.handshake)
        .collect();
    let mut times: Vec<Duration> = handshakes.iter().filter_map(|h| h.time()).collect();
    let method = handshakes
        .iter()
        .find(|h| h.answered.is_ok())
        .map_or("initialize", |h| method_of(h));
    if times.is_empty() {
        return CheckResult::new(
            id,
            Verdict::Skip,
            "no handshake completed (see handshake.responds)",
        );
    }
    let cold = times[0];
    let mut first_bytes: Vec<Duration> = handshakes.iter().filter_map(|h| h.first_byte).collect();
    times.sort();
    first_bytes.sort();
    let median = times[times.len() / 2];
    let bound = options.latency_bound;
    let d = |d: Duration| fmt.dur(d, "latency-bound", bound);
    let summary = if times.len() == 1 {
        let first = first_bytes
            .first()
            .map(|f| format!(", first byte after {}", d(*f)))
            .unwrap_or_default();
        format!("{method} answered after {}{first}", d(median))
    } else {
        format!(
            "{method} answered after: cold {}; min {} / median {} / max {} over {} starts",
            d(cold),
            d(times[0]),
            d(median),
            d(times[times.len() - 1]),
            times.len()
        )
    };
    let verdict = if median <= bound {
        Verdict::Pass
    } else {
        Verdict::Warn
    };
    let mut result = CheckResult::new(id, verdict, summary);
    if verdict == Verdict::Warn {
        result
            .summary
            .push_str(&format!(" (over --latency-bound {})", human(bound)));
        result.hint = Some(HINT_LATENCY.into());
    }
    let ms = |list: &[Duration]| -> Value {
        list.iter()
            .map(|t| fmt.ms(*t, "latency-bound", bound))
            .collect()
    };
    result.details = json!({
        "handshake_ms": {"cold": fmt.ms(cold, "latency-bound", bound), "min": fmt.ms(times[0], "latency-bound", bound),
                          "median": fmt.ms(median, "latency-bound", bound), "max": fmt.ms(times[times.len() - 1], "latency-bound", bound),
                          "all": ms(&times)},
        // The name of schema 1, kept: the same times, whichever the era.
        "initialize_ms": {"cold": fmt.ms(cold, "latency-bound", bound), "min": fmt.ms(times[0], "latency-bound", bound),
                          "median": fmt.ms(median, "latency-bound", bound), "max": fmt.ms(times[times.len() - 1], "latency-bound", bound),
                          "all": ms(&times)},
        "first_byte_ms": ms(&first_bytes),
    });
    result
}

fn stdout_purity(run: &Lifecycle, fmt: Fmt) -> CheckResult {
    let id = CheckId::StdoutPurity;
    let purity: &Purity = &run.purity;
    let truncated = purity.partly_checked > 0;
    let note = if truncated {
        format!(
            " ({} line{} over {} MiB checked by {} beginning only)",
            purity.partly_checked,
            if purity.partly_checked == 1 { "" } else { "s" },
            purity::MAX_LINE >> 20,
            if purity.partly_checked == 1 {
                "its"
            } else {
                "their"
            },
        )
    } else {
        String::new()
    };
    let mut result = if run.stdout_total == 0 {
        CheckResult::new(id, Verdict::Pass, "nothing on stdout")
    } else if purity.offending == 0 {
        CheckResult::new(
            id,
            Verdict::Pass,
            format!(
                "{} messages in {} bytes, each one JSON-RPC message on one line{note}",
                purity.messages, run.stdout_total
            ),
        )
    } else {
        let n = purity.offending;
        let first: Vec<String> = purity
            .offenders
            .iter()
            .take(3)
            .map(|o| {
                format!(
                    "{}: {}",
                    fmt.offset(o.offset, o.line),
                    o.diagnoses[0].describe()
                )
            })
            .collect();
        let more = if n > 3 { ", …" } else { "" };
        let mut result = CheckResult::new(
            id,
            Verdict::Fail,
            format!(
                "{n} offending line{} ({}{more}){note}",
                if n == 1 { "" } else { "s" },
                first.join(", ")
            ),
        );
        result.hint = Some(HINT_PURITY.into());
        result.set_notes(
            purity.offenders.iter().map(|o| {
                let what: Vec<&str> = o.diagnoses.iter().map(|d| d.describe()).collect();
                let span = if o.lines > 1 {
                    format!(" spanning {} lines", o.lines)
                } else {
                    String::new()
                };
                format!(
                    "{}{span}: {}: \"{}\"",
                    fmt.offset(o.offset, o.line),
                    what.join(", "),
                    fmt.text(&o.excerpt)
                )
            }),
            n,
        );
        result
    };
    let offenders: Vec<Value> = purity
        .offenders
        .iter()
        .map(|o| {
            let mut v = json!(o);
            if fmt.stable {
                // Offsets move with the digits of a pid printed earlier: lines do not.
                v.as_object_mut().map(|m| m.remove("offset"));
                v["excerpt"] = json!(fmt.text(&o.excerpt));
            }
            v
        })
        .collect();
    // In stable output the byte count goes too: a pid printed on stdout changes it.
    let bytes = if fmt.stable {
        Value::Null
    } else {
        json!(run.stdout_total)
    };
    result.details = json!({"bytes": bytes, "messages": purity.messages, "offending": purity.offending,
                            "offenders": offenders, "truncated": truncated});
    result
}

/// How long the server was given after EOF: the EOF grace, plus the case's
/// allowance (start-up, an in-flight call) where it has one. The allowance is
/// measured, so stable output names it instead of printing it.
fn eof_waited(waited: Duration, options: &Options, fmt: Fmt) -> String {
    if waited <= options.eof_grace {
        human(options.eof_grace)
    } else if fmt.stable {
        format!("{} plus its allowance", human(options.eof_grace))
    } else {
        human(waited)
    }
}

/// The grace the before-handshake case gave, and why: its start-up
/// allowance is measured, so stable output names where it came from only.
fn startup_grace(run: &BeforeHandshake, options: &Options, fmt: Fmt) -> String {
    if fmt.stable {
        return "; grace: --eof-grace plus its start-up".into();
    }
    let why = match run.from {
        StartupFrom::Lifecycle => "the lifecycle run's handshake took that long".to_owned(),
        StartupFrom::Busy => format!(
            "this run's processes were busy starting that long, longer than the lifecycle run's handshake ({}): the machine was busy",
            human(run.lifecycle)
        ),
        StartupFrom::Cpu => format!(
            "this run's processes were busy that long, until they had used twice the CPU of the lifecycle run's start-up (its handshake: {})",
            human(run.lifecycle)
        ),
        StartupFrom::Bound => "still busy starting at --timeout".to_owned(),
    };
    format!(
        "; grace {}: --eof-grace {} plus {} of start-up ({why})",
        human(run.grace),
        human(options.eof_grace),
        human(run.startup)
    )
}

/// One `eof.exit` case from how the server ended.
fn ending_case(name: &'static str, ending: &Ending, options: &Options, fmt: Fmt) -> CaseResult {
    ending_case_after(name, ending, ("EOF", "EOF"), options, fmt)
}

/// One case from how the server ended; `event` names what it should have
/// exited on, after which ("EOF", "its host died") and as what it was
/// ignored ("EOF", "its host's death").
fn ending_case_after(
    name: &'static str,
    ending: &Ending,
    (event, ignored): (&str, &str),
    options: &Options,
    fmt: Fmt,
) -> CaseResult {
    let (verdict, summary) = match ending {
        Ending::Eof { status, after } => (
            Verdict::Pass,
            format!(
                "exited by itself ({status}) {} after {event}",
                fmt.dur(*after, "eof-grace", options.eof_grace)
            ),
        ),
        Ending::Sigterm {
            status,
            after,
            waited,
        } => (
            Verdict::Fail,
            format!(
                "needed SIGTERM: still running {} after {event}; exited ({status}) {} after SIGTERM",
                eof_waited(*waited, options, fmt),
                fmt.dur(*after, "term-grace", options.term_grace)
            ),
        ),
        Ending::Sigkill { waited, .. } => (
            Verdict::Fail,
            format!(
                "needed SIGKILL: ignored {ignored} for {} and SIGTERM for {}",
                eof_waited(*waited, options, fmt),
                human(options.term_grace)
            ),
        ),
        Ending::Survived => (
            Verdict::Fail,
            format!("survived: still running after {event}, SIGTERM and SIGKILL"),
        ),
        Ending::AlreadyExited { status } => (
            Verdict::Skip,
            format!("had already exited ({status}) before {event}"),
        ),
    };
    CaseResult {
        name,
        verdict,
        summary,
    }
}

fn severity(ending: &Ending) -> u8 {
    match ending {
        Ending::Eof { .. } | Ending::AlreadyExited { .. } => 0,
        Ending::Sigterm { .. } => 1,
        Ending::Sigkill { .. } => 2,
        Ending::Survived => 3,
    }
}

fn eof_exit(rep: &Repetition, options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::EofExit;
    let skip = |name, why: String| CaseResult {
        name,
        verdict: Verdict::Skip,
        summary: why,
    };
    let mut cases = Vec::new();
    let mut endings: Vec<(&'static str, Ending)> = Vec::new();
    if let Some(run) = &rep.lifecycle {
        if run.handshake.answered.is_ok() {
            cases.push(ending_case("after-handshake", &run.ending, options, fmt));
            endings.push(("after-handshake", run.ending));
        } else {
            cases.push(skip(
                "after-handshake",
                "the handshake did not complete (see handshake.responds)".into(),
            ));
        }
    }
    if let Some(run) = &rep.before_handshake {
        let mut case = ending_case("before-handshake", &run.ending, options, fmt);
        if !matches!(run.ending, Ending::AlreadyExited { .. }) {
            case.summary.push_str(&startup_grace(run, options, fmt));
        }
        cases.push(case);
        endings.push(("before-handshake", run.ending));
    }
    match &rep.idle {
        Some(Idle::Done {
            exited: Some(_), ..
        }) => cases.push(skip("idle", "exited while idle (see idle.alive)".into())),
        Some(Idle::Done { ending, .. }) => {
            cases.push(ending_case("idle", ending, options, fmt));
            endings.push(("idle", *ending));
        }
        Some(Idle::Skipped(why)) => cases.push(skip("idle", why.clone())),
        None => {}
    }
    match &rep.in_flight {
        Some(InFlight::Done {
            tool,
            ending,
            answered,
        }) => {
            let mut case = ending_case("in-flight", ending, options, fmt);
            let answer = if *answered {
                "answered"
            } else {
                "left unanswered"
            };
            case.summary
                .push_str(&format!("; the `{tool}` call was {answer}"));
            cases.push(case);
            endings.push(("in-flight", *ending));
        }
        Some(InFlight::Skipped(why)) => cases.push(skip("in-flight", why.clone())),
        None => {}
    }
    let verdict = cases
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Skip);
    let worst = endings.iter().map(|(_, e)| severity(e)).max().unwrap_or(0);
    let mut result = if worst > 0 {
        let names: Vec<&str> = endings
            .iter()
            .filter(|(_, e)| severity(e) == worst)
            .map(|(n, _)| *n)
            .collect();
        let what = match worst {
            1 => "needed SIGTERM",
            2 => "needed SIGKILL",
            _ => "survived SIGKILL",
        };
        let mut result = CheckResult::new(
            id,
            Verdict::Fail,
            format!("{what} after stdin EOF ({})", names.join(", ")),
        );
        result.hint = Some(HINT_EOF.into());
        result
    } else if verdict == Verdict::Skip {
        CheckResult::new(id, Verdict::Skip, "no case could run")
    } else {
        let names: Vec<&str> = endings.iter().map(|(n, _)| *n).collect();
        CheckResult::new(
            id,
            Verdict::Pass,
            format!("exited by itself on stdin EOF ({})", names.join(", ")),
        )
    };
    result.details = Value::Array(
        endings
            .iter()
            .map(|(name, ending)| {
                let (path, status, after) = match ending {
                    Ending::Eof { status, after } => (
                        "eof",
                        Some(status.to_string()),
                        Some(fmt.ms(*after, "eof-grace", options.eof_grace)),
                    ),
                    Ending::Sigterm { status, after, .. } => (
                        "sigterm",
                        Some(status.to_string()),
                        Some(fmt.ms(*after, "term-grace", options.term_grace)),
                    ),
                    Ending::Sigkill { status, .. } => ("sigkill", Some(status.to_string()), None),
                    Ending::Survived => ("survived", None, None),
                    Ending::AlreadyExited { status } => {
                        ("already_exited", Some(status.to_string()), None)
                    }
                };
                json!({"case": name, "path": path, "status": status, "after_ms": after})
            })
            .collect(),
    );
    result.cases = cases;
    result
}

fn describe_survivor(s: &Survivor, fmt: Fmt) -> String {
    let group = if s.left_group {
        "left the process group"
    } else {
        "still in the server's process group"
    };
    let marker = if s.unmarked {
        " and dropped the marker"
    } else {
        ""
    };
    format!("{}{}, {group}{marker}", s.name, fmt.pid(s.pid))
}

/// Names joined by "; ", the first [`MAX_NAMES`] of them and "and N more":
/// a server that forks without end still gets a one-line summary.
fn capped(names: impl ExactSizeIterator<Item = String>) -> String {
    let total = names.len();
    let mut shown: Vec<String> = names.take(MAX_NAMES).collect();
    if total > MAX_NAMES {
        shown.push(format!("and {} more", total - MAX_NAMES));
    }
    shown.join("; ")
}

/// Processes named in one summary.
const MAX_NAMES: usize = 5;

/// Survivors listed in a check's details.
const MAX_SURVIVORS: usize = 100;

fn survivor_json(s: &Survivor, fmt: Fmt) -> Value {
    json!({"name": s.name, "pid": fmt.pid_value(s.pid), "left_group": s.left_group, "is_server": s.is_server,
           "unmarked": s.unmarked})
}

fn descendants(run: &Lifecycle, fmt: Fmt) -> CheckResult {
    let id = CheckId::EofDescendants;
    let mut result = if run.descendants.is_empty() {
        CheckResult::new(id, Verdict::Pass, "nothing it started outlived it")
    } else {
        let names = capped(run.descendants.iter().map(|s| describe_survivor(s, fmt)));
        let mut result = CheckResult::new(id, Verdict::Fail, format!("left behind: {names}"));
        let escaped = run.descendants.iter().any(|s| s.left_group);
        result.hint = Some(
            if escaped {
                HINT_DESCENDANTS_LEFT
            } else {
                HINT_DESCENDANTS_GROUP
            }
            .into(),
        );
        result
    };
    result.details = json!({"survivors": run.descendants.iter().take(MAX_SURVIVORS).map(|s| survivor_json(s, fmt)).collect::<Vec<_>>()});
    result
}

fn cpu(run: &Lifecycle, options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::EofCpu;
    if !run.cpu_sampled {
        return CheckResult::new(id, Verdict::Pass, "nothing survived EOF");
    }
    let window = human(options.cpu_window);
    let busy: Vec<&Survivor> = run
        .eof_survivors
        .iter()
        .filter(|s| {
            s.cpu_percent
                .is_some_and(|p| p >= f64::from(options.busy_percent))
        })
        .collect();
    let percent = |s: &Survivor| match (fmt.stable, s.cpu_percent) {
        (true, _) => String::new(),
        (false, Some(p)) => format!(" at {p:.0}% of a core"),
        (false, None) => " (not sampled)".into(),
    };
    let mut result = if busy.is_empty() {
        let n = run.eof_survivors.len();
        CheckResult::new(
            id,
            Verdict::Pass,
            format!(
                "{n} process{} survived EOF, none busy over {window}",
                if n == 1 { "" } else { "es" }
            ),
        )
    } else {
        let names = capped(
            busy.iter()
                .map(|s| format!("{}{}{}", s.name, fmt.pid(s.pid), percent(s))),
        );
        let mut result = CheckResult::new(
            id,
            Verdict::Fail,
            format!("busy loop after EOF: {names} over {window}"),
        );
        result.hint = Some(HINT_CPU.into());
        result
    };
    result.details = json!({"survivors": run.eof_survivors.iter().take(MAX_SURVIVORS).map(|s| {
        let mut v = survivor_json(s, fmt);
        v["busy"] = json!(s.cpu_percent.is_some_and(|p| p >= f64::from(options.busy_percent)));
        if !fmt.stable { v["cpu_percent"] = json!(s.cpu_percent); }
        v
    }).collect::<Vec<_>>()});
    result
}

/// A host-death run's exit, with what it left behind.
fn host_death_result(
    id: CheckId,
    run: &HostDeath,
    event: (&str, &str),
    hint: &str,
    options: &Options,
    fmt: Fmt,
) -> CheckResult {
    let done = match run {
        HostDeath::Skipped(why) => return CheckResult::new(id, Verdict::Skip, why.clone()),
        HostDeath::Done(done) => done,
    };
    let case = ending_case_after("", &done.ending, event, options, fmt);
    let mut result = CheckResult::new(id, case.verdict, case.summary);
    if case.verdict == Verdict::Fail {
        result.hint = Some(hint.into());
    }
    if !done.descendants.is_empty() {
        let names = capped(done.descendants.iter().map(|s| describe_survivor(s, fmt)));
        result.verdict = Verdict::Fail;
        result.summary.push_str(&format!("; left behind: {names}"));
        if result.hint.is_none() {
            let escaped = done.descendants.iter().any(|s| s.left_group);
            result.hint = Some(
                if escaped {
                    HINT_DESCENDANTS_LEFT
                } else {
                    HINT_DESCENDANTS_GROUP
                }
                .into(),
            );
        }
    }
    let path = match done.ending {
        Ending::Eof { .. } => "exit",
        Ending::Sigterm { .. } => "sigterm",
        Ending::Sigkill { .. } => "sigkill",
        Ending::Survived => "survived",
        Ending::AlreadyExited { .. } => "already_exited",
    };
    result.details = json!({
        "path": path,
        "before_eof_ms": done.before_eof.map(|d| fmt.ms(d, "eof-grace", options.eof_grace)),
        "survivors": done.descendants.iter().take(MAX_SURVIVORS).map(|s| survivor_json(s, fmt)).collect::<Vec<_>>(),
    });
    result
}

fn host_death_exit(run: &HostDeath, options: &Options, fmt: Fmt) -> CheckResult {
    host_death_result(
        CheckId::HostDeathExit,
        run,
        ("its host died", "its host's death"),
        HINT_HOST_DEATH,
        options,
        fmt,
    )
}

fn epipe_exit(run: &HostDeath, options: &Options, fmt: Fmt) -> CheckResult {
    let mut result = host_death_result(
        CheckId::EpipeExit,
        run,
        ("its write failed and then EOF", "the failed write and EOF"),
        HINT_EPIPE,
        options,
        fmt,
    );
    if let HostDeath::Done(done) = run
        && let (Some(after), Ending::Eof { status, .. }) = (done.before_eof, &done.ending)
    {
        let rest = result
            .summary
            .split_once("; left behind: ")
            .map(|(_, left)| format!("; left behind: {left}"))
            .unwrap_or_default();
        result.summary = format!(
            "exited by itself ({status}) {} after its write failed, before EOF{rest}",
            fmt.dur(after, "eof-grace", options.eof_grace)
        );
    }
    result
}

fn epipe_cpu(rep: &Repetition, options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::EpipeCpu;
    let runs: Vec<(&'static str, &HostDeathEnd)> =
        [("host-death", &rep.host_death), ("epipe", &rep.epipe)]
            .into_iter()
            .filter_map(|(name, run)| match run {
                Some(HostDeath::Done(done)) => Some((name, done)),
                _ => None,
            })
            .collect();
    if runs.is_empty() {
        let why = [&rep.host_death, &rep.epipe]
            .into_iter()
            .find_map(|run| match run {
                Some(HostDeath::Skipped(why)) => Some(why.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "no host-death run ran".into());
        return CheckResult::new(id, Verdict::Skip, why);
    }
    let window = human(options.cpu_window);
    let is_busy = |s: &Survivor| {
        s.cpu_percent
            .is_some_and(|p| p >= f64::from(options.busy_percent))
    };
    let percent = |s: &Survivor| match (fmt.stable, s.cpu_percent) {
        (true, _) => String::new(),
        (false, Some(p)) => format!(" at {p:.0}% of a core"),
        (false, None) => " (not sampled)".into(),
    };
    let mut cases = Vec::new();
    let mut busy_names = Vec::new();
    for (name, done) in &runs {
        let busy: Vec<&Survivor> = done.survivors.iter().filter(|s| is_busy(s)).collect();
        let (verdict, summary) = if !done.cpu_sampled {
            (Verdict::Pass, "nothing survived the grace".to_owned())
        } else if busy.is_empty() {
            let n = done.survivors.len();
            (
                Verdict::Pass,
                format!(
                    "{n} process{} survived the grace, none busy over {window}",
                    if n == 1 { "" } else { "es" }
                ),
            )
        } else {
            let names: Vec<String> = busy
                .iter()
                .map(|s| format!("{}{}{}", s.name, fmt.pid(s.pid), percent(s)))
                .collect();
            busy_names.extend(names.iter().cloned());
            (
                Verdict::Fail,
                format!("busy: {}", capped(names.into_iter())),
            )
        };
        cases.push(CaseResult {
            name,
            verdict,
            summary,
        });
    }
    let mut result = if busy_names.is_empty() {
        CheckResult::new(
            id,
            Verdict::Pass,
            "nothing busy after its host died or its write failed",
        )
    } else {
        busy_names.dedup();
        let mut result = CheckResult::new(
            id,
            Verdict::Fail,
            format!(
                "busy loop after EPIPE: {} over {window}",
                capped(busy_names.into_iter())
            ),
        );
        result.hint = Some(HINT_EPIPE_CPU.into());
        result
    };
    result.details = json!(
        runs.iter()
            .map(|(name, done)| json!({
                "run": name,
                "survivors": done.survivors.iter().take(MAX_SURVIVORS).map(|s| {
                    let mut v = survivor_json(s, fmt);
                    v["busy"] = json!(is_busy(s));
                    if !fmt.stable { v["cpu_percent"] = json!(s.cpu_percent); }
                    v
                }).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>()
    );
    result.cases = cases;
    result
}

fn sigterm(run: &Sigterm, options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::SigtermExit;
    match run {
        Sigterm::Skipped(why) => CheckResult::new(id, Verdict::Skip, why.clone()),
        Sigterm::Done {
            exited: Some((status, after)),
        } => CheckResult::new(
            id,
            Verdict::Pass,
            format!(
                "exited ({status}) {} after SIGTERM, stdin still open",
                fmt.dur(*after, "term-grace", options.term_grace)
            ),
        ),
        Sigterm::Done { exited: None } => {
            let mut result = CheckResult::new(
                id,
                Verdict::Fail,
                format!(
                    "still running {} after SIGTERM (SIGKILL ended it)",
                    human(options.term_grace)
                ),
            );
            result.hint = Some(HINT_SIGTERM.into());
            result
        }
    }
}

fn idle(run: &Idle, options: &Options, fmt: Fmt) -> CheckResult {
    let id = CheckId::IdleAlive;
    match run {
        Idle::Skipped(why) => CheckResult::new(id, Verdict::Skip, why.clone()),
        Idle::Done { exited: None, .. } => CheckResult::new(
            id,
            Verdict::Pass,
            format!("still running after {} of silence", human(options.idle)),
        ),
        Idle::Done {
            exited: Some((status, after)),
            ..
        } => {
            let mut result = CheckResult::new(
                id,
                Verdict::Fail,
                format!(
                    "exited ({status}) {} into the silence, with stdin still open",
                    fmt.dur(*after, "idle", options.idle)
                ),
            );
            result.hint = Some(HINT_IDLE.into());
            result
        }
    }
}

fn stderr(reps: &[Repetition], fmt: Fmt) -> CheckResult {
    let id = CheckId::Stderr;
    let logs: Vec<_> = reps.iter().flat_map(|r| &r.stderr).collect();
    let bytes: u64 = logs.iter().map(|(_, l)| l.bytes).sum();
    let lines: u64 = logs.iter().map(|(_, l)| l.lines).sum();
    let runs = logs.len();
    let summary = match (bytes, fmt.stable) {
        (0, _) => format!("nothing written over {runs} runs"),
        (_, true) => {
            format!("captured over {runs} runs (shown with -v); never counted as an error")
        }
        (_, false) => format!(
            "{lines} line{}, {bytes} bytes over {runs} runs (shown with -v); never counted as an error",
            if lines == 1 { "" } else { "s" }
        ),
    };
    let mut result = CheckResult::new(id, Verdict::Info, summary);
    if !fmt.stable {
        result.details = json!({"bytes": bytes, "lines": lines, "runs": runs});
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_name_at_most_five_processes_and_count_the_rest() {
        let names = |n: usize| (0..n).map(|i| format!("p{i}")).collect::<Vec<_>>();
        assert_eq!(capped(names(2).into_iter()), "p0; p1");
        assert_eq!(
            capped(names(1000).into_iter()),
            "p0; p1; p2; p3; p4; and 995 more"
        );
    }
}
