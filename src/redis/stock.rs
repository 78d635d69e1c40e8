//! The typed calls of the buyers' scripts, `deduct.lua` and `restore.lua`, that the worker, the
//! compensation queue and the tests share. Every caller goes through these, so a reply code is
//! read in one place. The console's repairs are in `rewrite.rs`, the operator's controls in
//! `control.rs`.

use super::RedisStore;
use super::keys::ProductKeys;
use super::reply::{int_reply, script_keys, unexpected};
use super::scripts::{DEDUCT, RESTORE};
use redis::{RedisResult, Value};

/// What `deduct.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deducted {
    /// Success: the stock left after this deduction (or after the first one, for a retry).
    Remaining(i64),
    /// -1: the stock key is missing (not preheated, or lost).
    Missing,
    /// -2: not enough stock.
    SoldOut,
    /// -3: the per-user limit would be exceeded.
    UserLimit,
    /// -4: bad arguments.
    BadArgs,
    /// -5: the product is paused.
    Paused,
    /// -7: this request id's deduction was returned; it sells nothing again (a new purchase
    /// needs a new request id).
    Returned,
    /// -8: outside the sale window the product's meta hash carries.
    OutsideWindow,
}

impl Deducted {
    /// Reads a reply code of the contract; None for anything else.
    pub fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            n if n >= 0 => Deducted::Remaining(n),
            -1 => Deducted::Missing,
            -2 => Deducted::SoldOut,
            -3 => Deducted::UserLimit,
            -4 => Deducted::BadArgs,
            -5 => Deducted::Paused,
            -7 => Deducted::Returned,
            -8 => Deducted::OutsideWindow,
            _ => return None,
        })
    }
}

/// What `restore.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restored {
    /// Units returned by this call.
    Returned(i64),
    /// Returned earlier; nothing changed.
    AlreadyReturned,
    /// The stock key is missing; nothing changed.
    Missing,
    /// Bad arguments.
    BadArgs,
    /// The request id is not in the ledger; nothing changed.
    Unknown,
}

impl Restored {
    pub fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            n if n > 0 => Restored::Returned(n),
            0 => Restored::AlreadyReturned,
            -1 => Restored::Missing,
            -4 => Restored::BadArgs,
            -6 => Restored::Unknown,
            _ => return None,
        })
    }
}

/// Runs the deduction of `quantity` units for `user` under `request_id`.
pub async fn deduct(
    redis: &RedisStore,
    keys: &ProductKeys,
    request_id: &str,
    user: &str,
    quantity: &str,
) -> RedisResult<Deducted> {
    let reply = redis
        .eval(&DEDUCT, &keys.script_keys(), &[request_id, user, quantity])
        .await?;
    parse_deduct(reply)
}

/// Reads a reply of `deduct.lua` (for callers that send the script themselves, pipelined).
pub fn parse_deduct(reply: Value) -> RedisResult<Deducted> {
    let code = int_reply(reply)?;
    Deducted::from_code(code).ok_or_else(|| unexpected(code))
}

/// Returns the stock of the deduction `request_id`.
pub async fn restore(
    redis: &RedisStore,
    keys: &ProductKeys,
    request_id: &str,
) -> RedisResult<Restored> {
    let reply = redis
        .eval(&RESTORE, &keys.script_keys(), &[request_id])
        .await?;
    parse_restore(reply)
}

/// Reads a reply of `restore.lua`.
pub fn parse_restore(reply: Value) -> RedisResult<Restored> {
    let code = int_reply(reply)?;
    Restored::from_code(code).ok_or_else(|| unexpected(code))
}

/// Returns the stock of many deductions, `(keys, request id)` each, pipelined per node.
pub async fn restore_many(
    redis: &RedisStore,
    calls: &[(&ProductKeys, &str)],
) -> Vec<RedisResult<Restored>> {
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = calls
        .iter()
        .map(|(k, rid)| (script_keys(k), vec![rid.as_bytes().to_vec()]))
        .collect();
    redis
        .eval_each(&RESTORE, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_restore))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_replies() {
        assert_eq!(
            parse_restore(Value::Int(3)).ok(),
            Some(Restored::Returned(3))
        );
        assert_eq!(parse_restore(Value::Int(-6)).ok(), Some(Restored::Unknown));
        assert!(parse_restore(Value::Int(-9)).is_err());
        assert!(parse_restore(Value::Nil).is_err());
    }
}
