//! `cargo xtask dist`: the release artifacts of `mcp-conformance` for this
//! machine's target, in `target/dist/` (docs/releasing.md): the PyPI wheel
//! (maturin, `dist/python/pyproject.toml`), the npm launcher package and the
//! platform package carrying the binary (`npm pack`), and the archive that
//! `cargo binstall` and the GitHub Action download, with its sha256.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{cargo, clean_cargo_env, root, run_checked};

const HELP: &str = "\
usage: cargo xtask dist [--release] [--only KINDS] [--out DIR]

Builds the release artifacts of mcp-conformance for this machine's target
into target/dist (or DIR):
  wheel    mcp_conformance-VERSION-py3-none-PLATFORM.whl (maturin, from
           dist/python/pyproject.toml; maturin is pip-installed into
           target/dist-tools/maturin on first use)
  npm      mcp-stdio-conformance-VERSION.tgz (the launcher) and
           mcp-stdio-conformance-PLATFORM-VERSION.tgz (the binary), npm pack
  archive  mcp-conformance-VERSION-TARGET.tar.gz and its .sha256, in the
           layout of [package.metadata.binstall]

Without --release the binary is the dev profile's (fast, reuses the test
build; for trying the packages). A release is built with --release.
--only takes a comma-separated list of the kinds above (default: all).
";

