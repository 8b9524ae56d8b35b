//! `cargo xtask readme`: the README's front door, exact. Every `sh` block
//! of README.md carries a marker on the line before it saying how it is
//! exercised, and is exercised that way: run as written, or each command
//! asked for its `--help` (the long jobs), or not run for a stated reason.
//! The sample output block is checked against the scenario runner's own
//! listing and the scenario files (names, rules, shape), and rewritten from
//! a real run by `--write`. The crate map must name every workspace member.
//! `cargo xtask test` runs the check. docs/readme-check.md describes the markers.

use std::{
    collections::BTreeMap,
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{cargo, conformance, outcome::usage, root};

const HELP: &str = "\
usage: cargo xtask readme [--write]

Checks README.md: runs every `sh` block marked `<!-- readme: run -->`, asks
each command of a block marked `<!-- readme: help -->` for its --help, checks
the sample output block's shape against the scenario runner's listing and
the scenario files, and that the crate map names every workspace member.

options:
  --write      first run `cargo xtask conformance` and rewrite the sample
               output block from its table (the rows the block shows now,
               the header and the totals), then check
  -h, --help   print this help
";

/// How long one README command may take (a `cargo run` may build first).
const COMMAND_DEADLINE: Duration = Duration::from_secs(600);

/// The document whose `--rules` sample is checked too.
const RULES_DOC: &str = "docs/conformance-report.md";

/// The package the README installs, and its one executable.
const INSTALLED: &str = "mcp-conformance";

/// The command whose output the sample block shows.
const SAMPLE_COMMAND: &str = "cargo xtask conformance";

pub fn run(args: Vec<String>) -> Result<()> {
    let mut write = false;
    for arg in &args {
        match arg.as_str() {
            "--write" => write = true,
            "-h" | "--help" => {
                print!("{HELP}");
                return Ok(());
            }
            other => {
                return Err(usage(anyhow::anyhow!(
                    "unknown argument `{other}`\n\n{HELP}"
                )));
            }
        }
    }
    let rules_doc = root().join(RULES_DOC);
    let rules_sample = rules_sample()?;
    if write {
        let text = read(&rules_doc)?;
        let (start, end) = rules_block(&text)?;
        let mut lines: Vec<&str> = text.lines().collect();
        lines.splice(start..end, rules_sample.iter().map(String::as_str));
        std::fs::write(&rules_doc, lines.join("\n") + "\n")
            .with_context(|| format!("cannot write {}", rules_doc.display()))?;
    }
    check_rules_sample(&read(&rules_doc)?, &rules_sample)?;
    let path = root().join("README.md");
    if write {
        let text = read(&path)?;
        let table = sample_run()?;
        let rewritten = rewrite_sample(&text, &table)?;
        std::fs::write(&path, rewritten)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("readme: rewrote the sample output in README.md from a real run");
    }
    let text = read(&path)?;
    let blocks = parse(&text)?;
    let metadata = metadata()?;
    check_crate_map(&text, &metadata)?;
    check_installed_bins(&metadata)?;
    check_sample(&blocks)?;
    check_inline_commands(&text, &blocks)?;
    run_blocks(&blocks, &metadata)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// How a block is exercised: the marker `<!-- readme: ... -->` on the line
/// before its opening fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// `run`: each command runs as written, from the workspace root, and
    /// must succeed. `run in=empty`: from a fresh empty directory that is
    /// also HOME.
    Run { empty_dir: bool },
    /// `help`: each command with `--help` appended must succeed (jobs too
    /// long to run here; each is run elsewhere, as the marker's block says).
    Help,
    /// `not-run REASON`: shown, not run; the reason is required.
    NotRun(String),
    /// `output`: the sample output of `cargo xtask conformance`.
    Output,
}

/// A fenced block of README.md.
#[derive(Debug)]
pub struct Block {
    /// 1-based line of the opening fence.
    pub line: usize,
    pub lang: String,
    pub marker: Option<Marker>,
    pub body: Vec<String>,
}

/// The fenced blocks of `text`, each with its marker. A marker that cannot
/// be read, an `sh` block without one, or a marker on a block it does not
/// fit is an error naming the line.
pub fn parse(text: &str) -> Result<Vec<Block>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let Some(lang) = lines[index].strip_prefix("```") else {
            index += 1;
            continue;
        };
        let line = index + 1;
        let marker = match index.checked_sub(1).map(|i| lines[i].trim()) {
            Some(previous) if previous.starts_with("<!-- readme:") => {
                Some(parse_marker(previous).with_context(|| format!("README.md:{}", line - 1))?)
            }
            _ => None,
        };
        let end = (index + 1..lines.len())
            .find(|&i| lines[i].starts_with("```"))
            .with_context(|| format!("README.md:{line}: the block is never closed"))?;
        let block = Block {
            line,
            lang: lang.trim().to_owned(),
            marker,
            body: lines[index + 1..end]
                .iter()
                .map(|l| (*l).to_owned())
                .collect(),
        };
        match (&block.marker, block.lang.as_str()) {
            (None, "sh") => bail!(
                "README.md:{line}: an `sh` block without a marker; put \
                 `<!-- readme: run -->`, `<!-- readme: help -->` or \
                 `<!-- readme: not-run REASON -->` on the line before it (docs/readme-check.md)"
            ),
            (Some(Marker::Output), "text") | (None, _) => {}
            (Some(Marker::Output), other) => {
                bail!("README.md:{line}: the output marker is on a `{other}` block, not `text`")
            }
            (Some(_), "sh") => {}
            (Some(_), other) => {
                bail!("README.md:{line}: a command marker is on a `{other}` block, not `sh`")
            }
        }
        blocks.push(block);
        index = end + 1;
    }
    Ok(blocks)
}

