//! Credentials for HTTP servers (docs/contract.md: `5.credentials.gh_once`, `5.credentials.stdio`): resolved in one sequential pass
//! before servers connect concurrently. `gh` runs `gh auth token` once per pass
//! and remembers the answer. Stdio servers never come here.

use std::{collections::BTreeMap, fmt, path::Path, time::Duration};

use base64::Engine;
use mcp_stdio_process::{ChildExit, KillGuard};
use tokio::io::AsyncReadExt as _;

use crate::config::{AuthMode, HttpConfig};

/// How long `gh auth token` may take.
const GH_TIMEOUT: Duration = Duration::from_secs(10);

/// What goes into the `Authorization` header. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub enum Authorization {
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// `Authorization: Basic <base64(username:password)>`.
    Basic {
        /// The user name.
        username: String,
        /// The password (TOKEN).
        password: String,
    },
}

impl Authorization {
    /// The header value: `Bearer <token>` or `Basic <base64(user:password)>`.
    pub(crate) fn header_value(&self) -> String {
        match self {
            Authorization::Bearer(token) => format!("Bearer {token}"),
            Authorization::Basic { username, password } => {
                let pair = format!("{username}:{password}");
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                )
            }
        }
    }

    /// `bearer` or `basic`.
    pub fn scheme(&self) -> &'static str {
        match self {
            Authorization::Bearer(_) => "bearer",
            Authorization::Basic { .. } => "basic",
        }
    }
}

impl fmt::Debug for Authorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Authorization({}, [REDACTED])", self.scheme())
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CredentialError {
    #[error("AUTH {mode} needs TOKEN{}", if *.needs_username { " and USERNAME" } else { "" })]
    Missing {
        mode: &'static str,
        needs_username: bool,
    },
    #[error(
        "`{command} auth token` failed: {reason}; log in with `gh auth login`, or use AUTH bearer with a TOKEN"
    )]
    Gh { command: String, reason: String },
}

/// Resolves credentials, running `gh` at most once.
pub(crate) struct CredentialResolver {
    gh_command: String,
    /// How long `gh auth token` may take ([`GH_TIMEOUT`]; shorter in tests).
    gh_timeout: Duration,
    gh_token: Option<Result<String, CredentialError>>,
    gh_runs: u32,
}

impl CredentialResolver {
    /// `gh_command` is the `gh` program to run (normally `gh`).
    pub(crate) fn new(gh_command: impl Into<String>) -> Self {
        Self {
            gh_command: gh_command.into(),
            gh_timeout: GH_TIMEOUT,
            gh_token: None,
            gh_runs: 0,
        }
    }

    /// How many times `gh auth token` ran.
    pub(crate) fn gh_runs(&self) -> u32 {
        self.gh_runs
    }

    /// The credentials for one HTTP server: `None` means no header.
    pub(crate) async fn resolve(
        &mut self,
        http: &HttpConfig,
    ) -> Result<Option<Authorization>, CredentialError> {
        let token = http.token.clone().filter(|t| !t.is_empty());
        let username = http.username.clone().filter(|u| !u.is_empty());
        match http.auth {
            AuthMode::None => Ok(None),
            AuthMode::Bearer => token.map(|token| Some(Authorization::Bearer(token))).ok_or(
                CredentialError::Missing {
                    mode: "bearer",
                    needs_username: false,
                },
            ),
            AuthMode::Basic => match (username, token) {
                (Some(username), Some(password)) => {
                    Ok(Some(Authorization::Basic { username, password }))
                }
                _ => Err(CredentialError::Missing {
                    mode: "basic",
                    needs_username: true,
                }),
            },
            AuthMode::Gh => self
                .gh()
                .await
                .map(|token| Some(Authorization::Bearer(token))),
            // An explicit TOKEN wins; credentials in the URL (which reqwest sends itself) come
            // next, so that no second header is added; a GitHub host uses gh; anything else
            // none. A TOKEN with user-info was refused when the config was loaded.
            AuthMode::Auto => match (username, token) {
                (Some(username), Some(password)) => {
                    Ok(Some(Authorization::Basic { username, password }))
                }
                (None, Some(token)) => Ok(Some(Authorization::Bearer(token))),
                _ if http.has_user_info() => Ok(None),
                _ if http.host().is_some_and(|host| is_github_host(&host)) => self
                    .gh()
                    .await
                    .map(|token| Some(Authorization::Bearer(token))),
                _ => Ok(None),
            },
        }
    }

