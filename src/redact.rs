//! Connection URLs carry passwords. They live in [`SecretUrl`], whose Display and Debug show the
//! redacted form only; the raw string is reachable through one explicit method used where a
//! connection is opened.

use std::fmt;

/// Replaces the password (and for safety any user info with a colon) of a URL with `***`, and
/// the value of every query parameter that names a secret (`?password=`, `sslpassword=`, a
/// token). Works on strings that do not parse as URLs too, because a malformed URL in an error
/// message may still hold a password.
pub fn redact_url(raw: &str) -> String {
    let shown = redact_user_info(raw);
    if shown.contains("://") {
        redact_query(&shown)
    } else {
        shown
    }
}

fn redact_user_info(raw: &str) -> String {
    // An `@` past the authority (after a `/`, `?` or `#`): a password holding one of those
    // unescaped, which a parser reads as the start of a path, a query or a fragment (and may
    // then parse `redis://u:12/x@h` as host `u`, port 12, with no password at all).
    if let Some(i) = raw.find("://") {
        let rest = &raw[i + 3..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if rest[authority_end..].contains('@') {
            return redact_loose(raw);
        }
    }
    if let Ok(mut url) = url::Url::parse(raw) {
        if url.password().is_some() && url.set_password(Some("***")).is_ok() {
            return url.to_string();
        }
        if url.password().is_none() {
            // A user name alone is not a secret.
            return raw.to_string();
        }
    }
    redact_loose(raw)
}

/// Fallback: everything between `scheme://` and the last `@` may be a secret.
fn redact_loose(raw: &str) -> String {
    let (scheme, rest) = match raw.find("://") {
        Some(i) => (&raw[..i + 3], &raw[i + 3..]),
        None => ("", raw),
    };
    match rest.rfind('@') {
        Some(at) => {
            let user_info = &rest[..at];
            let user = user_info.split([':', '/', '?', '#']).next().unwrap_or("");
            let shown = if user_info.contains(':') {
                format!("{user}:***")
            } else {
                // A lone token before `@` is a password in `redis://token@host` style URLs.
                "***".to_string()
            };
            format!("{scheme}{shown}{}", &rest[at..])
        }
        None => raw.to_string(),
    }
}

/// True for a query parameter whose value is a secret: `password`, `sslpassword`, `pass`,
/// `passwd`, `pwd`, a `secret` or a `token`, in any case.
fn secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["pass", "pwd", "secret", "token"]
        .iter()
        .any(|word| key.contains(word))
}

/// The query's secret values as `***`, the rest of the text as it was.
fn redact_query(url: &str) -> String {
    let Some(q) = url.find('?') else {
        return url.to_string();
    };
    let end = url[q..].find('#').map_or(url.len(), |i| q + i);
    let pairs: Vec<String> = url[q + 1..end]
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if secret_key(key) && !value.is_empty() => format!("{key}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{}?{}{}", &url[..q], pairs.join("&"), &url[end..])
}

/// A URL that may hold a password.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl {
    raw: String,
    redacted: String,
}

impl SecretUrl {
    pub fn new(raw: impl Into<String>) -> Self {
        let raw = raw.into();
        let redacted = redact_url(&raw);
        SecretUrl { raw, redacted }
    }

    /// The URL with its password; only for opening a connection.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// The URL as it may be shown.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The password inside, if any (so output can be checked against it).
    pub fn password(&self) -> Option<String> {
        url::Url::parse(&self.raw)
            .ok()
            .and_then(|u| u.password().map(str::to_string))
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretUrl({:?})", self.redacted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_passwords() {
        assert_eq!(
            redact_url("redis://alice:s3cret@10.0.0.1:6379/0"),
            "redis://alice:***@10.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("postgres://u:p%40ss@db/x"),
            "postgres://u:***@db/x"
        );
        assert_eq!(redact_url("rediss://:pw@h:1"), "rediss://:***@h:1");
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(redact_url("sqlite:/tmp/x.db"), "sqlite:/tmp/x.db");
    }