fn parse_marker(line: &str) -> Result<Marker> {
    let inner = line
        .strip_prefix("<!-- readme:")
        .and_then(|rest| rest.strip_suffix("-->"))
        .context("a marker is `<!-- readme: ... -->` on one line")?
        .trim();
    let (word, rest) = inner.split_once(' ').unwrap_or((inner, ""));
    let rest = rest.trim();
    Ok(match (word, rest) {
        ("run", "") => Marker::Run { empty_dir: false },
        ("run", "in=empty") => Marker::Run { empty_dir: true },
        ("help", "") => Marker::Help,
        ("output", "") => Marker::Output,
        ("not-run", "") => bail!("`not-run` needs a reason: `<!-- readme: not-run REASON -->`"),
        ("not-run", reason) => Marker::NotRun(reason.to_owned()),
        _ => bail!("unknown marker `{inner}`: run, run in=empty, help, not-run REASON or output"),
    })
}

/// The commands of an `sh` block: its lines but blank and comment lines.
fn commands(block: &Block) -> impl Iterator<Item = &str> {
    block
        .body
        .iter()
        .map(|line| line.trim())
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// `command` without its trailing `# comment`.
fn without_comment(command: &str) -> &str {
    command
        .find(" #")
        .map_or(command, |at| &command[..at])
        .trim_end()
}

/// `command` asking for its help: `--help` goes before a ` -- ` (after it,
/// it would be the graded program's argument), else at the end.
fn with_help(command: &str) -> String {
    match command.split_once(" -- ") {
        Some((options, program)) => format!("{options} --help -- {program}"),
        None => format!("{command} --help"),
    }
}

/// The commands named in running text (`` `cargo xtask peers` ``, spans of
/// two words or more that start with `cargo` or `mcp-conformance`): each
/// must be the beginning of a command of a marked block, so what the prose
/// tells a reader to type is run or checked too. `NAME`-like words, `...`
/// and `a|b` alternatives stand for any word.
fn check_inline_commands(text: &str, blocks: &[Block]) -> Result<()> {
    // Each command, and the command after its `--` (the program a mode
    // grades: `... server -- mcp-conformance fixture well-behaved`).
    let block_commands: Vec<Vec<&str>> = blocks
        .iter()
        .filter(|block| block.lang == "sh")
        .flat_map(commands)
        .flat_map(|command| {
            let words: Vec<&str> = without_comment(command).split_whitespace().collect();
            let graded = words
                .iter()
                .position(|word| *word == "--")
                .map(|at| words[at + 1..].to_vec());
            std::iter::once(words).chain(graded)
        })
        .collect();
    let mut unbacked = Vec::new();
    let mut checked = 0;
    for span in inline_code(text) {
        let words: Vec<&str> = span.split_whitespace().collect();
        if words.len() < 2 || !["cargo", "mcp-conformance"].contains(&words[0]) {
            continue;
        }
        checked += 1;
        let backed = block_commands.iter().any(|command| {
            command.len() >= words.len()
                && words
                    .iter()
                    .zip(command)
                    .all(|(word, typed)| stands_for(word, typed))
        });
        if !backed {
            unbacked.push(format!("`{}`", words.join(" ")));
        }
    }
    if !unbacked.is_empty() {
        bail!(
            "README.md names {} in its text, which no marked `sh` block runs or checks; put \
             each in a block (docs/readme-check.md)",
            unbacked.join(", ")
        );
    }
    eprintln!("readme: the {checked} commands named in the text are each in a marked block");
    Ok(())
}

/// Whether `word` of a command named in the text stands for `typed`.
fn stands_for(word: &str, typed: &str) -> bool {
    let placeholder = word.len() > 1
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c == '-');
    word == typed
        || placeholder
        || word == "..."
        || (word.contains('|') && word.split('|').any(|choice| choice == typed))
}

