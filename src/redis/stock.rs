//! The typed calls of the stock scripts — `deduct.lua`, `restore.lua` and the compare-and-set
//! `set_stock.lua` — that the worker, preheat, the fixes and the tests share. Every caller goes
//! through these, so a reply code is read in one place.

use super::RedisStore;
use super::keys::ProductKeys;
use super::scripts::{DEDUCT, RESTORE, SET_STOCK};
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
        .eval_many(&RESTORE, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_restore))
        .collect()
}

fn script_keys(k: &ProductKeys) -> Vec<String> {
    k.script_keys().iter().map(|s| s.to_string()).collect()
}

/// What `set_stock.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetStock {
    /// The stock now holds this value (and the meta fields were written).
    Applied(i64),
    /// The key no longer held what was read; nothing was written. What it holds now: None when
    /// absent, `<type>` for a non-string.
    Conflict(Option<Vec<u8>>),
}

/// One compare-and-set of a product's stock and meta hash.
#[derive(Clone, Debug)]
pub struct StockWrite<'a> {
    pub keys: &'a ProductKeys,
    /// What the stock key must still hold: [`crate::domain::stock::StockValue::guard`].
    pub guard: Vec<u8>,
    pub stock: i64,
    /// Delete the meta hash before writing (it is corrupt), instead of updating it in place.
    pub reset_meta: bool,
    /// Meta fields to write.
    pub meta: Vec<(&'static str, String)>,
}

impl StockWrite<'_> {
    fn args(&self) -> Vec<Vec<u8>> {
        let mut args = Vec::with_capacity(3 + 2 * self.meta.len());
        args.push(self.guard.clone());
        args.push(self.stock.to_string().into_bytes());
        args.push(if self.reset_meta {
            b"reset".to_vec()
        } else {
            b"keep".to_vec()
        });
        for (k, v) in &self.meta {
            args.push(k.as_bytes().to_vec());
            args.push(v.as_bytes().to_vec());
        }
        args
    }
}

/// Reads a reply of `set_stock.lua`.
pub fn parse_set_stock(reply: Value) -> RedisResult<SetStock> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::Int(n)] => Ok(SetStock::Applied(*n)),
            [Value::Int(0), Value::BulkString(b)] => Ok(SetStock::Conflict(Some(b.clone()))),
            [Value::Int(0), Value::Nil] | [Value::Int(0)] => Ok(SetStock::Conflict(None)),
            _ => Err(RedisError::from((
                ErrorKind::UnexpectedReturnType,
                "set_stock.lua returned an unknown reply",
                format!("{items:?}"),
            ))),
        },
        Value::Int(code) => Err(unexpected(code)),
        other => Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "set_stock.lua returned an unknown reply",
            format!("{other:?}"),
        ))),
    }
}

/// Runs many compare-and-sets, pipelined per node; results keep the input order.
pub async fn set_stock_many(
    redis: &RedisStore,
    writes: &[StockWrite<'_>],
) -> Vec<RedisResult<SetStock>> {
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = writes
        .iter()
        .map(|w| (vec![w.keys.stock.clone(), w.keys.meta.clone()], w.args()))
        .collect();
    redis
        .eval_many(&SET_STOCK, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_set_stock))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_stock_replies() {
        let applied = Value::Array(vec![Value::Int(1), Value::Int(95)]);
        assert_eq!(parse_set_stock(applied).ok(), Some(SetStock::Applied(95)));
        let moved = Value::Array(vec![Value::Int(0), Value::BulkString(b"94".to_vec())]);
        assert_eq!(
            parse_set_stock(moved).ok(),
            Some(SetStock::Conflict(Some(b"94".to_vec())))
        );
        let gone = Value::Array(vec![Value::Int(0), Value::Nil]);
        assert_eq!(parse_set_stock(gone).ok(), Some(SetStock::Conflict(None)));
        assert!(parse_set_stock(Value::Int(-4)).is_err());
        assert!(parse_set_stock(Value::Array(vec![Value::Int(7)])).is_err());
    }

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
