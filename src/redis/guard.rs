//! The read-only gate: in `--read-only` mode the store sends nothing but the reads listed here.
//! Every way out of the store (one command, a pipeline, a command on every node) passes this
//! one check before anything reaches a server.

use redis::{Cmd, RedisError};

/// Commands that never write; in read-only mode nothing else is sent.
/// (HGETALL, HKEYS, HVALS and friends are reads too, but the console never sends them: their
/// work grows with the sale.)
pub const READ_COMMANDS: &[&str] = &[
    "GET",
    "MGET",
    "STRLEN",
    "EXISTS",
    "TYPE",
    "TTL",
    "PTTL",
    "HGET",
    "HMGET",
    // Only as `HRANDFIELD meta 64 WITHVALUES`: the meta hash whole, but never more than 64
    // fields of it.
    "HRANDFIELD",
    "HLEN",
    "HEXISTS",
    "HSCAN",
    "XRANGE",
    "XREVRANGE",
    // Never sent with BLOCK: the live view asks which streams moved and goes on.
    "XREAD",
    "XLEN",
    "SCAN",
    "PING",
    "INFO",
    "TIME",
    "DBSIZE",
    "ECHO",
    "SLOWLOG",
    "CLUSTER",
    "READONLY",
    "ASKING",
    "MEMORY",
    "ROLE",
    "LASTSAVE",
    "COMMAND",
];

fn command_name(cmd: &Cmd) -> String {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => String::from_utf8_lossy(name).to_ascii_uppercase(),
        _ => String::new(),
    }
}

/// True when `cmd` may be sent in read-only mode. `SCRIPT EXISTS` reads; `SCRIPT LOAD` does not
/// change data but is refused too, so a MONITOR shows nothing but reads.
pub fn is_read_command(cmd: &Cmd) -> bool {
    let name = command_name(cmd);
    if name == "SCRIPT" {
        return matches!(
            cmd.args_iter().nth(1),
            Some(redis::Arg::Simple(sub)) if sub.eq_ignore_ascii_case(b"EXISTS")
        );
    }
    if name == "SLOWLOG" || name == "MEMORY" || name == "CLUSTER" || name == "CONFIG" {
        // Only their reading subcommands are used; CLUSTER FAILOVER, CONFIG SET and friends
        // are not.
        return matches!(
            cmd.args_iter().nth(1),
            Some(redis::Arg::Simple(sub)) if [&b"GET"[..], b"LEN", b"USAGE", b"STATS", b"SLOTS",
                b"INFO", b"NODES", b"MYID", b"KEYSLOT", b"SHARDS"]
                .iter().any(|s| sub.eq_ignore_ascii_case(s))
        );
    }
    READ_COMMANDS.contains(&name.as_str())
}

/// The refusal of a write in read-only mode, as a type: the error mapping recognises it by
/// downcasting, never by its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyRefusal {
    /// The command that was not sent (its name only).
    pub command: String,
}

impl std::fmt::Display for ReadOnlyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "read-only mode: {} is a write command", self.command)
    }
}

impl std::error::Error for ReadOnlyRefusal {}

/// The error returned in place of sending `cmd`. The redis crate carries a foreign cause only
/// inside an I/O error; the command was never sent, so nothing retries it as a lost connection
/// (the store returns it before any node is touched).
pub(super) fn refusal(cmd: &Cmd) -> RedisError {
    RedisError::from(std::io::Error::other(ReadOnlyRefusal {
        command: command_name(cmd),
    }))
}

/// The read-only refusal inside `err`, if that is what it is.
pub fn as_refusal(err: &RedisError) -> Option<&ReadOnlyRefusal> {
    // The crate keeps the I/O error behind an `Arc<dyn Error>`, which is what `source` hands out.
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let source = std::error::Error::source(err)?;
    let io = match source.downcast_ref::<Shared>() {
        Some(shared) => shared.downcast_ref::<std::io::Error>()?,
        None => source.downcast_ref::<std::io::Error>()?,
    };
    io.get_ref()?.downcast_ref::<ReadOnlyRefusal>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_refused_by_type_and_reads_pass() {
        assert!(is_read_command(&redis::cmd("HMGET")));
        assert!(is_read_command(redis::cmd("SCRIPT").arg("EXISTS")));
        assert!(!is_read_command(redis::cmd("SCRIPT").arg("LOAD")));
        assert!(!is_read_command(redis::cmd("CLUSTER").arg("FAILOVER")));
        assert!(is_read_command(redis::cmd("CONFIG").arg("GET")));
        assert!(!is_read_command(redis::cmd("CONFIG").arg("SET")));
        assert!(!is_read_command(redis::cmd("CONFIG").arg("RESETSTAT")));
        assert!(!is_read_command(&redis::cmd("set")));
        let err = refusal(redis::cmd("hset").arg("k"));
        assert_eq!(as_refusal(&err).map(|r| r.command.as_str()), Some("HSET"));
        let other = RedisError::from(std::io::Error::other("connection reset"));
        assert!(as_refusal(&other).is_none());
        // A refusal is no connection error: nothing retries it or refreshes the topology.
        assert!(!super::super::node::is_connection_error(&err));
        assert!(super::super::node::is_connection_error(&other));
    }
}