    async fn gh(&mut self) -> Result<String, CredentialError> {
        if let Some(remembered) = &self.gh_token {
            return remembered.clone();
        }
        self.gh_runs += 1;
        let result = self.run_gh().await;
        self.gh_token = Some(result.clone());
        result
    }

    async fn run_gh(&self) -> Result<String, CredentialError> {
        let failed = |reason: String| CredentialError::Gh {
            command: self.gh_command.clone(),
            reason,
        };
        // In a group of its own, like every process this workspace starts.
        let child = mcp_stdio_process::spawn(
            Path::new(&self.gh_command),
            &["auth".to_owned(), "token".to_owned()],
            None,
            &BTreeMap::new(),
            "gh",
            |_| {},
        )
        .map_err(|error| failed(error.to_string()))?;
        // Stdin closed at once: gh must not wait for a person.
        drop(child.stdin);
        // Armed until gh's output is read and its exit seen: a timeout, or
        // this future dropped half-way, kills gh's whole group (not only gh,
        // as tokio's `kill_on_drop` did) and reaps it.
        let guard = KillGuard::new(child.exit.clone());
        let (mut stdout, mut stderr) = (child.stdout, child.stderr);
        let exit = &child.exit;
        let run = async {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let (read_out, read_err) =
                tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
            read_out?;
            read_err?;
            std::io::Result::Ok((exit.wait().await, out, err))
        };
        let (status, stdout, stderr) = tokio::time::timeout(self.gh_timeout, run)
            .await
            .map_err(|_| failed(format!("no answer within {}s", self.gh_timeout.as_secs())))?
            .map_err(|error| failed(error.to_string()))?;
        guard.disarm();
        child.exit.release();
        if !status.success() {
            // gh's stderr says why (not logged in...); it carries no token.
            let stderr = String::from_utf8_lossy(&stderr);
            return Err(failed(format!("{}: {}", std_words(status), stderr.trim())));
        }
        let token = String::from_utf8_lossy(&stdout).trim().to_owned();
        if token.is_empty() {
            return Err(failed("it printed no token".into()));
        }
        Ok(token)
    }
}

/// `status` in the words of [`std::process::ExitStatus`] (`exit status: 1`,
/// `signal: 9 (SIGKILL)`), which the messages have always used.
fn std_words(status: ChildExit) -> String {
    use std::os::unix::process::ExitStatusExt;
    let raw = match status {
        ChildExit::UNKNOWN => return "an exit status nobody saw (reaped elsewhere)".into(),
        ChildExit::Code(code) => (code & 0xff) << 8,
        ChildExit::Signal(signal) => signal & 0x7f,
    };
    std::process::ExitStatus::from_raw(raw).to_string()
}

