//! The little URL handling the config needs, without a URL crate: the scheme check, the
//! `/readonly` path rule and redaction of the parts of a URL that can carry credentials.

/// A URL split at its delimiters: `scheme://authority path`, without the
/// `?query` and `#fragment` (which only redaction cares about).
struct Parts<'a> {
    scheme: &'a str,
    authority: &'a str,
    path: &'a str,
}

fn split(url: &str) -> Option<Parts<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let rest = rest.split_once('#').map_or(rest, |(rest, _)| rest);
    let rest = rest.split_once('?').map_or(rest, |(rest, _)| rest);
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Some(Parts {
        scheme,
        authority,
        path,
    })
}

/// Whether `url` is an absolute `http://` or `https://` URL with a host.
pub(super) fn is_http(url: &str) -> bool {
    split(url).is_some_and(|parts| {
        let host = parts.authority.rsplit('@').next().unwrap_or_default();
        (parts.scheme.eq_ignore_ascii_case("http") || parts.scheme.eq_ignore_ascii_case("https"))
            && !host.is_empty()
            && !url.chars().any(char::is_whitespace)
    })
}

/// Whether the path of `url` ends in `/readonly`. One trailing `/` is accepted too, since
/// `/readonly/` names the same endpoint on every server we know of; the query and fragment are
/// not part of the path, and the comparison is case-sensitive like paths are.
pub(super) fn is_readonly(url: &str) -> bool {
    split(url).is_some_and(|parts| {
        let path = parts.path.strip_suffix('/').unwrap_or(parts.path);
        path.ends_with("/readonly")
    })
}

/// Whether `url` carries user-info (`user@`, `user:password@` before the host), which HTTP
/// clients send as an `Authorization: Basic` header. An empty one (`https://@host`) sends none.
pub(super) fn has_user_info(url: &str) -> bool {
    split(url).is_some_and(|parts| {
        parts
            .authority
            .rsplit_once('@')
            .is_some_and(|(user_info, _)| !user_info.is_empty())
    })
}

/// The host of `url`: the authority without user-info and port, lowercased.
pub(super) fn host(url: &str) -> Option<String> {
    let parts = split(url)?;
    let authority = parts
        .authority
        .rsplit_once('@')
        .map_or(parts.authority, |(_, host)| host);
    let host = match authority.strip_prefix('[') {
        // An IPv6 literal: `[::1]:8080`.
        Some(rest) => rest.split_once(']').map_or(rest, |(host, _)| host),
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host),
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// `url` with its user-info, query and fragment replaced by `[REDACTED]`: those are where a URL
/// carries credentials (`https://user:pass@host`, `?token=...`, `#access_token=...`).
pub(super) fn redact(url: &str) -> String {
    if split(url).is_none() {
        // Not a URL we can take apart, so no part of it is known to be harmless.
        return "[REDACTED]".to_owned();
    }
    // The same redaction as every error and log line gets.
    crate::redact::redact_urls(url).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_drops_user_info_port_and_case() {
        assert_eq!(
            host("https://user:pw@API.GitHub.com:443/mcp?x").as_deref(),
            Some("api.github.com")
        );
        assert_eq!(
            host("http://127.0.0.1:8080/mcp").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host("http://[::1]:8080/mcp").as_deref(), Some("::1"));
        assert_eq!(host("not a url"), None);
    }

    #[test]
    fn user_info_is_only_what_comes_before_the_host() {
        assert!(has_user_info("https://user:pw@h.invalid/mcp"));
        assert!(has_user_info("https://user@h.invalid"));
        assert!(has_user_info("https://:pw@h.invalid"));
        assert!(!has_user_info("https://@h.invalid"));
        assert!(!has_user_info("https://h.invalid/a@b?c=d@e#f@g"));
        assert!(!has_user_info("not a url"));
    }

    #[test]
    fn accepts_only_absolute_http_urls() {
        assert!(is_http("https://example.invalid/mcp"));
        assert!(is_http("http://localhost:8080"));
        assert!(is_http("HTTPS://example.invalid"));
        assert!(is_http("https://user:pw@example.invalid/x?y#z"));
        assert!(!is_http("example.invalid/mcp"));
        assert!(!is_http("ftp://example.invalid"));
        assert!(!is_http("https://"));
        assert!(!is_http("https:///path"));
        assert!(!is_http("https://user@"));
        assert!(!is_http("https://exa mple.invalid"));
    }

    #[test]
    fn readonly_is_decided_by_the_path_alone() {
        assert!(is_readonly("https://h/readonly"));
        assert!(is_readonly("https://h/mcp/readonly"));
        assert!(is_readonly("https://h/mcp/readonly/"));
        assert!(is_readonly("https://h/mcp/readonly?x=1#f"));
        assert!(!is_readonly("https://h/mcp/readonly//"));
        assert!(!is_readonly("https://h/mcp/notreadonly"));
        assert!(!is_readonly("https://h/mcp/readonly/x"));
        assert!(!is_readonly("https://h/mcp/ReadOnly"));
        assert!(!is_readonly("https://h/mcp?path=/readonly"));
        assert!(!is_readonly("https://h/mcp#/readonly"));
        assert!(!is_readonly("https://readonly"));
        assert!(!is_readonly("/readonly"));
    }

    #[test]
    fn redacts_userinfo_query_and_fragment() {
        assert_eq!(
            redact("https://example.invalid/mcp"),
            "https://example.invalid/mcp"
        );
        assert_eq!(
            redact("https://alice:sk-1@example.invalid:8443/mcp?token=sk-2#sk-3"),
            "https://[REDACTED]@example.invalid:8443/mcp?[REDACTED]#[REDACTED]"
        );
        assert_eq!(redact("sk-live-1234"), "[REDACTED]");
    }
}