    #[test]
    fn hides_passwords_in_malformed_urls() {
        let shown = redact_url("redis://bob:hunter2@[bad");
        assert!(!shown.contains("hunter2"), "{shown}");
        let shown = redact_url("redis://x:hunter2@host:99999999");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            redact_url("postgres://postgres@h/db"),
            "postgres://postgres@h/db"
        );
    }

    #[test]
    fn hides_passwords_given_as_query_parameters() {
        assert_eq!(
            redact_url("postgres://db/shop?user=app&password=S3cret"),
            "postgres://db/shop?user=app&password=***"
        );
        assert_eq!(
            redact_url("postgres://u@h/db?sslmode=require&sslpassword=k3y&application_name=x"),
            "postgres://u@h/db?sslmode=require&sslpassword=***&application_name=x"
        );
        assert_eq!(
            redact_url("mysql://h/db?PASSWORD=a#frag"),
            "mysql://h/db?PASSWORD=***#frag"
        );
        // Nothing secret in the query: the URL as it was.
        assert_eq!(
            redact_url("postgres://h/db?sslmode=require"),
            "postgres://h/db?sslmode=require"
        );
    }

    #[test]
    fn hides_passwords_holding_a_slash_a_question_mark_or_a_hash() {
        for raw in [
            "redis://app:Xy/9#k@10.0.0.1:6379",
            "redis://u:12/x@h",
            "redis://u:12#x@h:6379/0",
            "postgres://app:a?b@db/shop",
            "redis://:pa/ss@h",
        ] {
            let shown = redact_url(raw);
            let secret = raw
                .split("://")
                .nth(1)
                .and_then(|r| r.rsplit_once('@'))
                .map(|(info, _)| info.split_once(':').map_or(info, |(_, pw)| pw))
                .unwrap_or_default();
            assert!(!shown.contains(secret), "{raw} -> {shown}");
            assert!(
                shown.ends_with(raw.rsplit_once('@').map_or("", |(_, h)| h)),
                "{shown}"
            );
        }
    }

    #[test]
    fn secret_url_never_prints_the_password() {
        let s = SecretUrl::new("redis://a:topsecret@h:1");
        assert!(!format!("{s} {s:?}").contains("topsecret"));
        assert_eq!(s.password().as_deref(), Some("topsecret"));
    }
}

/// Redacts every URL-looking token (anything with `://`) in free text, e.g. a library's error
/// message or a usage error that echoes an argument.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if token.contains("://") {
            // Quotes and brackets around a URL stay outside the redaction.
            let start = token.find(|c: char| c.is_ascii_alphanumeric()).unwrap_or(0);
            let end = token
                .char_indices()
                .rfind(|(_, c)| !matches!(c, '\'' | '"' | '`' | ')' | ']' | ',' | '.' | ';'))
                .map_or(token.len(), |(i, c)| i + c.len_utf8())
                .max(start);
            out.push_str(&token[..start]);
            out.push_str(&redact_url(&token[start..end]));
            out.push_str(&token[end..]);
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() {
            flush(&mut token, &mut out);
            out.push(c);
        } else {
            token.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

#[cfg(test)]
mod text_tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn a_password_never_survives_redaction(
            user in "[a-z]{0,8}",
            pw in "[A-Za-z0-9][A-Za-z0-9/?#]{5,15}",
            host in "[a-z0-9.]{1,12}",
            scheme in "(redis|rediss|postgres|mysql)",
            tail in "(/[a-z0-9]{0,6})?",
            before in "\\PC{0,30}",
            after in "\\PC{0,30}",
        ) {
            let url = format!("{scheme}://{user}:{pw}@{host}:6379{tail}");
            proptest::prop_assert!(!redact_url(&url).contains(&pw));
            let text = format!("error: cannot reach '{url}', retrying");
            proptest::prop_assert!(!redact_text(&text).contains(&pw));
            // Among any other text, too (text that holds neither the password nor a URL).
            proptest::prop_assume!(
                ![&before, &after]
                    .iter()
                    .any(|t| t.contains(&pw) || t.contains("://"))
            );
            let text = format!("{before} {url} {after}");
            let shown = redact_text(&text);
            proptest::prop_assert!(!shown.contains(&pw), "{}", shown);
            // Only the password went: the text around the URL is kept as it was.
            proptest::prop_assert!(shown.starts_with(&format!("{before} ")), "{}", shown);
            proptest::prop_assert!(shown.ends_with(&format!(" {after}")), "{}", shown);
        }

        /// Text without a URL is left exactly as it is, and so are URLs without user info
        /// (quotes and brackets around them included).
        #[test]
        fn text_without_a_secret_is_unchanged(
            s in "\\PC{0,80}|[ -~]{0,10} ['\"(]?[a-z]{1,5}://[a-z0-9./:?#'\"),;\\]]{0,20} [ -~]{0,10}"
        ) {
            if !s.contains("://") {
                proptest::prop_assert_eq!(redact_text(&s), s.clone());
            }
            if !s.contains('@') {
                proptest::prop_assert_eq!(redact_url(&s), s.clone());
                proptest::prop_assert_eq!(redact_text(&s), s.clone());
            }
        }
    }

    /// Found by the property above: a token with `://` whose last character takes more than
    /// one byte made `redact_text` cut inside that character (it added one byte, not the
    /// character's length, after the last kept character) and panic.
    #[test]
    fn a_url_token_ending_in_a_multibyte_character() {
        for text in ["see http://example.com/café", "://\u{591}"] {
            assert_eq!(redact_text(text), text);
        }
    }

    #[test]
    fn redacts_urls_inside_text() {
        let t = redact_text("error: unexpected argument 'redis://u:pw123@h:1' found");
        assert_eq!(t, "error: unexpected argument 'redis://u:***@h:1' found");
    }
}
