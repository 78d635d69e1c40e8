//! The console's rewrites of a product from database truth, and their replies:
//! `set_stock.lua` (the stock by its offset from the counters, or an absent or corrupt key at
//! the end of a rebuild), `record.lua` (deductions that live orders prove and the ledger
//! lacks), `freeze.lua` (a rebuild's hold on a product) and `holdings.lua` (buyers' holdings
//! rebuilt from the ledger). Preheat and fix call these.
//!
//! Every call carries the guard of what the console read: the meta `rev` (another console's
//! write since makes it a conflict) or the token of the rebuild holding the product.

use super::RedisStore;
use super::keys::ProductKeys;
use super::reply::{bytes, script_keys, text, unexpected, unknown_reply};
use super::scripts::{FIRST, FREEZE, HOLDINGS, RECORD, SET_STOCK};
use redis::{ErrorKind, RedisError, RedisResult, Value};

/// Why a product is not the console's to write now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// Another console changed it since the read (its `rev` now).
    RevMoved(Vec<u8>),
    /// A rebuild holds it (the marker, empty when this call's hold was lost).
    Frozen(String),
    /// A top-up is between its two writes (the marker).
    Topup(String),
    /// A piece of it vanished since the read: only a rebuild may bring it back.
    Lost(String),
}

impl Held {
    /// What an operator reads.
    pub fn shown(&self) -> String {
        match self {
            Held::RevMoved(rev) => format!(
                "another console wrote to it since it was read (rev now '{}'): nothing written; read it again",
                crate::domain::stock::shown(rev)
            ),
            Held::Frozen(m) if m.is_empty() => {
                "its rebuild's hold was taken over by another console: nothing more written".into()
            }
            Held::Frozen(m) => format!(
                "another console is rebuilding it (hold '{}'): nothing written; try again when it is done",
                crate::domain::stock::shown(m.as_bytes())
            ),
            Held::Topup(m) => format!(
                "a top-up is between its two writes ('{}'): nothing written; try again in a moment",
                crate::domain::stock::shown(m.as_bytes())
            ),
            Held::Lost(what) => {
                format!("{what} vanished since it was read: nothing written; fix rebuilds it")
            }
        }
    }
}

/// Reads the `{2, rev}` and `{4, why, detail}` replies every guarded script shares.
fn held_reply(items: &[Value]) -> Option<Held> {
    match items {
        [Value::Int(2), rev] => Some(Held::RevMoved(bytes(rev).unwrap_or_default())),
        [Value::Int(4), why, detail] => {
            let detail = text(detail).unwrap_or_default();
            Some(match text(why).as_deref() {
                Some("frozen") => Held::Frozen(detail),
                Some("topup") => Held::Topup(detail),
                _ => Held::Lost(detail),
            })
        }
        _ => None,
    }
}

/// What `set_stock.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetStock {
    /// The stock now holds `stock`, changed by `change`, and the meta `rev` is `rev`.
    Applied { stock: i64, change: i64, rev: i64 },
    /// A rebase found another offset than the caller saw (a write outside the scripts since):
    /// nothing was written.
    OffsetMoved(i64),
    /// The key no longer held what was read; nothing was written. What it holds now: None when
    /// absent, `<type>` for a non-string.
    Conflict(Option<Vec<u8>>),
    /// Not the console's to write now; nothing was written.
    Held(Held),
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
    /// A live integer stock: take away the offset from the counters, if it is still `offset`,
    /// and put `release` units the counters held without a ledger entry back on sale.
    Rebase {
        initial: i64,
        offset: i64,
        release: i64,
    },
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
    /// The meta `rev` as read (empty when absent).
    pub rev: Vec<u8>,
    /// The token of the rebuild holding the product (a `set` that ends the hold).
    pub token: Option<String>,
    /// Meta fields to write.
    pub meta: Vec<(&'static str, String)>,
}

