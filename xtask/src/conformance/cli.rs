//! The command line of `cargo xtask conformance`.

use std::path::PathBuf;

use anyhow::{Result, bail};

use super::verdict::RunInfo;

pub const HELP: &str = "\
usage: cargo xtask conformance [FILTER] [--nextest] [--partition SPEC]
                               [--expected-failures FILE] [--report-dir DIR]
       cargo xtask conformance --rules

Builds the fixtures and the scenario runner, runs the conformance scenarios,
prints a summary and writes report.json, report.xml (JUnit) and report.md.

arguments:
  FILTER                    run only scenarios whose name contains FILTER
                            (e.g. `lifecycle/` or `eof-close`)

options:
  --nextest                 run the scenarios under cargo-nextest (installed if
                            missing) instead of `cargo test`
  --partition SPEC          run one shard, as nextest's --partition: count:M/N,
                            hash:M/N or slice:M/N (requires --nextest)
  --expected-failures FILE  YAML baseline of scenarios known to fail; a listed
                            scenario that fails is tolerated, one that passes
                            is STALE and fails the run
  --report-dir DIR          where to write results/ and the reports
                            (default: target/conformance in the workspace)
  --rules                   run nothing: list each rule of docs/contract.md
                            with the scenarios that cite it, the rules no
                            scenario cites, and where the document and the
                            scenarios disagree (then exit 1)
  -h, --help                print this help

exit status: 0 when every scenario that ran passed or failed as the baseline
expects and nothing is stale; 1 when one did not (or, with --rules, when the
document and the scenarios disagree); 2 for a usage error (this command
line, an unreadable baseline, a FILTER that selects no scenario); 3 when no
verdict could be reached (a build failed, the runner crashed before writing
results, a report could not be written). See docs/exit-codes.md.
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Run(Options),
    /// `--rules`: the rule listing, no run.
    Rules,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub filter: Option<String>,
    pub nextest: bool,
    pub partition: Option<String>,
    pub expected_failures: Option<PathBuf>,
    pub report_dir: Option<PathBuf>,
}

impl Options {
    pub fn run_info(&self) -> RunInfo {
        RunInfo {
            nextest: self.nextest,
            filter: self.filter.clone(),
            partition: self.partition.clone(),
        }
    }
}

/// Parses the arguments after `conformance`. Options take their value as the
/// next argument or after `=`.
pub fn parse(args: &[String]) -> Result<Command> {
    let mut options = Options::default();
    let mut rules = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String> {
            match inline.clone().or_else(|| args.next().cloned()) {
                Some(value) if !value.is_empty() => Ok(value),
                _ => bail!("{name} needs a value\n\n{HELP}"),
            }
        };
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            "--nextest" if inline.is_none() => options.nextest = true,
            "--rules" if inline.is_none() => rules = true,
            "--partition" => options.partition = Some(value(flag)?),
            "--expected-failures" => options.expected_failures = Some(value(flag)?.into()),
            "--report-dir" => options.report_dir = Some(value(flag)?.into()),
            _ if arg.starts_with('-') => bail!("unknown option `{arg}`\n\n{HELP}"),
            _ if options.filter.is_some() => {
                bail!(
                    "only one FILTER is allowed (got `{}` and `{arg}`)\n\n{HELP}",
                    options.filter.unwrap()
                )
            }
            _ => options.filter = Some(arg.clone()),
        }
    }
    if rules {
        if options != Options::default() {
            bail!("--rules runs nothing, so it takes no other argument\n\n{HELP}");
        }
        return Ok(Command::Rules);
    }
    if options.partition.is_some() && !options.nextest {
        bail!("--partition needs --nextest: partitions are nextest's\n\n{HELP}");
    }
    Ok(Command::Run(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command> {
        parse(&args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn parses_every_option() {
        let command = parse_strs(&[
            "lifecycle/",
            "--nextest",
            "--partition",
            "count:1/2",
            "--expected-failures=ci/ef.yaml",
            "--report-dir",
            "out",
        ])
        .unwrap();
        assert_eq!(
            command,
            Command::Run(Options {
                filter: Some("lifecycle/".into()),
                nextest: true,
                partition: Some("count:1/2".into()),
                expected_failures: Some("ci/ef.yaml".into()),
                report_dir: Some("out".into()),
            })
        );
        assert_eq!(parse_strs(&[]).unwrap(), Command::Run(Options::default()));
    }

    #[test]
    fn help() {
        assert_eq!(parse_strs(&["--help"]).unwrap(), Command::Help);
        assert_eq!(parse_strs(&["x", "-h"]).unwrap(), Command::Help);
        for option in [
            "--nextest",
            "--partition",
            "--expected-failures",
            "--report-dir",
            "--rules",
            "FILTER",
        ] {
            assert!(HELP.contains(option), "{option}");
        }
    }

    #[test]
    fn usage_errors() {
        let error = |args: &[&str]| parse_strs(args).unwrap_err().to_string();
        assert!(error(&["--partition", "count:1/2"]).starts_with("--partition needs --nextest"));
        assert!(error(&["--bogus"]).starts_with("unknown option `--bogus`"));
        assert!(error(&["--nextest=yes"]).starts_with("unknown option `--nextest=yes`"));
        assert!(error(&["a", "b"]).starts_with("only one FILTER is allowed (got `a` and `b`)"));
        assert!(error(&["--report-dir"]).starts_with("--report-dir needs a value"));
        assert!(error(&["--expected-failures="]).starts_with("--expected-failures needs a value"));
        assert!(error(&["--rules", "lifecycle/"]).starts_with("--rules runs nothing"));
        assert!(error(&["--nextest", "--rules"]).starts_with("--rules runs nothing"));
        assert!(error(&["--rules=x"]).starts_with("unknown option `--rules=x`"));
    }

    #[test]
    fn rules() {
        assert_eq!(parse_strs(&["--rules"]).unwrap(), Command::Rules);
    }
}
