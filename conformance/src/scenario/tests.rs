//! Loading: what loads, and that every kind of mistake names its line.

use std::path::Path;

use super::*;

fn error(text: &str) -> String {
    parse(text, Path::new("scenarios/x.yaml"))
        .unwrap_err()
        .to_string()
}

/// The error's line number, as `scenarios/x.yaml:<line>`.
fn line(message: &str) -> Option<usize> {
    message
        .strip_prefix("scenarios/x.yaml:")?
        .split(':')
        .next()?
        .parse()
        .ok()
}

const OK: &str = "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n";

#[test]
fn a_valid_scenario_loads() {
    let scenario = parse(OK, Path::new("x.yaml")).unwrap();
    assert!(matches!(scenario.steps[0], Step::Connect(_)));
}

#[test]
fn typed_fields_load_as_their_enums() {
    let text = "description: d\nserver: {fixture: well-behaved, eof_grace: 300ms}\nsteps:\n  - connect: {expect: {error: handshake_timeout, within: at_timeout}}\n  - kill: {signal: TERM, target: group}\n  - close: {expect: {path: sigterm, within: within_term_grace}}\n";
    let scenario = parse(text, Path::new("x.yaml")).unwrap();
    let server = scenario.server.unwrap();
    assert_eq!(server.fixture.unwrap().binary(), "fixture-well-behaved");
    assert_eq!(server.eof_grace.unwrap().0.as_millis(), 300);
    let Step::Connect(connect) = &scenario.steps[0] else {
        panic!("connect")
    };
    assert_eq!(
        connect.expect.error,
        Some(mcp_stdio_client::ErrorKind::HandshakeTimeout)
    );
    assert_eq!(connect.expect.within, Some(RequestBucket::AtTimeout));
    let Step::Kill(kill) = &scenario.steps[1] else {
        panic!("kill")
    };
    assert_eq!(kill.signal.0, nix::sys::signal::Signal::SIGTERM);
    assert_eq!(kill.target, KillTarget::Group);
    let Step::Close(close) = &scenario.steps[2] else {
        panic!("close")
    };
    assert_eq!(close.expect.path, Some(ClosePath::Sigterm));
    assert_eq!(close.expect.within, Some(CloseBucket::WithinTermGrace));
}

#[test]
fn an_unknown_field_names_the_file_line_and_field() {
    let text = "description: d\nserver: {fixture: well-behaved}\nexpect:\n  survivers: []\n";
    let message = error(text);
    assert!(message.starts_with("scenarios/x.yaml:4: "), "{message}");
    assert!(message.contains("unknown field `survivers`"), "{message}");
}

#[test]
fn an_unknown_step_is_an_error_at_its_line() {
    let message = error(
        "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n  - sleep: {ms: 5}\n",
    );
    assert_eq!(line(&message), Some(5), "{message}");
    assert!(message.contains("unknown variant `sleep`"), "{message}");
}

#[test]
fn a_missing_fixture_names_the_line() {
    let message = error("description: d\nserver:\n  fixture: nope\n");
    assert_eq!(line(&message), Some(3), "{message}");
    assert!(message.contains("no fixture named `nope`"), "{message}");
}

#[test]
fn unparsable_yaml_names_the_line() {
    let message = error("description: d\nserver: {fixture: [\n");
    assert!(message.starts_with("scenarios/x.yaml:"), "{message}");
}

#[test]
fn a_bad_value_is_an_error_at_its_line() {
    let steps = |steps: &str| {
        error(&format!(
            "description: d\nserver: {{fixture: well-behaved}}\nsteps:\n  - connect: {{}}\n{steps}"
        ))
    };
    // Error kinds are the client's own enum: no list kept here.
    let kind = steps("  - call:\n      tool: echo\n      expect: {error: oops}\n");
    assert_eq!(line(&kind), Some(7), "{kind}");
    assert!(kind.contains("unknown variant `oops`"), "{kind}");
    assert!(kind.contains("child_exited"), "{kind}");
    // A newer kind the old hand-kept list lacked.
    let newer = parse(
        "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {expect: {error: credentials}}\n",
        Path::new("x.yaml"),
    );
    assert!(newer.is_ok(), "{newer:?}");
    let path = steps("  - close:\n      expect: {path: eoff}\n");
    assert_eq!(line(&path), Some(6), "{path}");
    assert!(path.contains("unknown variant `eoff`"), "{path}");
    let signal = steps("  - kill:\n      signal: SIGNOPE\n");
    assert_eq!(line(&signal), Some(6), "{signal}");
    assert!(signal.contains("unknown signal"), "{signal}");
    let count = steps("  - close_concurrently:\n      count: 1\n");
    assert_eq!(line(&count), Some(6), "{count}");
    assert!(
        count.contains("a count of 1: a concurrent step needs 2 or more"),
        "{count}"
    );
    let calls = steps("  - call_concurrently:\n      tool: echo\n      count: 0\n");
    assert_eq!(line(&calls), Some(6), "{calls}");
    assert!(calls.contains("a count of 0"), "{calls}");
    let grace = error("description: d\nserver:\n  fixture: well-behaved\n  eof_grace: soon\n");
    assert_eq!(line(&grace), Some(4), "{grace}");
}

