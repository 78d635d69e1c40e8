//! The operator's controls on a live product: `pause.lua` (pause or resume) and `topup.lua` (a
//! live top-up, applied once per id). Each reply is read here.

use super::RedisStore;
use super::keys::ProductKeys;
use super::reply::{script_keys, unexpected, unknown_reply};
use super::scripts::{PAUSE, TOPUP};
use redis::{RedisResult, Value};

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
        .eval_each(&PAUSE, &calls)
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
        .eval(&TOPUP, &keys.script_keys(), &[change.as_str(), id])
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
