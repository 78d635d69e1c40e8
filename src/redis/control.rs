//! The operator's controls on a live product: `pause.lua` (pause or resume) and `topup.lua` (a
//! live top-up, applied once per id). Each reply is read here.

use super::RedisStore;
use super::keys::ProductKeys;
use super::reply::{script_keys, text, unexpected, unknown_reply};
use super::scripts::{PAUSE, TOPUP, WINDOW};
use redis::{RedisResult, Value};

/// What `pause.lua` answered for one product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseReply {
    /// Written; whether the product was paused before, and whether its stock key exists (a
    /// product without one sells nothing anyway: preheat writes it, paused).
    Written {
        was_paused: bool,
        stock_present: bool,
    },
    /// A newer pause or resume is in Redis already (its generation); nothing written.
    Stale(i64),
}

/// Reads a reply of `pause.lua`.
pub fn parse_pause(reply: Value) -> RedisResult<PauseReply> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::BulkString(b), Value::Int(present)] => Ok(PauseReply::Written {
                was_paused: b.as_slice() == b"1",
                stock_present: *present == 1,
            }),
            [Value::Int(3), Value::Int(g)] => Ok(PauseReply::Stale(*g)),
            _ => Err(unknown_reply("pause.lua", &items)),
        },
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("pause.lua", &other)),
    }
}

/// What `window.lua` answered for one product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowReply {
    /// Written (the meta `rev` now).
    Written(i64),
    /// The product holds no meta `limit` (not preheated, or lost): nothing written; the
    /// preheat or fix that writes its meta hash writes the window too.
    NotThere,
    /// The meta hash holds this window already: nothing written.
    Same,
    /// A rebuild holds the product (its marker): nothing written; the fix that finishes the
    /// rebuild writes the window.
    Held(String),
}

/// Writes the sale window `(opens, closes)` (ms) into each product's meta hash, pipelined per
/// node; results keep the input order.
pub async fn set_window_many(
    redis: &RedisStore,
    products: &[&ProductKeys],
    (opens, closes): (i64, i64),
) -> Vec<RedisResult<WindowReply>> {
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = products
        .iter()
        .map(|k| {
            (
                script_keys(k),
                vec![
                    opens.to_string().into_bytes(),
                    closes.to_string().into_bytes(),
                ],
            )
        })
        .collect();
    redis
        .eval_each(&WINDOW, &calls)
        .await
        .into_iter()
        .map(|r| {
            r.and_then(|v| match v {
                Value::Array(items) => match items.as_slice() {
                    [Value::Int(1), Value::Int(rev)] => Ok(WindowReply::Written(*rev)),
                    [Value::Int(0)] => Ok(WindowReply::NotThere),
                    [Value::Int(2)] => Ok(WindowReply::Same),
                    [Value::Int(4), _, marker] => Ok(WindowReply::Held(
                        super::reply::text(marker).unwrap_or_default(),
                    )),
                    _ => Err(unknown_reply("window.lua", &items)),
                },
                Value::Int(code) => Err(unexpected(code)),
                other => Err(unknown_reply("window.lua", &other)),
            })
        })
        .collect()
}

/// Writes a pause (or resume) of `generation` into each product given, pipelined per node;
/// results keep the input order.
pub async fn set_paused_many(
    redis: &RedisStore,
    products: &[(&ProductKeys, i64)],
    paused: bool,
) -> Vec<RedisResult<PauseReply>> {
    let flag = if paused { b"1".to_vec() } else { b"0".to_vec() };
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = products
        .iter()
        .map(|(k, generation)| {
            (
                script_keys(k),
                vec![flag.clone(), generation.to_string().into_bytes()],
            )
        })
        .collect();
    redis
        .eval_each(&PAUSE, &calls)
        .await
        .into_iter()
        .map(|r| r.and_then(parse_pause))
        .collect()
}

/// A step of `topup.lua`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopupStep {
    /// The first step, with the change: a cut takes the units now; a raise only marks.
    Begin(i64),
    /// A raise's second step, once the database took it: the units go on sale.
    Apply,
    /// A cut's second step, once the database took it.
    Finish,
    /// A cut the database did not take: the units come back.
    Undo,
    /// A raise the database did not take: the mark goes.
    Abort,
}

impl TopupStep {
    fn name(self) -> &'static str {
        match self {
            TopupStep::Begin(_) => "begin",
            TopupStep::Apply => "apply",
            TopupStep::Finish => "finish",
            TopupStep::Undo => "undo",
            TopupStep::Abort => "abort",
        }
    }
}

/// What `topup.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopupReply {
    /// Done; the stock now.
    Done(i64),
    /// This top-up id was applied before (a retry after a lost reply); the stock now.
    AlreadyApplied(i64),
    /// `begin` of an id already begun; the stock now.
    AlreadyBegun(i64),
    /// A cut would take more than the stock holds; nothing written.
    TooFew(i64),
    /// The stock key is absent (a second step dropped the mark: a rebuild writes the stock
    /// from the database anyway).
    Missing,
    /// `begin` found no stock key: the marker alone holds off a fix or preheat that would
    /// write the stock from the initial stock it read before this top-up's database write.
    BegunWithoutStock,
    /// The step does not match what is pending (the marker, empty when none): another top-up
    /// is in progress, or a fix resolved this one.
    NotPending(String),
    /// A rebuild holds the product, or a piece of it is missing.
    Held(String),
}

/// Runs one step of the top-up `id` on a product.
pub async fn topup(
    redis: &RedisStore,
    keys: &ProductKeys,
    step: TopupStep,
    id: &str,
) -> RedisResult<TopupReply> {
    let change = match step {
        TopupStep::Begin(n) => n.to_string(),
        _ => String::new(),
    };
    let reply = redis
        .eval(
            &TOPUP,
            &keys.script_keys(),
            &[step.name(), id, change.as_str()],
        )
        .await?;
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::Int(n)] => Ok(TopupReply::Done(*n)),
            [Value::Int(2), Value::Int(n)] => Ok(TopupReply::AlreadyApplied(*n)),
            [Value::Int(3), Value::Int(n)] => Ok(TopupReply::AlreadyBegun(*n)),
            [Value::Int(0), Value::Int(n)] => Ok(TopupReply::TooFew(*n)),
            [Value::Int(-1)] => Ok(TopupReply::Missing),
            [Value::Int(5)] => Ok(TopupReply::BegunWithoutStock),
            [Value::Int(-2), m] => Ok(TopupReply::NotPending(text(m).unwrap_or_default())),
            [Value::Int(4), _, detail] => Ok(TopupReply::Held(text(detail).unwrap_or_default())),
            _ => Err(unknown_reply("topup.lua", &items)),
        },
        Value::Int(code) => Err(unexpected(code)),
        other => Err(unknown_reply("topup.lua", &other)),
    }
}