#[test]
fn a_field_of_another_step_is_an_error_at_its_line() {
    let misplaced = error(
        "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n  - call:\n      tool: echo\n      expect:\n        path: eof\n",
    );
    assert_eq!(line(&misplaced), Some(8), "{misplaced}");
    assert!(misplaced.contains("unknown field `path`"), "{misplaced}");
    // A close bucket on a request, and the other way round.
    let bucket = error(
        "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {expect: {within: before_eof_grace}}\n",
    );
    assert_eq!(line(&bucket), Some(4), "{bucket}");
    assert!(
        bucket.contains("unknown variant `before_eof_grace`"),
        "{bucket}"
    );
    let bucket = error(
        "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n  - close: {expect: {within: fast}}\n",
    );
    assert_eq!(line(&bucket), Some(5), "{bucket}");
}

#[test]
fn cross_field_mistakes_name_their_line() {
    let before_connect = error(
        "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - list_tools: {}\n  - close: {}\n",
    );
    assert_eq!(line(&before_connect), Some(4), "{before_connect}");
    assert!(
        before_connect.contains("step 1 (`list_tools`) runs before any `connect`"),
        "{before_connect}"
    );
    let no_session =
        error("description: d\nconfig: x\nsteps:\n  - connect: {}\n  - close_session: {}\n");
    assert_eq!(line(&no_session), Some(5), "{no_session}");
    assert!(
        no_session.contains("before `build_session`"),
        "{no_session}"
    );
    let both = error("description: d\nserver: {fixture: well-behaved}\nconfig: x\n");
    assert_eq!(line(&both), Some(3), "{both}");
    assert!(both.contains("not both"), "{both}");
    let neither = error("description: d\n");
    assert!(neither.contains("give a `server`"), "{neither}");
    let load =
        error("description: d\nserver: {fixture: well-behaved}\nexpect:\n  load: {ok: true}\n");
    assert_eq!(line(&load), Some(4), "{load}");
    let two_keys = error(
        "description: d\nserver: {fixture: well-behaved}\nsteps:\n  - {connect: {}, close: {}}\n",
    );
    assert_eq!(line(&two_keys), Some(4), "{two_keys}");
}

#[test]
fn rule_ids_must_be_in_the_contract() {
    let known = "description: d\nrules: [\"4.close.eof\", \"4.guarantee\"]\nserver: {fixture: well-behaved}\n";
    assert_eq!(
        parse(known, Path::new("x.yaml")).unwrap().rules,
        ["4.close.eof", "4.guarantee"]
    );
    // The unknown id is on the third line of a block list.
    let message = error(
        "description: mentions 4.close.eoff\nrules:\n  - 4.close.eof\n  - 4.close.eoff\nserver: {fixture: well-behaved}\n",
    );
    assert!(
        message.starts_with(
            "scenarios/x.yaml:4: unknown rule `4.close.eoff`: did you mean `4.close.eof`? "
        ),
        "{message}"
    );
    assert!(message.contains("docs/contract.md"), "{message}");
    let flow = error(
        "description: d\nrules: [\"4.close.eof\", \"9.nothing\"]\nserver: {fixture: well-behaved}\n",
    );
    assert!(
        flow.starts_with("scenarios/x.yaml:2: unknown rule `9.nothing`: the rule ids"),
        "{flow}"
    );
}

#[test]
fn discovery_sorts_skips_dotfiles_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("b")).unwrap();
    std::fs::create_dir_all(dir.path().join("snapshots")).unwrap();
    for file in [
        "b/z.yaml",
        "a.yaml",
        ".hidden.yaml",
        "snapshots/s.yaml",
        "notes.md",
    ] {
        std::fs::write(dir.path().join(file), "").unwrap();
    }
    let names: Vec<String> = discover(dir.path())
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["a", "b/z"]);
}

#[test]
fn subjects_default_to_external_where_a_driver_can_do_everything() {
    let scenario = |text: &str| parse(text, Path::new("x.yaml")).unwrap();
    assert!(scenario(OK).applies_to_external());
    let close = format!("{OK}  - close: {{expect: {{path: eof}}}}\n");
    assert!(scenario(&close).applies_to_external());
    // A library-only step, server setting, config or secrets check: library only.
    let concurrent = format!("{OK}  - close_concurrently: {{count: 2}}\n");
    assert_eq!(
        scenario(&concurrent).default_subjects(),
        [SubjectKind::Library]
    );
    assert!(!scenario(&concurrent).applies_to_external());
    let era =
        "description: d\nserver: {fixture: well-behaved, era: legacy}\nsteps:\n  - connect: {}\n";
    assert!(!scenario(era).applies_to_external());
    let secrets = format!("{OK}expect:\n  secrets_absent: [x]\n");
    assert!(!scenario(&secrets).applies_to_external());
    assert!(!scenario("description: d\nconfig: x\n").applies_to_external());
    // Declared: as declared.
    let opted_out = format!("{OK}subjects: [library]\n");
    assert!(!scenario(&opted_out).applies_to_external());
}

