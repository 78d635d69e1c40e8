//! The guards every console write passes, in one place: read-only mode (the handles refuse a
//! write anyway; this says so before anything is read, naming what was refused) and the
//! activity's phase (a cancelled activity is not put back on sale; an ended one is not topped
//! up).

use crate::db::Db;
use crate::domain::{Activity, Phase};
use crate::error::{Error, Result};
use crate::redis::RedisStore;

/// Refuses any write in read-only mode: `what` names it ("fix", "top up", ...).
pub fn writable(redis: &RedisStore, db: &Db, what: &str) -> Result<()> {
    if redis.read_only() || db.read_only() {
        return Err(Error::refused(format!(
            "read-only mode: refused to {what}; run without --read-only"
        )));
    }
    Ok(())
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
