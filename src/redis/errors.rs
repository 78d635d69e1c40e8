//! Redis errors as the console's errors: one line without secrets, and the kind that decides
//! the exit code (unreachable and timeouts 3, an ACL denial or a read-only refusal 5).

use super::{guard, node};
use crate::error::{Error, ErrorKind as Kind, Service};
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// The server's error class (MOVED, NOSCRIPT, ...), when the server answered with one.
pub(super) fn server_error_kind(err: &RedisError) -> Option<ServerErrorKind> {
    match err.kind() {
        ErrorKind::Server(k) => Some(k),
        _ => None,
    }
}

/// One line about a Redis error, without anything that could be a secret.
pub fn describe(err: &RedisError) -> String {
    let text = err.to_string();
    let line = text.lines().next().unwrap_or("").trim();
    crate::redact::redact_text(line)
}

/// Maps a Redis error to the console's error kinds: unreachable and timeouts are `unavailable`
/// (exit 3), an ACL denial is `refused` (exit 5).
pub fn redis_error(label: &str, err: &RedisError) -> Error {
    let detail = describe(err);
    if let Some(refusal) = guard::as_refusal(err) {
        return Error::refused(format!(
            "read-only mode: refused to send a write to Redis ({refusal})"
        ));
    }
    if err.is_timeout() {
        return Error::unreachable(
            Service::Redis,
            format!("Redis at {label} timed out: {detail}"),
        );
    }
    if node::is_connection_error(err) || err.kind() == ErrorKind::ClusterConnectionNotFound {
        return Error::unreachable(
            Service::Redis,
            format!("Redis at {label} is unreachable: {detail}"),
        );
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed => Error::unreachable(
            Service::Redis,
            format!(
                "Redis at {label} refused the credentials: {detail}; check the user and password in the URL"
            ),
        ),
        ErrorKind::Server(ServerErrorKind::NoPerm) => Error::new(
            Kind::Refused,
            format!(
                "Redis at {label} denied permission: {detail}; the ACL user needs this command and key"
            ),
        ),
        ErrorKind::Server(
            ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain,
        ) => Error::unreachable(
            Service::Redis,
            format!("Redis at {label} is not serving: {detail}"),
        ),
        // A primary demoted under the console (a failover in progress): nothing was written;
        // the next call finds the new primary.
        ErrorKind::Server(ServerErrorKind::ReadOnly) => Error::unreachable(
            Service::Redis,
            format!(
                "Redis at {label} answered READONLY: the node is a replica now (a failover?); nothing was written, try again"
            ),
        ),
        _ => Error::internal(format!("Redis at {label} answered with an error: {detail}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demoted_primary_is_unavailable_not_internal() {
        let e = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "READONLY",
            "You can't write against a read only replica.".to_string(),
        ));
        let mapped = redis_error("redis://x:1", &e);
        assert_eq!(mapped.kind, Kind::Unavailable, "{}", mapped.message);
        assert_eq!(mapped.kind.exit_code(), 3);
    }
}