#[test]
fn an_external_scenario_with_a_library_only_part_names_its_line() {
    let step = error(
        "description: d\nsubjects: [library, external]\nserver: {fixture: well-behaved}\nsteps:\n  - connect: {}\n  - close_concurrently: {count: 2}\n",
    );
    assert_eq!(line(&step), Some(6), "{step}");
    assert!(
        step.contains("declared for `external` subjects, but step 2 (`close_concurrently`) drives the library in process"),
        "{step}"
    );
    let abandon = error(
        "description: d\nsubjects: [library, external]\nserver: {fixture: well-behaved}\nsteps:\n  - abandon_connect: {}\n",
    );
    assert_eq!(line(&abandon), Some(5), "{abandon}");
    let era = error(
        "description: d\nsubjects: [library, external]\nserver:\n  fixture: well-behaved\n  era: legacy\n",
    );
    assert_eq!(line(&era), Some(5), "{era}");
    assert!(era.contains("`era`"), "{era}");
    let config = error("description: d\nsubjects: [library, external]\nconfig: x\n");
    assert_eq!(line(&config), Some(3), "{config}");
    let no_library =
        error("description: d\nsubjects: [external]\nserver: {fixture: well-behaved}\n");
    assert_eq!(line(&no_library), Some(2), "{no_library}");
    assert!(
        no_library.contains("must include `library`"),
        "{no_library}"
    );
    let unknown =
        error("description: d\nsubjects: [library, python]\nserver: {fixture: well-behaved}\n");
    assert_eq!(line(&unknown), Some(2), "{unknown}");
    assert!(unknown.contains("unknown variant `python`"), "{unknown}");
}

/// Nesting deep enough to cost the YAML scanner seconds (it is quadratic in
/// the depth of open flow collections) is refused, naming the file and
/// line, before the document is parsed.
#[test]
fn deep_nesting_is_refused_before_parsing() {
    for text in [
        // 60 KB of `[`: the shape that stalled every run of the harness.
        "[".repeat(60 * 1024),
        format!("description: d\nignored: {}\n", "{a: ".repeat(20_000)),
        // Block nesting counts too.
        (0..40)
            .map(|depth| format!("{}k{depth}:\n", "  ".repeat(depth)))
            .collect::<String>(),
    ] {
        let error = parse(&text, Path::new("scenarios/x.yaml")).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("scenarios/x.yaml:"),
            "names the file and line: {message}"
        );
        assert!(message.contains("nested more than"), "{message}");
        assert_eq!(error.kind, ScenarioErrorKind::TooDeep);
    }
}

/// A document larger than any scenario needs is refused before it is read
/// in full or parsed.
#[test]
fn an_oversized_scenario_is_refused_before_parsing() {
    let text = format!("description: d\n{}", "# padding\n".repeat(100_000));
    let error = parse(&text, Path::new("scenarios/x.yaml")).unwrap_err();
    assert_eq!(error.kind, ScenarioErrorKind::TooLarge);
    let message = error.to_string();
    assert!(message.starts_with("scenarios/x.yaml: "), "{message}");
    assert!(message.contains("larger than"), "{message}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.yaml");
    std::fs::write(&file, &text).unwrap();
    let error = load(&file).unwrap_err();
    assert_eq!(error.kind, ScenarioErrorKind::TooLarge);
    let message = error.to_string();
    assert!(
        message.starts_with(&file.display().to_string()),
        "{message}"
    );
    // Nor a device that never ends: at most one byte past the bound is read.
    let error = load(Path::new("/dev/zero")).unwrap_err();
    assert_eq!(error.kind, ScenarioErrorKind::TooLarge);
}

/// A file that is not UTF-8 fails to load with its name and what is wrong,
/// not a bare I/O error.
#[test]
fn a_file_that_is_not_utf8_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("latin1.yaml");
    let bytes = b"description: d\nrules: [caf\xe9]\nserver: {fixture: well-behaved}\n";
    std::fs::write(&file, bytes).unwrap();
    let error = load(&file).unwrap_err();
    assert_eq!(error.kind, ScenarioErrorKind::NotUtf8);
    assert_eq!(error.line, Some(2));
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{} is not UTF-8: ", file.display())),
        "{message}"
    );
    // The same bytes embedded in the executable: the same error.
    let embedded = parse_bytes(bytes, Path::new("scenarios/x/y.yaml")).unwrap_err();
    assert!(
        embedded
            .to_string()
            .starts_with("scenarios/x/y.yaml is not UTF-8: invalid utf-8 sequence"),
        "{embedded}"
    );
}

/// The scenario's own nesting stays well inside the bound.
#[test]
fn every_scenario_of_the_suite_is_within_the_bounds() {
    for (_, file) in discover(&crate::scenarios_root()).unwrap() {
        let text = std::fs::read(&file).unwrap();
        assert_eq!(
            limits::line_beyond(&text, limits::MAX_DEPTH / 4),
            None,
            "{}",
            file.display()
        );
        assert!(text.len() <= limits::MAX_BYTES / 16, "{}", file.display());
    }
}
