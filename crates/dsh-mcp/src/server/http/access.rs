//! The checks every request passes before anything else looks at it: its
//! bearer token, its `Host` (against DNS rebinding) and its `Origin`
//! (against pages of other sites). Pure functions of the headers, so that
//! the front runs them all before it reads a body or touches a session.

use hyper::HeaderMap;
use hyper::header::{AUTHORIZATION, HOST, ORIGIN};
use hyper::http::uri::{Authority, Uri};

use crate::wording;

/// The origins every server accepts: pages served from loopback.
pub(crate) const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// The hosts a loopback server always accepts.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why a request was refused at the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No token, another scheme, or the wrong token (401).
    Unauthorized,
    /// A `Host` that is missing or cannot be read (400).
    BadHost,
    /// A `Host` that is not accepted (403).
    HostNotAllowed,
    /// An `Origin` that cannot be read, or is not accepted (403).
    OriginNotAllowed,
}

impl Refused {
    /// The message of the JSON-RPC error it is answered with.
    pub(crate) fn message(&self) -> &'static str {
        match self {
            Self::Unauthorized => wording::HTTP_UNAUTHORIZED,
            Self::BadHost => wording::HTTP_BAD_HOST,
            Self::HostNotAllowed => wording::HTTP_HOST_NOT_ALLOWED,
            Self::OriginNotAllowed => wording::HTTP_ORIGIN_NOT_ALLOWED,
        }
    }
}

/// What a server accepts.
#[derive(Clone, Debug)]
pub(crate) struct AccessCheck {
    token: Option<String>,
    /// Empty: any host (beyond loopback, without `--allowed-host`).
    hosts: Vec<Allowed>,
    origins: Vec<AllowedOrigin>,
}

/// An accepted `Host`: a name (lower case, no brackets) and its port, or
/// any port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Allowed {
    host: String,
    port: Option<u16>,
}

/// An accepted origin: scheme, host and port (`None` for `:*`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct AllowedOrigin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

/// Where a server listens: what decides which hosts it accepts by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// On a loopback address: the loopback names are accepted besides the
    /// listed hosts.
    Loopback,
    /// Beyond loopback: only the listed hosts, or any when none is listed
    /// (the token guards the server).
    Beyond,
}

impl Reach {
    /// The reach of a server listening on `ip`.
    pub(crate) fn of(ip: std::net::IpAddr) -> Self {
        if ip.is_loopback() { Self::Loopback } else { Self::Beyond }
    }
}

impl AccessCheck {
    /// The gate of a server: its token, the hosts it accepts (on loopback
    /// the loopback ones besides `hosts`; beyond it, any when `hosts` is
    /// empty) and the origins (the loopback ones besides `origins`).
    /// Entries that cannot be read accept nothing.
    pub(crate) fn new(token: Option<&str>, reach: Reach, hosts: &[String], origins: &[String]) -> Self {
        let defaults = match reach {
            Reach::Loopback => &LOOPBACK_HOSTS[..],
            Reach::Beyond => &[],
        };
        let hosts = defaults
            .iter()
            .copied()
            .chain(hosts.iter().map(String::as_str))
            .filter_map(parse_allowed_host)
            .collect();
        let origins = LOOPBACK_ORIGINS
            .iter()
            .copied()
            .chain(origins.iter().map(String::as_str))
            .filter_map(parse_allowed_origin)
            .collect();
        Self {
            token: token.map(str::to_owned),
            hosts,
            origins,
        }
    }

    /// Every check, in the order a refusal is reported: token, `Host`, `Origin`.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Refused> {
        if !self.authorized(headers) {
            return Err(Refused::Unauthorized);
        }
        self.check_host(headers)?;
        self.check_origin(headers)
    }

    /// `Authorization: Bearer <token>`, the scheme in any case (RFC 9110
    /// §11.1), compared without stopping at the first difference.
    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else { return true };
        let Some(value) = headers.get(AUTHORIZATION).and_then(|value| value.to_str().ok()) else {
            return false;
        };
        let Some((scheme, given)) = value.trim().split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer") && same_secret(given.trim().as_bytes(), token.as_bytes())
    }

    fn check_host(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let mut values = headers.get_all(HOST).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(Refused::BadHost);
        };
        let authority = value
            .to_str()
            .ok()
            .and_then(|text| text.parse::<Authority>().ok())
            .ok_or(Refused::BadHost)?;
        if self.hosts.is_empty() {
            return Ok(());
        }
        let host = normalize(authority.host());
        let port = authority.port_u16();
        let accepted = self
            .hosts
            .iter()
            .any(|allowed| allowed.host == host && allowed.port.is_none_or(|allowed| Some(allowed) == port));
        if accepted { Ok(()) } else { Err(Refused::HostNotAllowed) }
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let mut values = headers.get_all(ORIGIN).iter();
        let Some(value) = values.next() else { return Ok(()) };
        if values.next().is_some() {
            return Err(Refused::OriginNotAllowed);
        }
        let origin = value
            .to_str()
            .ok()
            .and_then(parse_origin)
            .ok_or(Refused::OriginNotAllowed)?;
        let accepted = self.origins.iter().any(|allowed| {
            allowed.scheme == origin.scheme
                && allowed.host == origin.host
                && allowed.port.is_none_or(|port| Some(port) == origin.port)
        });
        if accepted {
            Ok(())
        } else {
            Err(Refused::OriginNotAllowed)
        }
    }
}