/// The crate and executable packaged.
const PACKAGE: &str = "mcp-conformance";
const BIN: &str = "mcp-conformance";
/// The npm launcher package and the scope of the platform packages.
const NPM_PACKAGE: &str = "mcp-stdio-conformance";
const NPM_SCOPE: &str = "@mcp-stdio-conformance";
/// The launcher's sources, copied as they are.
const NPM_DIR: &str = "dist/npm/mcp-stdio-conformance";
/// The directory of pyproject.toml.
const PYTHON_DIR: &str = "dist/python";
/// The maturin installed when none is in `target/dist-tools/maturin` yet.
const MATURIN: &str = "maturin==1.16.0";
/// Files that go beside the binary in every package.
const LICENSES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Wheel,
    Npm,
    Archive,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Wheel, Kind::Npm, Kind::Archive];

    fn parse(name: &str) -> Result<Kind> {
        match name {
            "wheel" => Ok(Kind::Wheel),
            "npm" => Ok(Kind::Npm),
            "archive" => Ok(Kind::Archive),
            other => bail!("unknown kind `{other}` for --only (wheel, npm, archive)\n\n{HELP}"),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Options {
    release: bool,
    kinds: Vec<Kind>,
    out: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Option<Options>> {
    let mut options = Options {
        release: false,
        kinds: Kind::ALL.to_vec(),
        out: None,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--release" => options.release = true,
            "--only" => {
                let list = args.next().context("--only needs a list of kinds")?;
                options.kinds = list.split(',').map(Kind::parse).collect::<Result<_>>()?;
            }
            "--out" => {
                let dir = args.next().context("--out needs a directory")?;
                options.out = Some(PathBuf::from(dir));
            }
            "--help" | "-h" => return Ok(None),
            other => bail!("unknown argument `{other}`\n\n{HELP}"),
        }
    }
    Ok(Some(options))
}

/// What cargo says about the workspace: the crate's version and the
/// target directory.
struct Workspace {
    version: String,
    target_dir: PathBuf,
    /// This machine's target triple (`rustc -vV`).
    triple: String,
}

pub fn run(args: Vec<String>) -> Result<()> {
    let Some(options) = parse(&args).map_err(crate::outcome::usage)? else {
        print!("{HELP}");
        return Ok(());
    };
    let workspace = workspace()?;
    let out = match &options.out {
        Some(dir) => std::path::absolute(dir)?,
        None => workspace.target_dir.join("dist"),
    };
    fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let profile = if options.release { "release" } else { "dev" };
    let binary = build(&workspace, profile)?;
    let mut made = Vec::new();
    for kind in &options.kinds {
        match kind {
            Kind::Wheel => made.push(wheel(&workspace, profile, &out)?),
            Kind::Npm => made.extend(npm(&workspace, &binary, &out)?),
            Kind::Archive => made.extend(archive(&workspace, &binary, &out)?),
        }
    }
    for path in made {
        println!("{}", path.display());
    }
    Ok(())
}

fn workspace() -> Result<Workspace> {
    let output = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .context("cannot run cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)?;
    let version = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == PACKAGE)
        .and_then(|package| package["version"].as_str())
        .context("cargo metadata lists no mcp-conformance package")?
        .to_owned();
    let target_dir = PathBuf::from(
        metadata["target_directory"]
            .as_str()
            .context("cargo metadata gives no target directory")?,
    );
    let rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .arg("-vV")
        .output()
        .context("cannot run rustc -vV")?;
    let triple = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .context("rustc -vV names no host")?
        .to_owned();
    Ok(Workspace {
        version,
        target_dir,
        triple,
    })
}

/// Builds the one executable, as `cargo install` would (this package's
/// features alone), and returns its path.
fn build(workspace: &Workspace, profile: &str) -> Result<PathBuf> {
    let mut build = cargo();
    build.args([
        "build",
        "--locked",
        "-p",
        PACKAGE,
        "--bin",
        BIN,
        "--profile",
        profile,
    ]);
    run_checked(build, "building mcp-conformance")?;
    let dir = if profile == "dev" { "debug" } else { profile };
    Ok(workspace.target_dir.join(dir).join(BIN))
}

/// The wheel, by maturin from `dist/python/pyproject.toml`. maturin runs
/// cargo itself; with the same profile and package it finds the build
/// above fresh.
fn wheel(workspace: &Workspace, profile: &str, out: &Path) -> Result<PathBuf> {
    let maturin = maturin(workspace)?;
    remove_matching(out, "mcp_conformance-", ".whl")?;
    let mut build = Command::new(&maturin);
    build
        .current_dir(root().join(PYTHON_DIR))
        .args(["build", "--locked", "--profile", profile, "--out"])
        .arg(out);
    clean_cargo_env(&mut build);
    run_checked(build, "maturin build (the wheel)")?;
    let prefix = format!("mcp_conformance-{}-", workspace.version);
    find_one(out, &prefix, ".whl")
}

/// maturin from `target/dist-tools/maturin`, pip-installed there the first
/// time (PyPI), so nothing is installed outside the target directory.
fn maturin(workspace: &Workspace) -> Result<PathBuf> {
    let venv = workspace.target_dir.join("dist-tools").join("maturin");
    let maturin = venv.join("bin").join("maturin");
    if maturin.exists() {
        return Ok(maturin);
    }
    eprintln!(
        "maturin is missing: installing {MATURIN} into {}",
        venv.display()
    );
    let mut create = Command::new("python3");
    create.args(["-m", "venv"]).arg(&venv);
    run_checked(create, "python3 -m venv (is python3 installed?)")?;
    let mut install = Command::new(venv.join("bin").join("pip"));
    install.args(["install", "--quiet", MATURIN]);
    run_checked(install, "pip install maturin")?;
    Ok(maturin)
}

/// The npm platform name (`process.platform-process.arch`) of a target.
fn npm_platform(triple: &str) -> Option<(&'static str, &'static str)> {
    match triple {
        "x86_64-unknown-linux-gnu" => Some(("linux", "x64")),
        "aarch64-unknown-linux-gnu" => Some(("linux", "arm64")),
        "x86_64-apple-darwin" => Some(("darwin", "x64")),
        "aarch64-apple-darwin" => Some(("darwin", "arm64")),
        _ => None,
    }
}

/// The launcher and this platform's package, packed by `npm pack`.
fn npm(workspace: &Workspace, binary: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let Some((os, cpu)) = npm_platform(&workspace.triple) else {
        bail!(
            "no npm platform package is defined for {} (docs/releasing.md lists the targets)",
            workspace.triple
        );
    };
    let platform_name = format!("{NPM_SCOPE}/{os}-{cpu}");
    let launcher = root().join(NPM_DIR);
    check_launcher(&launcher, &workspace.version, &platform_name)?;

    let staging = out.join("npm");
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    // The launcher, as committed.
    let main = staging.join(NPM_PACKAGE);
    fs::create_dir_all(main.join("bin"))?;
    for file in ["package.json", "README.md", "bin/mcp-stdio-conformance.js"] {
        copy(&launcher.join(file), &main.join(file))?;
    }
    // The platform package: the binary and a manifest npm installs only on
    // its os and cpu.
    let platform = staging.join(format!("{os}-{cpu}"));
    fs::create_dir_all(platform.join("bin"))?;
    copy(binary, &platform.join("bin").join(BIN))?;
    let manifest = json!({
        "name": platform_name,
        "version": workspace.version,
        "description": format!("The mcp-conformance executable for {os} {cpu} ({}); installed by mcp-stdio-conformance", workspace.triple),
        "license": "MIT OR Apache-2.0",
        "repository": read_json(&launcher.join("package.json"))?["repository"],
        "os": [os],
        "cpu": [cpu],
        "files": ["bin/mcp-conformance", "README.md", "LICENSE-MIT", "LICENSE-APACHE"],
        "preferUnplugged": true,
    });
    fs::write(
        platform.join("package.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    fs::write(
        platform.join("README.md"),
        format!(
            "# {platform_name}\n\nThe `mcp-conformance` executable for {os} {cpu}. \
             Install [`{NPM_PACKAGE}`](https://www.npmjs.com/package/{NPM_PACKAGE}), \
             which depends on this package on the platforms it fits.\n"
        ),
    )?;
    for dir in [&main, &platform] {
        for license in LICENSES {
            copy(&root().join(license), &dir.join(license))?;
        }
    }

    remove_matching(out, NPM_PACKAGE, ".tgz")?;
    let mut packed = Vec::new();
    for dir in [&main, &platform] {
        let mut pack = Command::new("npm");
        pack.current_dir(dir)
            .args(["pack", "--json", "--pack-destination"])
            .arg(out);
        let output = pack
            .output()
            .context("cannot run npm pack (is Node.js with npm installed?)")?;
        if !output.status.success() {
            bail!(
                "npm pack in {} failed: {}",
                dir.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let report: Value =
            serde_json::from_slice(&output.stdout).context("npm pack --json printed no JSON")?;
        let file = report[0]["filename"]
            .as_str()
            .context("npm pack --json names no file")?;
        packed.push(out.join(file));
    }
    fs::remove_dir_all(&staging)?;
    Ok(packed)
}

/// The committed launcher's manifest must carry the crate's version and
/// depend on this platform's package at that version: a release bumps it
/// with the crate.
fn check_launcher(dir: &Path, version: &str, platform_name: &str) -> Result<()> {
    let path = dir.join("package.json");
    let manifest = read_json(&path)?;
    if manifest["version"] != version {
        bail!(
            "{} has version {}, the crate {version}: give both the same version",
            path.display(),
            manifest["version"]
        );
    }
    let optional = &manifest["optionalDependencies"];
    let Some(deps) = optional.as_object() else {
        bail!("{} has no optionalDependencies", path.display());
    };
    if optional[platform_name] != version {
        bail!(
            "{} must list {platform_name}: \"{version}\" in optionalDependencies",
            path.display()
        );
    }
    if let Some((name, other)) = deps.iter().find(|(_, dep)| **dep != version) {
        bail!(
            "{} depends on {name} {other}, not the crate's version {version}",
            path.display()
        );
    }
    Ok(())
}

/// `mcp-conformance-VERSION-TARGET.tar.gz` holding the directory of the
/// same name (the binary, the licenses, the README), and its sha256 in
/// the format of `sha256sum`: the layout `[package.metadata.binstall]`
/// names, which the Action downloads.
fn archive(workspace: &Workspace, binary: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let name = format!("{BIN}-{}-{}", workspace.version, workspace.triple);
    let staging = out.join(&name);
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    copy(binary, &staging.join(BIN))?;
    for file in LICENSES.iter().chain(&["README.md"]) {
        copy(&root().join(file), &staging.join(file))?;
    }
    let file = format!("{name}.tar.gz");
    let archive = out.join(&file);
    let mut tar = Command::new("tar");
    tar.current_dir(out).arg("-czf").arg(&file).arg(&name);
    run_checked(tar, "tar (making the archive)")?;
    fs::remove_dir_all(&staging)?;

    let bytes = fs::read(&archive)?;
    let mut line = String::new();
    for byte in Sha256::digest(&bytes) {
        write!(line, "{byte:02x}")?;
    }
    writeln!(line, "  {file}")?;
    let checksum = out.join(format!("{file}.sha256"));
    fs::write(&checksum, line)?;
    Ok(vec![archive, checksum])
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// Copies a file, keeping its mode (the executables stay executable).
fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// Removes the files in `dir` named `prefix*suffix`: earlier artifacts that
/// would otherwise be taken for this run's.
fn remove_matching(dir: &Path, prefix: &str, suffix: &str) -> Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(prefix) && name.ends_with(suffix) {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// The one file in `dir` named `prefix*suffix`.
fn find_one(dir: &Path, prefix: &str, suffix: &str) -> Result<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && name.ends_with(suffix) {
            found.push(entry.path());
        }
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!(
            "expected one {prefix}*{suffix} in {}, found {}",
            dir.display(),
            found.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn every_kind_is_built_unless_only_says_otherwise() {
        let options = parse(&args(&[])).unwrap().unwrap();
        assert_eq!(options.kinds, Kind::ALL);
        assert!(!options.release);
        let options = parse(&args(&["--only", "npm,archive", "--release"]))
            .unwrap()
            .unwrap();
        assert_eq!(options.kinds, [Kind::Npm, Kind::Archive]);
        assert!(options.release);
        let error = parse(&args(&["--only", "deb"])).unwrap_err().to_string();
        assert!(error.contains("unknown kind `deb`"), "{error}");
    }

    #[test]
    fn the_committed_launcher_matches_the_crate_version() {
        let manifest = fs::read_to_string(root().join("conformance/Cargo.toml")).unwrap();
        let version = manifest
            .lines()
            .find_map(|line| line.strip_prefix("version = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap();
        check_launcher(
            &root().join(NPM_DIR),
            version,
            "@mcp-stdio-conformance/linux-x64",
        )
        .unwrap();
        let error = check_launcher(&root().join(NPM_DIR), "9.9.9", "x")
            .unwrap_err()
            .to_string();
        assert!(error.contains("give both the same version"), "{error}");
    }

    #[test]
    fn the_npm_platforms_are_the_launchers() {
        let launcher =
            fs::read_to_string(root().join(NPM_DIR).join("bin/mcp-stdio-conformance.js")).unwrap();
        for triple in [
            "x86_64-unknown-linux-gnu",
            "aarch64-unknown-linux-gnu",
            "x86_64-apple-darwin",
            "aarch64-apple-darwin",
        ] {
            let (os, cpu) = npm_platform(triple).unwrap();
            let entry = format!("'{os}-{cpu}': '{NPM_SCOPE}/{os}-{cpu}'");
            assert!(launcher.contains(&entry), "the launcher lacks {entry}");
        }
    }
}
