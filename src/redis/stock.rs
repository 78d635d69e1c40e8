//! The typed calls of the product scripts — `deduct.lua`, `restore.lua`, `set_stock.lua` and
//! `record.lua` — that the worker, preheat, the fixes and the tests share. Every caller goes
//! through these, so a reply code is read in one place.

use super::RedisStore;
use super::keys::ProductKeys;
use super::scripts::{DEDUCT, RECORD, RESTORE, SET_STOCK};
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
        .eval_each(&RESTORE, &calls)
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
    /// The stock now holds `stock`, changed by `change` (and the meta fields were written).
    Applied { stock: i64, change: i64 },
    /// A rebase found another offset than the caller saw (a write outside the scripts, or
    /// another console's correction, since): nothing was written.
    OffsetMoved(i64),
    /// The key no longer held what was read; nothing was written. What it holds now: None when
    /// absent, `<type>` for a non-string.
    Conflict(Option<Vec<u8>>),
}

/// The new stock of a `set`: a value, or the initial stock less what the counters hold as
/// deducted (the stock the scripts' own books imply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewStock {
    Value(i64),
    FromCounters { initial: i64 },
}

/// How `set_stock.lua` rewrites the stock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// A live integer stock: take away the offset from the counters, if it is still `offset`.
    Rebase { initial: i64, offset: i64 },
    /// An absent, corrupt or wrong-type stock (nothing deducts it): write `stock` if the key
    /// still holds what `guard` says ([`crate::domain::stock::StockValue::guard`]).
    Set { guard: Vec<u8>, stock: NewStock },
}

/// One rewrite of a product's stock and meta hash.
#[derive(Clone, Debug)]
pub struct StockWrite<'a> {
    pub keys: &'a ProductKeys,
    pub rewrite: Rewrite,
    /// Delete the meta hash before writing (it is corrupt), instead of updating it in place.
    pub reset_meta: bool,
    /// Expiry of every key of the product, ms since the epoch; None leaves expiries alone.
    pub expire_at: Option<i64>,
    /// Meta fields to write.
    pub meta: Vec<(&'static str, String)>,
}

impl StockWrite<'_> {
    fn args(&self) -> Vec<Vec<u8>> {
        let mut args = Vec::with_capacity(5 + 2 * self.meta.len());
        match &self.rewrite {
            Rewrite::Rebase { initial, offset } => {
                args.push(b"rebase".to_vec());
                args.push(initial.to_string().into_bytes());
                args.push(offset.to_string().into_bytes());
            }
            Rewrite::Set { guard, stock } => {
                args.push(b"set".to_vec());
                args.push(match stock {
                    NewStock::Value(v) => v.to_string().into_bytes(),
                    NewStock::FromCounters { initial } => format!("initial:{initial}").into_bytes(),
                });
                args.push(guard.clone());
            }
        }
        args.push(if self.reset_meta {
            b"reset".to_vec()
        } else {
            b"keep".to_vec()
        });
        args.push(
            self.expire_at
                .map(|t| t.to_string().into_bytes())
                .unwrap_or_default(),
        );
        for (k, v) in &self.meta {
            args.push(k.as_bytes().to_vec());
            args.push(v.as_bytes().to_vec());
        }
        args
    }
}

fn unknown_reply(what: &str, v: &impl std::fmt::Debug) -> RedisError {
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "a script returned an unknown reply",
        format!("{what}: {v:?}"),
    ))
}

/// Reads a reply of `set_stock.lua`.
pub fn parse_set_stock(reply: Value) -> RedisResult<SetStock> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::Int(n), Value::Int(c)] => Ok(SetStock::Applied {
                stock: *n,
                change: *c,
            }),
            [Value::Int(0), Value::Int(x)] => Ok(SetStock::OffsetMoved(*x)),
            [Value::Int(0), Value::BulkString(b)] => Ok(SetStock::Conflict(Some(b.clone()))),
            [Value::Int(0), Value::Nil] | [Value::Int(0)] => Ok(SetStock::Conflict(None)),
            _ => Err(unknown_reply("set_stock.lua", &items)),
        },
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("set_stock.lua", &other)),
    }
}