impl StockWrite<'_> {
    fn args(&self) -> Vec<Vec<u8>> {
        let mut args = Vec::with_capacity(8 + 2 * self.meta.len());
        let mut release = 0;
        match &self.rewrite {
            Rewrite::Rebase {
                initial,
                offset,
                release: r,
            } => {
                args.push(b"rebase".to_vec());
                args.push(initial.to_string().into_bytes());
                args.push(offset.to_string().into_bytes());
                release = *r;
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
        args.push(self.rev.clone());
        args.push(self.token.clone().unwrap_or_default().into_bytes());
        args.push(release.to_string().into_bytes());
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
        Value::Array(items) => {
            if let Some(h) = held_reply(&items) {
                return Ok(SetStock::Held(h));
            }
            match items.as_slice() {
                [Value::Int(1), Value::Int(n), Value::Int(c), Value::Int(rev)] => {
                    Ok(SetStock::Applied {
                        stock: *n,
                        change: *c,
                        rev: *rev,
                    })
                }
                [Value::Int(0), Value::Int(x)] => Ok(SetStock::OffsetMoved(*x)),
                [Value::Int(0), Value::BulkString(b)] => Ok(SetStock::Conflict(Some(b.clone()))),
                [Value::Int(0), Value::Nil] | [Value::Int(0)] => Ok(SetStock::Conflict(None)),
                _ => Err(unknown_reply("set_stock.lua", &items)),
            }
        }
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

/// A product's first write (`first.lua`): its stock, its expiry and its meta fields.
pub struct FirstWrite<'a> {
    pub keys: &'a ProductKeys,
    pub stock: i64,
    pub expire_at: Option<i64>,
    pub meta: Vec<(&'static str, String)>,
}

/// Runs many first writes, pipelined per node; results keep the input order. The replies
/// read as `set_stock.lua`'s: applied, or a conflict (a key of the product exists) that
/// wrote nothing.
pub async fn first_write_many(
    redis: &RedisStore,
    writes: &[FirstWrite<'_>],
) -> Vec<RedisResult<SetStock>> {
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = writes
        .iter()
        .map(|w| {
            let mut args = Vec::with_capacity(2 + 2 * w.meta.len());
            args.push(w.stock.to_string().into_bytes());
            args.push(
                w.expire_at
                    .map(|t| t.to_string().into_bytes())
                    .unwrap_or_default(),
            );
            for (k, v) in &w.meta {
                args.push(k.as_bytes().to_vec());
                args.push(v.as_bytes().to_vec());
            }
            (script_keys(w.keys), args)
        })
        .collect();
    redis
        .eval_each(&FIRST, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_set_stock))
        .collect()
}

/// How `record.lua` records deductions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordMode {
    /// The product is held by the rebuild of this token: entries and events only.
    Rebuild { token: String },
    /// The stock is live: each recorded deduction is counted as the deduction would have,
    /// guarded by the meta `rev` as read. `claim`: the counters may hold these already
    /// (units a rebuild declared unexplained are claimed first); false for deductions the
    /// counters never held, which claim nothing.
    Absorb { rev: Vec<u8>, claim: bool },
}

/// One deduction to record: request id, user id, units.
pub type Deduction = (String, String, i64);

/// Deductions per call of `record.lua`: five writes each, so a call stays well under a
/// millisecond of Redis.
pub const RECORD_BATCH: usize = 50;

/// What `record.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Deductions written and their units (requests the ledger already held are skipped), and
    /// the meta `rev` after.
    Written {
        deductions: i64,
        units: i64,
        rev: i64,
    },
    /// The stock key did not meet the mode's condition (what it is); nothing was written.
    StockMoved(String),
    /// Not the console's to write now; nothing was written (by this call).
    Held(Held),
}

/// Reads a reply of `record.lua`.
pub fn parse_record(reply: Value) -> RedisResult<Recorded> {
    match reply {
        Value::Array(items) => {
            if let Some(h) = held_reply(&items) {
                return Ok(Recorded::Held(h));
            }
            match items.as_slice() {
                [Value::Int(-1), kind] => Ok(Recorded::StockMoved(text(kind).unwrap_or_default())),
                [Value::Int(1), Value::Int(n), Value::Int(u), Value::Int(rev)] => {
                    Ok(Recorded::Written {
                        deductions: *n,
                        units: *u,
                        rev: *rev,
                    })
                }
                _ => Err(unknown_reply("record.lua", &items)),
            }
        }
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("record.lua", &other)),
    }
}

