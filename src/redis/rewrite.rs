//! The console's rewrites of a product from database truth: `set_stock.lua` (the stock by its
//! offset from the counters, or an absent or corrupt key) and `record.lua` (deductions that live
//! orders prove and the ledger lacks). Preheat and fix call these; each reply is read here.

use super::RedisStore;
use super::keys::ProductKeys;
use super::reply::{script_keys, unexpected, unknown_reply};
use super::scripts::{RECORD, SET_STOCK};
use redis::{ErrorKind, RedisError, RedisResult, Value};

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
}