/// Runs many rewrites, pipelined per node; results keep the input order.
pub async fn set_stock_many(
    redis: &RedisStore,
    writes: &[StockWrite<'_>],
) -> Vec<RedisResult<SetStock>> {
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = writes
        .iter()
        .map(|w| (script_keys(w.keys), w.args()))
        .collect();
    redis
        .eval_each(&SET_STOCK, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_set_stock))
        .collect()
}

/// How `record.lua` records deductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordMode {
    /// The stock key is absent (it is written after the holdings).
    Rebuild,
    /// The stock is live: each recorded deduction also takes its units from it.
    Absorb,
}

/// One deduction to record: request id, user id, units.
pub type Deduction = (String, String, i64);

/// Deductions per call of `record.lua`: five writes each, so a call stays well under a
/// millisecond of Redis.
pub const RECORD_BATCH: usize = 50;

/// What `record.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Deductions written and their units (requests the ledger already held are skipped).
    Written { deductions: i64, units: i64 },
    /// The stock key did not meet the mode's condition (what it is); nothing was written.
    StockMoved(String),
}

/// Reads a reply of `record.lua`.
pub fn parse_record(reply: Value) -> RedisResult<Recorded> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(-1), kind] => Ok(Recorded::StockMoved(
                super::reply::text(kind).unwrap_or_default(),
            )),
            [Value::Int(n), Value::Int(u)] if *n >= 0 => Ok(Recorded::Written {
                deductions: *n,
                units: *u,
            }),
            _ => Err(unknown_reply("record.lua", &items)),
        },
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("record.lua", &other)),
    }
}

/// Records `deductions` of one product, [`RECORD_BATCH`] per call, one call after another
/// (each is idempotent, so a retry after an error is safe).
pub async fn record(
    redis: &RedisStore,
    keys: &ProductKeys,
    mode: RecordMode,
    expire_at: Option<i64>,
    deductions: &[Deduction],
) -> RedisResult<Recorded> {
    let (mut n, mut units) = (0, 0);
    for chunk in deductions.chunks(RECORD_BATCH) {
        let mut args: Vec<Vec<u8>> = vec![
            match mode {
                RecordMode::Rebuild => b"rebuild".to_vec(),
                RecordMode::Absorb => b"absorb".to_vec(),
            },
            expire_at
                .map(|t| t.to_string().into_bytes())
                .unwrap_or_default(),
        ];
        for (rid, uid, q) in chunk {
            args.push(rid.as_bytes().to_vec());
            args.push(uid.as_bytes().to_vec());
            args.push(q.to_string().into_bytes());
        }
        let reply = redis
            .eval_each(&RECORD, &[(script_keys(keys), args)])
            .await
            .pop()
            .unwrap_or_else(|| Err(RedisError::from((ErrorKind::Client, "not sent"))))?;
        match parse_record(reply)? {
            Recorded::Written {
                deductions,
                units: u,
            } => {
                n += deductions;
                units += u;
            }
            moved @ Recorded::StockMoved(_) => return Ok(moved),
        }
    }
    Ok(Recorded::Written {
        deductions: n,
        units,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_stock_replies() {
        let applied = Value::Array(vec![Value::Int(1), Value::Int(95), Value::Int(-7)]);
        assert_eq!(
            parse_set_stock(applied).ok(),
            Some(SetStock::Applied {
                stock: 95,
                change: -7
            })
        );
        let moved = Value::Array(vec![Value::Int(0), Value::Int(3)]);
        assert_eq!(parse_set_stock(moved).ok(), Some(SetStock::OffsetMoved(3)));
        let holds = Value::Array(vec![Value::Int(0), Value::BulkString(b"94".to_vec())]);
        assert_eq!(
            parse_set_stock(holds).ok(),
            Some(SetStock::Conflict(Some(b"94".to_vec())))
        );
        let gone = Value::Array(vec![Value::Int(0), Value::Nil]);
        assert_eq!(parse_set_stock(gone).ok(), Some(SetStock::Conflict(None)));
        assert!(parse_set_stock(Value::Int(-4)).is_err());
        assert!(parse_set_stock(Value::Array(vec![Value::Int(7)])).is_err());
    }

    #[test]
    fn record_replies() {
        let ok = Value::Array(vec![Value::Int(2), Value::Int(3)]);
        assert_eq!(
            parse_record(ok).ok(),
            Some(Recorded::Written {
                deductions: 2,
                units: 3
            })
        );
        let moved = Value::Array(vec![Value::Int(-1), Value::SimpleString("string".into())]);
        assert_eq!(
            parse_record(moved).ok(),
            Some(Recorded::StockMoved("string".into()))
        );
        assert!(parse_record(Value::Int(-4)).is_err());
    }

    #[test]
    fn rewrite_arguments() {
        let keys = crate::redis::KeySpace::default().product(
            &crate::domain::ActivityId::parse("a").expect("id"),
            &crate::domain::ProductId::parse("p").expect("id"),
        );
        let w = StockWrite {
            keys: &keys,
            rewrite: Rewrite::Rebase {
                initial: 100,
                offset: 7,
            },
            reset_meta: false,
            expire_at: Some(5),
            meta: vec![("limit", "2".into())],
        };
        let args: Vec<String> = w
            .args()
            .iter()
            .map(|a| String::from_utf8_lossy(a).into())
            .collect();
        assert_eq!(args, ["rebase", "100", "7", "keep", "5", "limit", "2"]);
        let w = StockWrite {
            rewrite: Rewrite::Set {
                guard: b"!".to_vec(),
                stock: NewStock::FromCounters { initial: 9 },
            },
            reset_meta: true,
            expire_at: None,
            meta: Vec::new(),
            ..w
        };
        let args: Vec<String> = w
            .args()
            .iter()
            .map(|a| String::from_utf8_lossy(a).into())
            .collect();
        assert_eq!(args, ["set", "initial:9", "!", "reset", ""]);
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

/// What `pause.lua` answered for one product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseReply {
    /// Written; whether the product was paused before.
    Written { was_paused: bool },
    /// The stock key is absent: nothing to pause (nothing written).
    Missing,
}

/// Reads a reply of `pause.lua`.
pub fn parse_pause(reply: Value) -> RedisResult<PauseReply> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::BulkString(b)] => Ok(PauseReply::Written {
                was_paused: b.as_slice() == b"1",
            }),
            [Value::Int(0), Value::BulkString(b)] if b.as_slice() == b"missing" => {
                Ok(PauseReply::Missing)
            }
            _ => Err(unknown_reply("pause.lua", &items)),
        },
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("pause.lua", &other)),
    }
}

