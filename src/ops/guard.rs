//! The guards every console write passes, in one place: read-only mode (the handles refuse a
//! write anyway; this says so before anything is read, naming what was refused) and the
//! activity's phase (a cancelled activity is not put back on sale; an ended one is not topped
//! up).

use crate::db::Db;
use crate::domain::{Activity, ActivityId, Phase, ProductId};
use crate::error::{Error, Result};
use crate::redis::preflight::Preflight;
use crate::redis::scripts::LuaScript;
use crate::redis::{KeySpace, RedisStore};

/// Refuses any write in read-only mode: `what` names it ("fix", "top up", ...).
pub fn writable(redis: &RedisStore, db: &Db, what: &str) -> Result<()> {
    if redis.read_only() || db.read_only() {
        return Err(Error::refused(format!(
            "read-only mode: refused to {what}; run without --read-only"
        )));
    }
    Ok(())
}

/// The scripts each write runs.
fn scripts_of(what: Write) -> Vec<&'static LuaScript> {
    use crate::redis::scripts::{FREEZE, HOLDINGS, PAUSE, RECORD, RESTORE, SET_STOCK, TOPUP};
    match what {
        Write::Pause | Write::Resume => vec![&PAUSE],
        Write::Topup => vec![&TOPUP],
        Write::Resolve => vec![&RECORD, &RESTORE],
        // A fix or a preheat may heal, rebuild, finish a top-up and write a pause back.
        Write::Fix | Write::Preheat => vec![
            &SET_STOCK, &RECORD, &RESTORE, &FREEZE, &HOLDINGS, &TOPUP, &PAUSE,
        ],
        Write::Cleanup => Vec::new(),
    }
}

/// The commands a write sends, as the check before it asks about them (`NAME arg ...`, the
/// key as `$`): EVALSHA and every command its scripts call, read from the scripts themselves
/// (so the check follows the scripts), and what the console sends itself.
fn commands_of(what: Write) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for script in scripts_of(what) {
        for part in script.body.split("redis.call('").skip(1) {
            if let Some((name, _)) = part.split_once('\'') {
                names.push(name.to_ascii_uppercase());
            }
        }
    }
    names.sort();
    names.dedup();
    let mut out: Vec<String> = Vec::new();
    if !scripts_of(what).is_empty() {
        out.push("EVALSHA 0000000000000000000000000000000000000000 1 $".into());
    }
    out.extend(names.iter().map(|n| with_arguments(n)));
    match what {
        Write::Preheat => out.push("SCRIPT LOAD x".into()),
        Write::Cleanup => out.push("UNLINK $".into()),
        _ => {}
    }
    out
}

/// A command with arguments of the right shape, so that ACL DRYRUN and acl_check_cmd judge it
/// as the real call (key patterns included).
fn with_arguments(name: &str) -> String {
    match name {
        "TIME" => name.to_string(),
        "SET" | "HGET" | "HMGET" | "HDEL" => {
            format!("{name} $ {}", if name == "SET" { "v" } else { "f" })
        }
        "HSET" | "HSETNX" => format!("{name} $ f v"),
        "HINCRBY" => "HINCRBY $ f 1".into(),
        "INCRBY" | "DECRBY" | "PEXPIREAT" | "PEXPIRE" => format!("{name} $ 1"),
        "XADD" => "XADD $ * f v".into(),
        _ => format!("{name} $"),
    }
}