/// Hosts whose tokens come from `gh`: github.com, GitHub's MCP endpoint
/// (githubcopilot.com) and GitHub Enterprise Cloud (ghe.com), with subdomains.
pub(crate) fn is_github_host(host: &str) -> bool {
    ["github.com", "githubcopilot.com", "ghe.com"]
        .iter()
        .any(|domain| host == *domain || host.ends_with(&format!(".{domain}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_and_debug() {
        let bearer = Authorization::Bearer("t0k".into());
        assert_eq!(bearer.header_value(), "Bearer t0k");
        let basic = Authorization::Basic {
            username: "alice".into(),
            password: "pw".into(),
        };
        assert_eq!(basic.header_value(), "Basic YWxpY2U6cHc=");
        assert_eq!(format!("{basic:?}"), "Authorization(basic, [REDACTED])");
    }

    #[tokio::test]
    async fn a_gh_that_does_not_answer_is_ended_with_its_whole_group() {
        use mcp_stdio_process::{MARKER_ENV, Marker, MarkerGuard};
        let dir = tempfile::tempdir().unwrap();
        let marker = Marker::new("gh-timeout");
        let guard = MarkerGuard::new(marker.clone(), Duration::from_secs(5));
        // A gh that leaves a child in its group and never answers.
        let gh = dir.path().join("gh");
        std::fs::write(
            &gh,
            format!(
                "#!/bin/sh\nexport {MARKER_ENV}={}\nsleep 60 &\nexec sleep 60\n",
                marker.as_str()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let mut resolver = CredentialResolver::new(gh.to_string_lossy());
        resolver.gh_timeout = Duration::from_secs(1);
        let mut http = HttpConfig::new("https://example.invalid/mcp");
        http.auth = AuthMode::Gh;
        let error = resolver.resolve(&http).await.unwrap_err();
        assert!(error.to_string().contains("no answer within 1s"), "{error}");
        // Both sleeps carried the marker; the group kill ended both, the
        // background one included (tokio's kill_on_drop ended gh alone).
        assert_eq!(marker.wait_gone(Duration::from_secs(5)), Vec::new());
        drop(guard);
    }

    #[test]
    fn gh_statuses_read_as_std_said_them() {
        assert_eq!(std_words(ChildExit::Code(1)), "exit status: 1");
        assert_eq!(std_words(ChildExit::Signal(9)), "signal: 9 (SIGKILL)");
    }

    #[test]
    fn github_hosts() {
        assert!(is_github_host("github.com"));
        assert!(is_github_host("api.githubcopilot.com"));
        assert!(is_github_host("acme.ghe.com"));
        assert!(!is_github_host("notgithub.com"));
        assert!(!is_github_host("example.invalid"));
    }

    #[tokio::test]
    async fn modes_resolve_without_running_gh_unless_asked() {
        let mut resolver = CredentialResolver::new("/nonexistent/gh");
        let mut http = HttpConfig::new("https://example.invalid/mcp");
        assert_eq!(
            resolver.resolve(&http).await.unwrap(),
            None,
            "auto, no token, not GitHub"
        );
        http.token = Some("tok".into());
        assert_eq!(
            resolver.resolve(&http).await.unwrap(),
            Some(Authorization::Bearer("tok".into()))
        );
        http.auth = AuthMode::None;
        assert_eq!(resolver.resolve(&http).await.unwrap(), None);
        http.auth = AuthMode::Basic;
        assert!(matches!(
            resolver.resolve(&http).await,
            Err(CredentialError::Missing { .. })
        ));
        assert_eq!(resolver.gh_runs(), 0);
    }

    #[tokio::test]
    async fn gh_runs_once_and_its_failure_is_remembered() {
        let mut resolver = CredentialResolver::new("/nonexistent/gh");
        let mut http = HttpConfig::new("https://api.githubcopilot.com/mcp/");
        http.auth = AuthMode::Gh;
        let first = resolver.resolve(&http).await.unwrap_err();
        assert!(first.to_string().contains("gh auth login"), "{first}");
        http.auth = AuthMode::Auto;
        assert!(
            resolver.resolve(&http).await.is_err(),
            "auto on a GitHub host uses gh"
        );
        assert_eq!(resolver.gh_runs(), 1);
    }

    /// reqwest sends a URL's user-info as `Authorization: Basic`: auto must not add `gh`'s
    /// token as a second header, even on a GitHub host.
    #[tokio::test]
    async fn auto_sends_nothing_more_when_the_url_carries_credentials() {
        let mut resolver = CredentialResolver::new("/nonexistent/gh");
        let http = HttpConfig::new("https://user:pw@api.githubcopilot.com/mcp/");
        assert_eq!(resolver.resolve(&http).await.unwrap(), None);
        assert_eq!(resolver.gh_runs(), 0);
    }
}