/// Compares without stopping at the first difference.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len() && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// A host as compared: lower case, without the brackets of an IPv6 address.
fn normalize(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// `name` (any port) or `name:port`.
fn parse_allowed_host(entry: &str) -> Option<Allowed> {
    let entry = entry.trim();
    if entry.is_empty() {
        return None;
    }
    // A bare IPv6 address (`::1`) is not an authority.
    if entry.contains("::") && !entry.starts_with('[') {
        return Some(Allowed {
            host: normalize(entry),
            port: None,
        });
    }
    let authority = entry.parse::<Authority>().ok()?;
    Some(Allowed {
        host: normalize(authority.host()),
        port: authority.port_u16(),
    })
}

/// An `Origin` value (`scheme://host[:port]`), its port made explicit from
/// the scheme when absent. `null` is no origin we accept.
fn parse_origin(value: &str) -> Option<AllowedOrigin> {
    let uri = value.trim().parse::<Uri>().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    let port = authority.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    });
    Some(AllowedOrigin {
        host: normalize(authority.host()),
        port: Some(port?),
        scheme,
    })
}

/// `scheme://host:port`, `scheme://host:*` (any port) or `scheme://host`
/// (the scheme's own port).
fn parse_allowed_origin(entry: &str) -> Option<AllowedOrigin> {
    match entry.trim().strip_suffix(":*") {
        Some(base) => {
            let uri = base.parse::<Uri>().ok()?;
            let authority = uri.authority()?;
            if authority.port().is_some() {
                return None;
            }
            Some(AllowedOrigin {
                scheme: uri.scheme_str()?.to_ascii_lowercase(),
                host: normalize(authority.host()),
                port: None,
            })
        }
        None => parse_origin(entry),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hyper::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn loopback() -> AccessCheck {
        AccessCheck::new(
            None,
            Reach::Loopback,
            &["mcp.example.com".to_owned(), "pinned.example:8443".to_owned()],
            &["https://app.example.com".to_owned(), "http://dev.example:*".to_owned()],
        )
    }

    #[test]
    fn hosts_on_loopback_are_the_loopback_names_and_the_listed_ones() {
        let access = loopback();
        for host in [
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:9",
            "LOCALHOST",
            "mcp.example.com:1234",
            "pinned.example:8443",
        ] {
            assert_eq!(access.check(&headers(&[("host", host)])), Ok(()), "{host}");
        }
        for (host, refused) in [
            ("evil.example.com", Refused::HostNotAllowed),
            ("localhost.evil.example", Refused::HostNotAllowed),
            ("pinned.example:8444", Refused::HostNotAllowed),
            ("not a host", Refused::BadHost),
        ] {
            assert_eq!(access.check(&headers(&[("host", host)])), Err(refused), "{host}");
        }
        assert_eq!(access.check(&headers(&[])), Err(Refused::BadHost));
        assert_eq!(
            access.check(&headers(&[("host", "localhost"), ("host", "evil.example.com")])),
            Err(Refused::BadHost)
        );
        // Beyond loopback with no list: any host (the token guards the server).
        let open = AccessCheck::new(None, Reach::Beyond, &[], &[]);
        assert_eq!(open.check(&headers(&[("host", "anything.example:1")])), Ok(()));
    }

    #[test]
    fn origins_are_the_loopback_pages_and_the_listed_ones() {
        let access = loopback();
        for origin in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "http://[::1]:5173",
            "https://app.example.com",
            "https://app.example.com:443",
            "http://dev.example:9999",
        ] {
            let request = headers(&[("host", "localhost"), ("origin", origin)]);
            assert_eq!(access.check(&request), Ok(()), "{origin}");
        }
        for origin in [
            "http://evil.example.com",
            "https://localhost:3000",
            "https://app.example.com:8443",
            "http://app.example.com",
            "null",
            "not an origin",
        ] {
            let request = headers(&[("host", "localhost"), ("origin", origin)]);
            assert_eq!(access.check(&request), Err(Refused::OriginNotAllowed), "{origin}");
        }
    }

    #[test]
    fn the_token_is_a_bearer_token_whatever_the_case_of_the_scheme() {
        let access = AccessCheck::new(Some("0123456789abcdef0123456789abcdef"), Reach::Loopback, &[], &[]);
        let with = |authorization: &str| headers(&[("host", "localhost"), ("authorization", authorization)]);
        for accepted in [
            "Bearer 0123456789abcdef0123456789abcdef",
            "bearer 0123456789abcdef0123456789abcdef",
            "BEARER  0123456789abcdef0123456789abcdef ",
        ] {
            assert_eq!(access.check(&with(accepted)), Ok(()), "{accepted}");
        }
        for refused in [
            "Bearer 0123456789abcdef0123456789abcdeF",
            "Bearer 0123456789abcdef0123456789abcde",
            "Basic 0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
            "Bearer",
        ] {
            assert_eq!(access.check(&with(refused)), Err(Refused::Unauthorized), "{refused}");
        }
        // The token is checked first: a request without it learns nothing else.
        let evil = headers(&[("host", "evil.example.com")]);
        assert_eq!(access.check(&evil), Err(Refused::Unauthorized));
    }
}