/// Records `deductions` of one product, [`RECORD_BATCH`] per call, one call after another
/// (each is idempotent per request id, so a retry after an error is safe). An absorbing
/// call's `rev` guard moves on with each call; the totals are of every call that wrote.
pub async fn record(
    redis: &RedisStore,
    keys: &ProductKeys,
    mode: RecordMode,
    expire_at: Option<i64>,
    deductions: &[Deduction],
) -> RedisResult<Recorded> {
    let (mut n, mut units) = (0, 0);
    let (mut rev_now, token) = match &mode {
        RecordMode::Rebuild { token } => (Vec::new(), token.clone()),
        RecordMode::Absorb { rev, .. } => (rev.clone(), String::new()),
    };
    let mut rev_after = crate::domain::stock::parse_int(&rev_now).unwrap_or(0);
    for chunk in deductions.chunks(RECORD_BATCH) {
        let mut args: Vec<Vec<u8>> = vec![
            match mode {
                RecordMode::Rebuild { .. } => b"rebuild".to_vec(),
                RecordMode::Absorb { claim: true, .. } => b"absorb".to_vec(),
                RecordMode::Absorb { claim: false, .. } => b"absorb_fresh".to_vec(),
            },
            expire_at
                .map(|t| t.to_string().into_bytes())
                .unwrap_or_default(),
            rev_now.clone(),
            token.clone().into_bytes(),
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
                rev,
            } => {
                n += deductions;
                units += u;
                rev_after = rev;
                rev_now = rev.to_string().into_bytes();
            }
            other => return Ok(other),
        }
    }
    Ok(Recorded::Written {
        deductions: n,
        units,
        rev: rev_after,
    })
}

/// What `freeze.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frozen {
    /// The product is held by this token; the meta `rev` now.
    Held { rev: i64 },
    /// The stock no longer holds what was read (what it holds now); nothing written.
    Conflict(Option<Vec<u8>>),
    /// Another console wrote or holds it; nothing written.
    Busy(Held),
}

/// The lease of a rebuild's hold: a hold older than this is taken over (its console died).
pub const REBUILD_LEASE_MS: i64 = 60_000;

/// Holds each product for a rebuild: (keys, the stock's guard as read, the meta `rev` as
/// read), all under one token; pipelined per node.
pub async fn freeze_many(
    redis: &RedisStore,
    token: &str,
    products: &[(&ProductKeys, Vec<u8>, Vec<u8>)],
) -> Vec<RedisResult<Frozen>> {
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = products
        .iter()
        .map(|(k, guard, rev)| {
            (
                script_keys(k),
                vec![
                    token.as_bytes().to_vec(),
                    guard.clone(),
                    rev.clone(),
                    REBUILD_LEASE_MS.to_string().into_bytes(),
                ],
            )
        })
        .collect();
    redis
        .eval_each(&FREEZE, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_freeze))
        .collect()
}

/// Reads a reply of `freeze.lua`.
pub fn parse_freeze(reply: Value) -> RedisResult<Frozen> {
    match reply {
        Value::Array(items) => {
            if let Some(h) = held_reply(&items) {
                return Ok(Frozen::Busy(h));
            }
            match items.as_slice() {
                [Value::Int(1), Value::Int(rev)] => Ok(Frozen::Held { rev: *rev }),
                [Value::Int(0), Value::BulkString(b)] => Ok(Frozen::Conflict(Some(b.clone()))),
                [Value::Int(0), Value::Nil] | [Value::Int(0)] => Ok(Frozen::Conflict(None)),
                _ => Err(unknown_reply("freeze.lua", &items)),
            }
        }
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("freeze.lua", &other)),
    }
}

/// Buyers per call of `holdings.lua`.
pub const HOLDINGS_BATCH: usize = 500;

