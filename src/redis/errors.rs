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

/// A TRYAGAIN names the slot of its keys: the keys of one slot split between two nodes (a
/// reshard that died half way) refuse every multi-key script, and the operator's remedy needs
/// the slot (issue 52: `pause` and `fix` failed naming nothing). Other errors pass unchanged.
pub(super) fn naming_the_slot(err: RedisError, slot: u16) -> RedisError {
    if server_error_kind(&err) != Some(ServerErrorKind::TryAgain) {
        return err;
    }
    RedisError::from((
        ErrorKind::Server(ServerErrorKind::TryAgain),
        "TRYAGAIN",
        format!(
            "the keys of slot {slot} are split between two nodes (the slot is left migrating: {}); `seckill-console ping` names both nodes; if no reshard is running, finish the move: redis-cli --cluster fix <any node>",
            describe(&err)
        ),
    ))
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
            // The client's own text already says "timed out": not said twice.
            format!(
                "Redis at {label} timed out{}",
                if detail.to_ascii_lowercase().trim() == "timed out" {
                    String::new()
                } else {
                    format!(": {detail}")
                }
            ),
        );
    }
    if node::is_connection_error(err) || err.kind() == ErrorKind::ClusterConnectionNotFound {
        return Error::unreachable(
            Service::Redis,
            format!("Redis at {label} is unreachable: {detail}"),
        );
    }
    // A server that wants a password the URL does not give: the console cannot use it, as
    // with wrong credentials (exit 3), and the operator's fix is the same.
    if err.code() == Some("NOAUTH") {
        return Error::unreachable(
            Service::Redis,
            format!(
                "Redis at {label} wants a password: {detail}; the --redis URL must carry the user and password"
            ),
        );
    }
    if speaks_another_protocol(err) {
        return Error::unreachable(
            Service::Redis,
            format!(
                "Redis at {label} answered in another protocol than Redis's ({detail}): is the URL's port a Redis server's?"
            ),
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

/// The connection's reply was not the Redis protocol at all (an HTTP or SSH server on the
/// port): the client's protocol parser failed, not the reading of a value.
fn speaks_another_protocol(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Parse
        && std::error::Error::source(err).is_some_and(|s| s.is::<redis::ParsingError>())
        && err.to_string().contains("Parse error")
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