/// Checks, before anything is written to the database or to Redis, that every primary the
/// write goes to is a writable primary and that its user may run what the write needs:
/// refused (exit 5) naming the node and the command otherwise. What could not be checked (a
/// command the server renamed or denies) is logged and the write goes on.
pub async fn redis_ready(
    redis: &RedisStore,
    keys: &KeySpace,
    activity: &ActivityId,
    what: Write,
) -> Result<()> {
    // A key of the activity's own keyspace (so key patterns in the ACL apply as to the real
    // ones) in a slot of each node (so a cluster routes the probe to that node).
    let key_on = |addr: &str| {
        (0..20_000).find_map(|n| {
            let product = ProductId::parse(&format!("probe{n}")).ok()?;
            let key = keys.product(activity, &product).stock.clone();
            let node = redis.node_for_key(&key).ok()?;
            (node.addr == addr).then_some(key)
        })
    };
    let owned = commands_of(what);
    let commands: Vec<&str> = owned.iter().map(String::as_str).collect();
    let checked = redis
        .preflight(key_on, &commands)
        .await
        .map_err(|e| redis.error(&e))?;
    let mut refused = Vec::new();
    let mut unreachable = Vec::new();
    let nodes = checked.len();
    for (addr, verdict) in checked {
        match verdict {
            Preflight::Ready => {}
            Preflight::Refused(why) => refused.push(why),
            Preflight::Unchecked(why) => {
                tracing::warn!(node = %addr, "before {}: {why}", what.described());
            }
            Preflight::Unreachable(why) => unreachable.push(why),
        }
    }
    // A pause stops sales: in an incident every product a node can still pause is worth
    // pausing, and the report names those it could not. Any other write, and a pause that no
    // node would take, stops here rather than leave its products half written.
    if !unreachable.is_empty() && (what != Write::Pause || unreachable.len() == nodes) {
        return Err(Error::unavailable(format!(
            "{} refused before any write (nothing changed in the database or in Redis): {}",
            what.described(),
            unreachable.join("; ")
        )));
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(Error::refused(format!(
        "{} refused before any write (nothing changed in the database or in Redis): {}",
        what.described(),
        refused.join("; ")
    )))
}

/// Refuses a write to an activity whose phase forbids it (one guard for every write).
pub fn phase_allows(activity: &Activity, what: Write) -> Result<()> {
    let id = &activity.activity_id;
    match (activity.phase(chrono::Utc::now()), what) {
        (Phase::Cancelled, Write::Cleanup | Write::Pause) => Ok(()),
        (Phase::Cancelled, _) => Err(Error::refused(format!(
            "activity '{id}' is cancelled: nothing of it is for sale, so {} is refused; `seckill-console cleanup {id}` deletes its keys",
            what.described()
        ))),
        (Phase::Ended, Write::Topup) => Err(Error::refused(format!(
            "activity '{id}' has ended: nothing more is sold, so a top-up is refused (neither the database nor Redis was changed)"
        ))),
        _ => Ok(()),
    }
}

/// The console's writes, for the phase guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    Fix,
    Preheat,
    Topup,
    Pause,
    Resume,
    Resolve,
    Cleanup,
}

impl Write {
    fn described(self) -> &'static str {
        match self {
            Write::Fix => "a fix (it would put stock back on sale)",
            Write::Preheat => "a preheat",
            Write::Topup => "a top-up",
            Write::Pause => "a pause",
            Write::Resume => "a resume (it would put stock back on sale)",
            Write::Resolve => "resolving compensation entries",
            Write::Cleanup => "a cleanup",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_commands_come_from_the_scripts() {
        let pause = commands_of(Write::Pause);
        assert!(pause[0].starts_with("EVALSHA"), "{pause:?}");
        assert!(pause.contains(&"HSET $ f v".to_string()), "{pause:?}");
        assert!(pause.contains(&"HMGET $ f".to_string()), "{pause:?}");
        let fix = commands_of(Write::Fix);
        for c in ["SET $ v", "XADD $ * f v", "DEL $", "HINCRBY $ f 1", "TIME"] {
            assert!(fix.contains(&c.to_string()), "{c}: {fix:?}");
        }
        assert!(commands_of(Write::Preheat).contains(&"SCRIPT LOAD x".to_string()));
        assert_eq!(commands_of(Write::Cleanup), ["UNLINK $"]);
    }
}
