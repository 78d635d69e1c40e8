//! Cleanup after an activity: delete its keys, and no one else's. Keys are found with SCAN on
//! every primary and deleted in pipelined batches; a key is only deleted when it is one the
//! console makes for a product of this activity under the configured prefix (see `is_ours`).

use super::progress::Progress;
use crate::db::Db;
use crate::db::activity as activities;
use crate::db::audit::{self, AuditEntry};
use crate::domain::zone::Zone;
use crate::domain::{ActivityId, Phase};
use crate::error::{Error, Result};
use crate::redis::{KeySpace, Keyed, RedisStore};
use chrono::Utc;
use redis::Value;
use serde::Serialize;

const BATCH: usize = 2000;

/// What cleanup did.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CleanupReport {
    pub activity: String,
    pub pattern: String,
    pub keys_found: usize,
    pub keys_deleted: i64,
    /// Keys the pattern matched that are not the console's (a product id it never makes, a
    /// name it never writes): left as they are, counted, the first [`SHOWN_LEFT`] named.
    pub keys_left: usize,
    pub keys_left_shown: Vec<String>,
}

/// How many of the keys left a report names.
pub const SHOWN_LEFT: usize = 10;

/// Whether `key` is one the console or its scripts make for a product of `activity`: a valid
/// product id, and one of the names of [`crate::redis::keys::SUFFIXES`] or the dry runs' lock.
/// SCAN's pattern only fixes the prefix and the activity: `{a3:p 1}:stock`, `{a3:}:stock` or
/// `{a3:p1}:foreign` match it and are somebody else's.
fn is_ours(keys: &KeySpace, activity: &ActivityId, key: &str) -> bool {
    keys.parse(key).is_some_and(|(a, p, suffix)| {
        a == activity.as_str()
            && crate::domain::ids::is_valid_id(p)
            && (crate::redis::keys::SUFFIXES.contains(&suffix)
                || suffix == crate::redis::keys::LOCK_SUFFIX)
    })
}

/// Who asks for a cleanup, and how.
pub struct CleanupOptions<'a> {
    /// Delete even inside the activity's window, or for an activity the database does not know.
    pub force: bool,
    pub actor: &'a str,
    /// Where a refusal shows the window's end (the operator's `--tz`).
    pub zone: Zone,
}

/// Deletes every key of `activity`. Refused inside the activity's window (or for an activity
/// the database does not know) unless `force`.
pub async fn cleanup(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: &CleanupOptions<'_>,
    progress: &dyn Progress,
) -> Result<CleanupReport> {
    let CleanupOptions { force, actor, zone } = *opts;
    super::guard::writable(redis, db, "delete keys")?;
    super::guard::redis_ready(redis, keys, activity, super::guard::Write::Cleanup).await?;
    match activities::get(db, activity).await? {
        Some(a) if a.phase(Utc::now()) == Phase::Live && !force => {
            return Err(Error::refused(format!(
                "activity '{activity}' is live until {}: refusing to delete its keys (add --force to delete them anyway)",
                zone.show(a.ends_at)
            )));
        }
        None if !force => {
            return Err(Error::refused(format!(
                "activity '{activity}' is not in the database, so its window cannot be checked: add --force to delete its keys anyway"
            )));
        }
        _ => {}
    }
    let pattern = keys.activity_pattern(activity);
    progress.update("scanning", 0, 1);
    let found = redis.scan(&pattern).await.map_err(|e| redis.error(&e))?;
    progress.update("scanning", 1, 1);
    let (ours, mut left): (Vec<String>, Vec<String>) =
        found.into_iter().partition(|k| is_ours(keys, activity, k));
    let keys_left = left.len();
    left.sort();
    left.truncate(SHOWN_LEFT);
    let total = ours.len();
    let mut deleted = 0i64;
    let mut failure = None;
    progress.update("deleting", 0, total);
    'batches: for (n, batch) in ours.chunks(BATCH).enumerate() {
        let items: Vec<Keyed> = batch
            .iter()
            .map(|k| Keyed::new(k, redis::cmd("UNLINK").arg(k).clone()))
            .collect();
        for r in redis.pipeline(items).await {
            match r {
                Ok(Value::Int(n)) => deleted += n,
                Ok(_) => {}
                Err(e) => {
                    failure = Some(redis.error(&e).context(format!(
                        "cleanup of '{activity}' stopped after {deleted} of {total} keys"
                    )));
                    break 'batches;
                }
            }
        }
        progress.update("deleting", (n * BATCH + batch.len()).min(total), total);
    }
    // The audit row is written even when Redis failed half way: some keys are gone.
    let mut entry = AuditEntry::new(actor, "cleanup", activity);
    entry.before_value = Some(total.to_string());
    entry.after_value = Some((i64::try_from(total).unwrap_or(i64::MAX) - deleted).to_string());
    entry.reason = if force {
        "cleanup --force".into()
    } else {
        "cleanup".into()
    };
    entry.detail = serde_json::json!({ "pattern": pattern, "deleted": deleted, "complete": failure.is_none(), "left": keys_left }).to_string();
    audit::record(db, &entry).await.map_err(|e| db.error(&e))?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(CleanupReport {
        activity: activity.to_string(),
        pattern,
        keys_found: total,
        keys_deleted: deleted,
        keys_left,
        keys_left_shown: left,
    })
}