/// Writes buyers' holdings (user, units) of a product held by the rebuild of `token`, in
/// batches; the users written, or why the hold is gone.
pub async fn write_holdings(
    redis: &RedisStore,
    keys: &ProductKeys,
    token: &str,
    holdings: &[(Vec<u8>, i64)],
) -> RedisResult<Result<i64, Held>> {
    let mut n = 0;
    for chunk in holdings.chunks(HOLDINGS_BATCH) {
        let mut args = vec![token.as_bytes().to_vec()];
        for (user, units) in chunk {
            args.push(user.clone());
            args.push(units.to_string().into_bytes());
        }
        let reply = redis
            .eval_each(&HOLDINGS, &[(script_keys(keys), args)])
            .await
            .pop()
            .unwrap_or_else(|| Err(RedisError::from((ErrorKind::Client, "not sent"))))?;
        match reply {
            Value::Array(items) => {
                if let Some(h) = held_reply(&items) {
                    return Ok(Err(h));
                }
                match items.as_slice() {
                    [Value::Int(k)] => n += k,
                    _ => return Err(unknown_reply("holdings.lua", &items)),
                }
            }
            Value::Int(code) => return Err(unexpected(code)),
            other => return Err(unknown_reply("holdings.lua", &other)),
        }
    }
    Ok(Ok(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_stock_replies() {
        let applied = Value::Array(vec![
            Value::Int(1),
            Value::Int(95),
            Value::Int(-7),
            Value::Int(4),
        ]);
        assert_eq!(
            parse_set_stock(applied).ok(),
            Some(SetStock::Applied {
                stock: 95,
                change: -7,
                rev: 4
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
        let rev = Value::Array(vec![Value::Int(2), Value::BulkString(b"9".to_vec())]);
        assert_eq!(
            parse_set_stock(rev).ok(),
            Some(SetStock::Held(Held::RevMoved(b"9".to_vec())))
        );
        let topup = Value::Array(vec![
            Value::Int(4),
            Value::BulkString(b"topup".to_vec()),
            Value::BulkString(b"t1|-20|5".to_vec()),
        ]);
        assert_eq!(
            parse_set_stock(topup).ok(),
            Some(SetStock::Held(Held::Topup("t1|-20|5".into())))
        );
        assert!(parse_set_stock(Value::Int(-4)).is_err());
        assert!(parse_set_stock(Value::Array(vec![Value::Int(7)])).is_err());
    }

    #[test]
    fn record_and_freeze_replies() {
        let ok = Value::Array(vec![
            Value::Int(1),
            Value::Int(2),
            Value::Int(3),
            Value::Int(8),
        ]);
        assert_eq!(
            parse_record(ok).ok(),
            Some(Recorded::Written {
                deductions: 2,
                units: 3,
                rev: 8
            })
        );
        let moved = Value::Array(vec![Value::Int(-1), Value::SimpleString("string".into())]);
        assert_eq!(
            parse_record(moved).ok(),
            Some(Recorded::StockMoved("string".into()))
        );
        assert!(parse_record(Value::Int(-4)).is_err());
        // Four deductions recorded is not mistaken for a hold.
        let four = Value::Array(vec![
            Value::Int(1),
            Value::Int(4),
            Value::Int(4),
            Value::Int(9),
        ]);
        assert!(matches!(
            parse_record(four),
            Ok(Recorded::Written { deductions: 4, .. })
        ));
        let held = Value::Array(vec![Value::Int(1), Value::Int(5)]);
        assert_eq!(parse_freeze(held).ok(), Some(Frozen::Held { rev: 5 }));
        let busy = Value::Array(vec![
            Value::Int(4),
            Value::BulkString(b"frozen".to_vec()),
            Value::BulkString(b"x|1|2".to_vec()),
        ]);
        assert_eq!(
            parse_freeze(busy).ok(),
            Some(Frozen::Busy(Held::Frozen("x|1|2".into())))
        );
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
                release: 2,
            },
            reset_meta: false,
            expire_at: Some(5),
            rev: b"3".to_vec(),
            token: None,
            meta: vec![("limit", "2".into())],
        };
        let args: Vec<String> = w
            .args()
            .iter()
            .map(|a| String::from_utf8_lossy(a).into())
            .collect();
        assert_eq!(
            args,
            [
                "rebase", "100", "7", "keep", "5", "3", "", "2", "limit", "2"
            ]
        );
        let w = StockWrite {
            rewrite: Rewrite::Set {
                guard: b"!".to_vec(),
                stock: NewStock::FromCounters { initial: 9 },
            },
            reset_meta: true,
            expire_at: None,
            rev: Vec::new(),
            token: Some("tok".into()),
            meta: Vec::new(),
            ..w
        };
        let args: Vec<String> = w
            .args()
            .iter()
            .map(|a| String::from_utf8_lossy(a).into())
            .collect();
        assert_eq!(args, ["set", "initial:9", "!", "reset", "", "", "tok", "0"]);
    }
}