/// The inline code spans of `text` outside fenced blocks, a span's line
/// breaks kept as whitespace.
fn inline_code(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// What `cargo metadata` says of the workspace.
struct Metadata {
    /// Each member: its directory (relative to the root) and package name.
    members: Vec<(String, String)>,
    /// The executables of the package the README installs.
    installed_bins: Vec<String>,
    target_dir: PathBuf,
}

fn metadata() -> Result<Metadata> {
    let mut command = cargo();
    command.args(["metadata", "--no-deps", "--format-version", "1"]);
    let output = command.output().context("cannot run cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let data: Value =
        serde_json::from_slice(&output.stdout).context("cargo metadata printed no JSON")?;
    let root = root();
    let mut members = Vec::new();
    let mut installed_bins = Vec::new();
    for package in data["packages"].as_array().into_iter().flatten() {
        if package["name"] == INSTALLED {
            for target in package["targets"].as_array().into_iter().flatten() {
                if target["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.contains(&"bin".into()))
                {
                    installed_bins.push(target["name"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest
            .parent()
            .and_then(|dir| dir.strip_prefix(&root).ok())
            .context("a workspace member outside the workspace")?;
        members.push((
            dir.display().to_string(),
            package["name"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    let target_dir = data["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata names no target directory")?;
    Ok(Metadata {
        members,
        installed_bins,
        target_dir,
    })
}

/// `cargo install --path conformance` puts the package's executables on
/// the user's PATH: the tool, and nothing else (the drivers are its
/// `driver` subcommand, the fixtures its `fixture` subcommand).
fn check_installed_bins(metadata: &Metadata) -> Result<()> {
    if metadata.installed_bins != [INSTALLED] {
        bail!(
            "`cargo install --path conformance` would install {:?}; only `{INSTALLED}` belongs \
             on a user's PATH (test equipment goes in a subcommand)",
            metadata.installed_bins
        );
    }
    eprintln!("readme: `cargo install --path conformance` installs `{INSTALLED}` alone");
    Ok(())
}

/// The crate map names every member: its directory and its package.
fn check_crate_map(text: &str, metadata: &Metadata) -> Result<()> {
    let mut missing = Vec::new();
    for (dir, name) in &metadata.members {
        for needle in [format!("`{dir}/`"), format!("`{name}`")] {
            if !text.contains(&needle) {
                missing.push(needle);
            }
        }
    }
    if !missing.is_empty() {
        bail!(
            "README.md's crate map does not name {} (every workspace member: its directory and \
             its package)",
            missing.join(", ")
        );
    }
    eprintln!(
        "readme: the crate map names all {} workspace members",
        metadata.members.len()
    );
    Ok(())
}

/// The sample output: `SCENARIO RULES RESULT TIME` rows of scenarios the
/// runner lists, each with the rules its file cites, passing, a time; `...`
/// where rows are left out; then the totals of a run of every scenario the
/// runner lists, all passing. Times and check counts vary, so only their
/// shape is checked.
fn check_sample(blocks: &[Block]) -> Result<()> {
    let samples: Vec<&Block> = blocks
        .iter()
        .filter(|block| block.marker == Some(Marker::Output))
        .collect();
    let [sample] = samples[..] else {
        bail!(
            "README.md must have one sample output block (`<!-- readme: output -->`), has {}",
            samples.len()
        );
    };
    let listed = conformance::runner::list(&conformance::cli::Options::default())?.all;
    let cited = conformance::rules::read_cited(&root().join("scenarios"))?;
    let at = |offset: usize| format!("README.md:{}", sample.line + 1 + offset);
    let mut lines = sample.body.iter().enumerate();
    match lines.next() {
        Some((_, header))
            if header
                .split_whitespace()
                .eq(["SCENARIO", "RULES", "RESULT", "TIME"]) => {}
        _ => bail!(
            "{}: the sample starts with the header SCENARIO RULES RESULT TIME",
            at(0)
        ),
    }
    let mut rows = 0;
    let mut totals = None;
    for (offset, line) in lines {
        if line.trim() == "..." || line.trim().is_empty() {
            continue;
        }
        if line.contains(" scenarios: ") {
            totals = Some((offset, line));
            continue;
        }
        if totals.is_some() {
            bail!("{}: nothing may follow the totals", at(offset));
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [name, rules @ .., result, time, unit] = &words[..] else {
            bail!("{}: not a row: {line}", at(offset));
        };
        if !listed.contains(*name) {
            bail!("{}: `{name}` is no scenario the runner lists", at(offset));
        }
        // External trials cite the rules of the scenario they run.
        let file = name.strip_prefix("external/").unwrap_or(name);
        let expected = match cited.get(file).map(Vec::as_slice) {
            Some([]) | None => "-".to_owned(),
            Some(rules) => rules.join(", "),
        };
        if rules.join(" ") != expected {
            bail!(
                "{}: `{name}` cites {expected}, the sample says {}",
                at(offset),
                rules.join(" ")
            );
        }
        if *result != "pass" {
            bail!(
                "{}: the sample shows a passing run, `{name}` is `{result}`",
                at(offset)
            );
        }
        if !is_duration(time, unit) {
            bail!("{}: `{time} {unit}` is not a time", at(offset));
        }
        rows += 1;
    }
    if rows == 0 {
        bail!("{}: the sample shows no row", at(0));
    }
    let Some((offset, totals)) = totals else {
        bail!(
            "README.md:{}: the sample ends with the totals line",
            sample.line
        );
    };
    check_totals(totals, listed.len()).with_context(|| at(offset))?;
    eprintln!(
        "readme: the sample output has the shape of a passing run of all {} scenarios",
        listed.len()
    );
    Ok(())
}

/// The `--rules` sample as it should read: the header and first three
/// rules of the real listing, `...`, and its real totals line (nothing in
/// it varies between runs, so it is compared exactly).
fn rules_sample() -> Result<Vec<String>> {
    let listing = conformance::rules::current()?;
    let lines: Vec<&str> = listing.lines().collect();
    let totals = lines
        .iter()
        .find(|line| line.contains(" rules in "))
        .context("`cargo xtask conformance --rules` printed no totals")?;
    let mut sample: Vec<String> = lines
        .iter()
        .take(4)
        .map(|line| (*line).to_owned())
        .collect();
    sample.extend(["...".to_owned(), String::new(), (*totals).to_owned()]);
    Ok(sample)
}

/// The body (line range) of the first `text` block after the `--rules`
/// heading of [`RULES_DOC`].
fn rules_block(text: &str) -> Result<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let heading = lines
        .iter()
        .position(|line| line.starts_with("## `--rules`"))
        .with_context(|| format!("{RULES_DOC} has no `## `--rules`` section"))?;
    let open = (heading..lines.len())
        .find(|&i| lines[i] == "```text")
        .with_context(|| format!("{RULES_DOC}: no sample after the `--rules` heading"))?;
    let close = (open + 1..lines.len())
        .find(|&i| lines[i].starts_with("```"))
        .with_context(|| format!("{RULES_DOC}:{}: the block is never closed", open + 1))?;
    Ok((open + 1, close))
}

fn check_rules_sample(text: &str, expected: &[String]) -> Result<()> {
    let (start, end) = rules_block(text)?;
    let shown: Vec<&str> = text.lines().skip(start).take(end - start).collect();
    if shown != expected {
        bail!(
            "{RULES_DOC}:{}: the `--rules` sample is not what `cargo xtask conformance --rules` \
             prints now:\n{}\n(`cargo xtask readme --write` rewrites it)",
            start + 1,
            expected.join("\n")
        );
    }
    eprintln!("readme: {RULES_DOC}'s `--rules` sample is the real listing's");
    Ok(())
}

/// `N ms` or `N.NN s`.
fn is_duration(number: &str, unit: &str) -> bool {
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    match unit {
        "ms" => digits(number),
        "s" => number.split_once('.').is_some_and(|(whole, hundredths)| {
            digits(whole) && hundredths.len() == 2 && digits(hundredths)
        }),
        _ => false,
    }
}

/// `N scenarios: N pass, 0 FAIL, 0 expected failure, 0 STALE; C checks, 0
/// failed; T in total`, N the number of scenarios the runner lists.
fn check_totals(line: &str, scenarios: usize) -> Result<()> {
    let shape = || {
        format!(
            "the totals read `{scenarios} scenarios: {scenarios} pass, 0 FAIL, 0 expected \
             failure, 0 STALE; C checks, 0 failed; T in total`, not `{line}`"
        )
    };
    let (head, checks_part) = line.split_once("; ").with_context(shape)?;
    if head
        != format!("{scenarios} scenarios: {scenarios} pass, 0 FAIL, 0 expected failure, 0 STALE")
    {
        bail!(shape());
    }
    let (checks, total) = checks_part.split_once("; ").with_context(shape)?;
    let checks_ok = checks
        .strip_suffix(" checks, 0 failed")
        .is_some_and(|count| count.parse::<u32>().is_ok_and(|count| count > 0));
    let time = total.strip_suffix(" in total").unwrap_or_default();
    let time_ok = time
        .split_once(' ')
        .is_some_and(|(number, unit)| is_duration(number, unit));
    if !checks_ok || !time_ok {
        bail!(shape());
    }
    Ok(())
}

/// Runs `cargo xtask conformance` (its progress on stderr); its table.
fn sample_run() -> Result<String> {
    eprintln!("readme: running `{SAMPLE_COMMAND}` for the sample output");
    let mut command = cargo();
    command
        .args(["xtask", "conformance"])
        .stderr(Stdio::inherit());
    let output = command
        .output()
        .with_context(|| format!("cannot run `{SAMPLE_COMMAND}`"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "`{SAMPLE_COMMAND}` failed ({}); the sample shows a passing run: fix or run it \
             again\n{stdout}",
            output.status
        );
    }
    Ok(stdout)
}

/// `text` with its sample block rebuilt from `table` (a run's stdout): its
/// header, the rows of the scenarios the block shows now, `...`, the totals.
fn rewrite_sample(text: &str, table: &str) -> Result<String> {
    let blocks = parse(text)?;
    let sample = blocks
        .iter()
        .find(|block| block.marker == Some(Marker::Output))
        .context("README.md has no sample output block (`<!-- readme: output -->`)")?;
    let shown: Vec<&str> = sample
        .body
        .iter()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.contains('/'))
        .collect();
    let mut table_lines = table.lines();
    let header = table_lines.next().context("the run printed no table")?;
    let rows: BTreeMap<&str, &str> = table_lines
        .by_ref()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| Some((line.split_whitespace().next()?, line)))
        .collect();
    let totals = table_lines
        .next()
        .filter(|line| line.contains(" scenarios: "))
        .context("the run printed no totals after its table")?;
    let mut body = vec![header.to_owned()];
    for name in shown {
        let row = rows
            .get(name)
            .with_context(|| format!("the run has no row `{name}` (shown in README.md)"))?;
        body.push((*row).to_owned());
    }
    body.push("...".to_owned());
    body.push(totals.to_owned());
    let mut lines: Vec<&str> = text.lines().collect();
    // The body lies between the fence (line `sample.line`, 1-based) and the
    // closing fence.
    let start = sample.line;
    let end = start + sample.body.len();
    let body_refs: Vec<&str> = body.iter().map(String::as_str).collect();
    lines.splice(start..end, body_refs);
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// Runs the `run` and `help` blocks; lists the `not-run` ones.
fn run_blocks(blocks: &[Block], metadata: &Metadata) -> Result<()> {
    // The README's `mcp-conformance` is the installed one: this build's.
    let mut build = cargo();
    build.args([
        "build",
        "--package",
        "mcp-conformance",
        "--bin",
        "mcp-conformance",
    ]);
    crate::run_checked(build, "building mcp-conformance")?;
    let bin_dir = metadata.target_dir.join("debug");
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .context("cannot put the target directory on PATH")?;
    let mut ran = 0;
    for block in blocks {
        let (empty_dir, help) = match &block.marker {
            Some(Marker::Run { empty_dir }) => (*empty_dir, false),
            Some(Marker::Help) => (false, true),
            Some(Marker::NotRun(reason)) => {
                for command in commands(block) {
                    eprintln!(
                        "readme: not run (README.md:{}): {command}: {reason}",
                        block.line
                    );
                }
                continue;
            }
            _ => continue,
        };
        let home = tempfile::tempdir().context("cannot create a scratch directory")?;
        let dir = if empty_dir {
            home.path().to_path_buf()
        } else {
            root()
        };
        for command in commands(block) {
            let line = if help {
                with_help(without_comment(command))
            } else {
                command.to_owned()
            };
            let mut sh = Command::new("sh");
            sh.args(["-c", &line]).current_dir(&dir).env("PATH", &path);
            crate::clean_cargo_env(&mut sh);
            if empty_dir {
                sh.env("HOME", home.path());
            }
            let started = Instant::now();
            let ran_ok = run_bounded(sh, COMMAND_DEADLINE)
                .with_context(|| format!("README.md:{}: `{line}`", block.line))?;
            if !ran_ok.success {
                bail!(
                    "README.md:{}: `{line}` failed ({}) in {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    block.line,
                    ran_ok.status,
                    dir.display(),
                    tail(&ran_ok.stdout),
                    tail(&ran_ok.stderr)
                );
            }
            eprintln!(
                "readme: ok in {:.1} s: {line}",
                started.elapsed().as_secs_f64()
            );
            ran += 1;
        }
    }
    eprintln!("readme: {ran} commands of README.md ran and succeeded");
    Ok(())
}

/// The end of `text`, for an error message.
fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(4000);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

#[derive(Debug)]
struct Ran {
    success: bool,
    status: String,
    stdout: String,
    stderr: String,
}

/// Runs `command` in a process group of its own; past `deadline` the group
/// is killed (and the command fails). Everything it started in its group is
/// killed when it ends, too, so no README command leaves a process behind.
fn run_bounded(mut command: Command, deadline: Duration) -> Result<Ran> {
    use std::os::unix::process::CommandExt;

    use nix::sys::{
        signal::{Signal, killpg},
        wait::{Id, WaitPidFlag, waitid},
    };
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().context("cannot start sh")?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let readers = [
        child
            .stdout
            .take()
            .map(|out| Box::new(out) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|err| Box::new(err) as Box<dyn Read + Send>),
    ]
    .map(|stream| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    });
    // The exit is seen without reaping, so the group's id cannot be reused
    // before the group is killed below.
    let (sender, receiver) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let seen = waitid(Id::Pid(group), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT);
        let _ = sender.send(seen.is_ok());
    });
    let timed_out = receiver.recv_timeout(deadline).is_err();
    // The leader has ended (or, on a timeout, is ended now): what it left
    // in its group goes too.
    let _ = killpg(group, Signal::SIGKILL);
    let status = child.wait().context("cannot wait for sh")?;
    let _ = waiter.join();
    let [stdout, stderr] = readers.map(|reader| reader.join().unwrap_or_default());
    if timed_out {
        bail!("did not end within {deadline:?}; killed");
    }
    Ok(Ran {
        success: status.success(),
        status: status.to_string(),
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        assert_eq!(
            parse_marker("<!-- readme: run -->").unwrap(),
            Marker::Run { empty_dir: false }
        );
        assert_eq!(
            parse_marker("<!-- readme: run in=empty -->").unwrap(),
            Marker::Run { empty_dir: true }
        );
        assert_eq!(parse_marker("<!-- readme: help -->").unwrap(), Marker::Help);
        assert_eq!(
            parse_marker("<!-- readme: not-run needs the network -->").unwrap(),
            Marker::NotRun("needs the network".into())
        );
        assert!(parse_marker("<!-- readme: not-run -->").is_err());
        assert!(parse_marker("<!-- readme: sometimes -->").is_err());
    }

    #[test]
    fn an_sh_block_without_a_marker_is_an_error() {
        let error = parse("text\n\n```sh\nls\n```\n").unwrap_err().to_string();
        assert!(
            error.starts_with("README.md:3: an `sh` block without a marker"),
            "{error}"
        );
        let blocks =
            parse("<!-- readme: run -->\n```sh\nls  # list\n\n# a note\n```\n```yaml\na: 1\n```\n")
                .unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(commands(&blocks[0]).collect::<Vec<_>>(), ["ls  # list"]);
        assert_eq!(without_comment("ls  # list"), "ls");
        assert_eq!(
            with_help("mcp-conformance server -- python3 my_server.py"),
            "mcp-conformance server --help -- python3 my_server.py"
        );
        assert_eq!(with_help("cargo xtask bench"), "cargo xtask bench --help");
        assert!(parse("<!-- readme: output -->\n```sh\nls\n```\n").is_err());
        assert!(parse("<!-- readme: help -->\n```text\nls\n```\n").is_err());
    }

    #[test]
    fn commands_in_the_text_must_be_in_a_marked_block() {
        let readme = "Run `cargo xtask conformance` or `mcp-conformance driver NAME` (see\n`cargo\n  xtask conformance --rules`), not `mcp-conformance` alone.\n\n<!-- readme: help -->\n```sh\ncargo xtask conformance --rules  # rules\nmcp-conformance driver naive --mode kill-pid\n```\n";
        let blocks = parse(readme).unwrap();
        check_inline_commands(readme, &blocks).unwrap();
        let stray = format!("{readme}Also `cargo xtask stress --runs 5`.\n");
        let error = check_inline_commands(&stray, &blocks)
            .unwrap_err()
            .to_string();
        assert!(error.contains("`cargo xtask stress --runs 5`"), "{error}");
        assert!(stands_for("stdio-client|rmcp|naive", "rmcp"));
        assert!(!stands_for("stdio-client|rmcp", "naive"));
        assert!(stands_for("FILTER", "lifecycle/"));
        assert!(!stands_for("x", "y"));
    }

    #[test]
    fn totals_are_checked_for_shape_and_the_scenario_count() {
        let good = "12 scenarios: 12 pass, 0 FAIL, 0 expected failure, 0 STALE; 345 checks, 0 failed; 9.48 s in total";
        check_totals(good, 12).unwrap();
        check_totals(&good.replace("9.48 s", "870 ms"), 12).unwrap();
        for bad in [
            good.replace("12 pass", "11 pass"),
            good.replace("0 FAIL", "1 FAIL"),
            good.replace("0 failed", "2 failed"),
            good.replace("9.48 s", "9.4 s"),
            good.replace("345 checks", "many checks"),
        ] {
            assert!(check_totals(&bad, 12).is_err(), "{bad}");
        }
        assert!(check_totals(good, 13).is_err());
    }

    #[test]
    fn the_sample_is_rewritten_from_a_run() {
        let readme = "intro\n<!-- readme: output -->\n```text\nSCENARIO  RULES  RESULT  TIME\na/b  1.x  pass  1 ms\n...\n9 scenarios: typed\n```\nend\n";
        let table = "SCENARIO     RULES  RESULT   TIME\na/b          1.x    pass    17 ms\nc/d          -      pass  1.20 s\n\n2 scenarios: 2 pass, 0 FAIL, 0 expected failure, 0 STALE; 5 checks, 0 failed; 1.22 s in total\n";
        let rewritten = rewrite_sample(readme, table).unwrap();
        assert_eq!(
            rewritten,
            "intro\n<!-- readme: output -->\n```text\nSCENARIO     RULES  RESULT   TIME\na/b          1.x    pass    17 ms\n...\n2 scenarios: 2 pass, 0 FAIL, 0 expected failure, 0 STALE; 5 checks, 0 failed; 1.22 s in total\n```\nend\n"
        );
        let error = rewrite_sample(&readme.replace("a/b", "x/y"), table).unwrap_err();
        assert!(error.to_string().contains("no row `x/y`"), "{error}");
    }

    #[test]
    fn a_command_past_its_deadline_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut sh = Command::new("sh");
        sh.args(["-c", "sleep 30 & echo $! > \"$1\"; wait", "sh"])
            .arg(&pid_file);
        let started = Instant::now();
        let error = run_bounded(sh, Duration::from_millis(500)).unwrap_err();
        assert!(error.to_string().contains("did not end within"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The background sleep was in the group: it ends (a zombie has no
        // command line), within a deadline, not at some later time.
        let gone_by = Instant::now() + Duration::from_secs(10);
        while std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
            assert!(Instant::now() < gone_by, "the group's sleep {pid} survived");
            std::thread::sleep(Duration::from_millis(10));
        }
        let ran = run_bounded(
            {
                let mut ok = Command::new("sh");
                ok.args(["-c", "echo out; echo err >&2; exit 3"]);
                ok
            },
            Duration::from_secs(30),
        )
        .unwrap();
        assert!(!ran.success);
        assert_eq!(
            (ran.stdout.as_str(), ran.stderr.as_str()),
            ("out\n", "err\n")
        );
    }
}
