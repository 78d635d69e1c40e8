//! The deduction path: the typed call of `deduct.lua` and `restore.lua` that the worker, the
//! fixes and the tests share.

use super::RedisStore;
use super::keys::ProductKeys;
use super::scripts::{DEDUCT, RESTORE};
use redis::{ErrorKind, RedisError, RedisResult, Value};

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

fn int_reply(v: Value) -> RedisResult<i64> {
    match v {
        Value::Int(i) => Ok(i),
        other => Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "script returned a non-integer",
            format!("{other:?}"),
        ))),
    }
}

fn unexpected(code: i64) -> RedisError {
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "script returned an unknown code",
        code.to_string(),
    ))
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
    let code = int_reply(reply)?;
    Restored::from_code(code).ok_or_else(|| unexpected(code))
}