/// Pauses (or resumes) each product given, pipelined per node; results keep the input order.
pub async fn set_paused_many(
    redis: &RedisStore,
    products: &[&ProductKeys],
    paused: bool,
) -> Vec<RedisResult<PauseReply>> {
    let flag = if paused { b"1".to_vec() } else { b"0".to_vec() };
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = products
        .iter()
        .map(|k| (script_keys(k), vec![flag.clone()]))
        .collect();
    redis
        .eval_each(&super::scripts::PAUSE, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_pause))
        .collect()
}

/// What `topup.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopupReply {
    /// Applied; the stock now.
    Applied(i64),
    /// This top-up id was applied before (a retry after a lost reply); the stock now.
    AlreadyApplied(i64),
    /// A negative change would take more than the stock holds; nothing written.
    TooFew(i64),
    /// The stock key is absent; nothing written.
    Missing,
}

/// Moves the stock (and the meta `initial`) by `change` under the top-up `id`.
pub async fn topup(
    redis: &RedisStore,
    keys: &ProductKeys,
    change: i64,
    id: &str,
) -> RedisResult<TopupReply> {
    let change = change.to_string();
    let reply = redis
        .eval(
            &super::scripts::TOPUP,
            &keys.script_keys(),
            &[change.as_str(), id],
        )
        .await?;
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::Int(n)] => Ok(TopupReply::Applied(*n)),
            [Value::Int(2), Value::Int(n)] => Ok(TopupReply::AlreadyApplied(*n)),
            [Value::Int(0), Value::Int(n)] => Ok(TopupReply::TooFew(*n)),
            [Value::Int(-1)] => Ok(TopupReply::Missing),
            _ => Err(unknown_reply("topup.lua", &items)),
        },
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("topup.lua", &other)),
    }
}
