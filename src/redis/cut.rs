//! The cut: each product's stock, meta hash and position in its event stream as of one
//! instant of Redis. Every write to a product's books appends an event, so a read that finds
//! no event newer than the one it read before the stock and the meta hash read them at one
//! instant; a product whose stream moved in between is read again.
//!
//! What that costs Redis, on 100,000 products as a preheat leaves them (`INFO commandstats`,
//! 2026-12-05): each of a product's five keys once (XREVRANGE, GET, HRANDFIELD, TYPE twice),
//! then an XREAD and, for streams without an event, an EXISTS, each of a hundred products on a
//! single server. Per call that was 1 to 2.6 us on a slow machine's cold memory and 0.45 (TYPE)
//! to 1.25 us (HRANDFIELD) on a faster one; reading each of the five keys once by
//! `redis-cli --pipe`, with no check at all, cost 0.51 s of Redis CPU there against `status`'s
//! 0.77 to 0.86 s: the floor is the keys a cut reads more than the commands it sends.
//!
//! This needs no MULTI and no script: only reads, which a read-only ACL user may send.

use super::events::{last_id, newest};
use super::product_state::{
    get_meta, get_meta_whole, get_stock, meta_from, meta_from_whole, stock_from,
};
use super::reply::text;
use super::{Keyed, ProductKeys, RedisStore};
use crate::domain::events::EventId;
use crate::domain::meta::Piece;
use crate::domain::stock::{Meta, StockValue};
use futures::StreamExt;
use redis::{ErrorKind, RedisError, RedisResult, Value};
use std::collections::HashMap;

/// Rounds of re-reading a product whose stream moved during the read. A round takes a few
/// microseconds of Redis; a product would have to change under every one of them.
const MAX_ROUNDS: usize = 50;

/// What Redis holds for one product at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProductCut {
    pub stock: StockValue,
    pub meta: Meta,
    /// The newest event at the cut (ZERO: none); None when the events key has another type.
    pub position: Option<EventId>,
    /// Redis time of the read, taken just before the product's keys were read (the node's
    /// TIME; the local clock where TIME is not allowed).
    pub now_ms: i64,
    /// Which of the keys the deductions need exist (of any type: a wrong type is in
    /// `meta.corrupt` or `position`).
    pub keys: KeysPresent,
}

/// Which keys of a product exist besides the stock and the meta hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeysPresent {
    pub buyers: bool,
    pub ledger: bool,
    pub events: bool,
    /// A buyers or ledger key of another type (what it is): every deduction fails, and what
    /// it holds is not the console's to throw away.
    pub foreign: Option<String>,
}

impl ProductCut {
    /// The pieces Redis lost that the cut alone shows (the pause and the counters' agreement
    /// with the ledger need the database and a settle). A product never preheated has lost
    /// them all.
    pub fn lost(&self) -> Vec<Piece> {
        let mut out = Vec::new();
        if self.stock == StockValue::Missing {
            out.push(Piece::Stock);
        }
        if !self.meta.present {
            out.push(Piece::Meta);
        } else if self.meta.limit.is_none() && self.meta.corrupt.is_none() {
            out.push(Piece::Limit);
        }
        if self.counters_lost() {
            out.push(Piece::Counters);
        }
        if !self.keys.buyers {
            out.push(Piece::Buyers);
        }
        if !self.keys.ledger {
            out.push(Piece::Ledger);
        }
        if !self.keys.events {
            out.push(Piece::Events);
        }
        out
    }

    /// `A`: units held by active deductions, per the scripts' counters; None when they are not
    /// readable.
    pub fn active(&self) -> Option<i64> {
        // A meta hash that vanished after the product had events took its counters with it.
        let lost = !self.meta.present && self.position != Some(EventId::ZERO);
        if self.meta.corrupt.is_some() || lost || self.counters_lost() {
            return None;
        }
        self.meta.active_units()
    }

    /// `X`: the stock's offset from the scripts' own counters for a product of `initial` units
    /// (`stock - initial + deducted - returned`: units written outside the scripts), when both
    /// are readable.
    pub fn offset(&self, initial: i64) -> Option<i64> {
        Some(self.stock.value()? - initial + self.active()?)
    }

    /// A meta hash without `deducted` after the product had events: recreated by a write that
    /// is not a deduction (a pause), its counters are gone, not zero.
    fn counters_lost(&self) -> bool {
        self.meta.present
            && self.meta.corrupt.is_none()
            && self.meta.deducted.is_none()
            && self.position != Some(EventId::ZERO)
    }
}

/// The reads of one product's cut between its two looks at the stream: the stock, the whole
/// meta hash (one bounded read, or the named fields of a wider hash) and the types of the two
/// hashes every deduction writes. The events key's TYPE is not among them: a stream whose
/// newest event was read exists (and one of another type answers the XREVRANGE with an
/// error); only a product with no event is asked whether its stream is there at all.
fn items(k: &ProductKeys, wide: bool) -> [Keyed; 4] {
    [
        get_stock(k),
        if wide { get_meta(k) } else { get_meta_whole(k) },
        type_of(&k.buyers),
        type_of(&k.ledger),
    ]
}

/// True when a TYPE reply names an existing key.
fn exists(reply: &RedisResult<Value>) -> RedisResult<bool> {
    match reply {
        Ok(v) => Ok(text(v).is_some_and(|t| t != "none")),
        Err(e) => Err(e.clone()),
    }
}

/// TYPE: O(1), so the hashes every deduction writes are checked on each read without reading
/// them (a buyers or ledger key of another type makes every deduction fail).
fn type_of(key: &str) -> Keyed {
    Keyed::new(key, redis::cmd("TYPE").arg(key).clone())
}

/// Names a buyers or ledger key that is not a hash (absent is fine: nothing sold yet).
fn wrong_hash(what: &str, key: &str, reply: &RedisResult<Value>) -> RedisResult<Option<String>> {
    let kind = match reply {
        Ok(v) => text(v).unwrap_or_default(),
        Err(e) => return Err(e.clone()),
    };
    Ok((kind != "hash" && kind != "none")
        .then(|| format!("the {what} key {key} is a {kind}, not a hash: every deduction fails")))
}

fn position(reply: &RedisResult<Value>) -> RedisResult<Option<EventId>> {
    match reply {
        Ok(v) => last_id(v).map(Some).ok_or_else(|| {
            RedisError::from((ErrorKind::Parse, "the events stream gave an unreadable id"))
        }),
        Err(e) if super::reply::is_wrong_type(e) => Ok(None),
        Err(e) => Err(e.clone()),
    }
}

/// Reads the cut of every product, pipelined per node. A wrong-type key is reported on its
/// product; any other error fails the read (the caller reports Redis unavailable).
pub async fn read(redis: &RedisStore, keys: &[ProductKeys]) -> RedisResult<Vec<ProductCut>> {
    let local = chrono::Utc::now().timestamp_millis();
    let clocks = node_clocks(redis).await;
    // A window of products at a time: the commands and replies of 100,000 products at once
    // took hundreds of megabytes; each product's cut is an instant of its own anyway.
    windowed(keys, |window| read_window(redis, window, &clocks, local)).await
}

/// Products read at once: 12,000 commands, a few pipeline chunks per node.
pub const WINDOW: usize = 2_000;

/// Windows read at the same time. A window waits on Redis three times (its steps follow one
/// another); a second one in flight meanwhile keeps Redis and the console busy together: on
/// 100,000 products `status` took 0.79-0.82 of the wall time of one window at a time, and
/// `reconcile` 0.87-0.88, the same commands (scale benchmark, 2026-12-05). Each window's
/// replies are held until it is done: two cost about 6 MB more at that size.
const WINDOWS_IN_FLIGHT: usize = 2;

/// `read` of each window of `items` ([`WINDOW`] at a time, [`WINDOWS_IN_FLIGHT`] of them in
/// flight), the results in the items' order; the first error ends it.
pub(crate) async fn windowed<'a, T, R, Fut>(
    items: &'a [T],
    read: impl Fn(&'a [T]) -> Fut,
) -> RedisResult<Vec<R>>
where
    Fut: Future<Output = RedisResult<Vec<R>>>,
{
    // The futures are built first (they start only when polled): a stream mapping a closure
    // over the chunks would tie the closure's lifetimes into every caller's Send bound.
    let reads: Vec<Fut> = items.chunks(WINDOW).map(read).collect();
    let mut windows = futures::stream::iter(reads).buffered(WINDOWS_IN_FLIGHT);
    let mut out = Vec::with_capacity(items.len());
    while let Some(window) = windows.next().await {
        out.extend(window?);
    }
    Ok(out)
}

async fn read_window(
    redis: &RedisStore,
    keys: &[ProductKeys],
    clocks: &HashMap<String, i64>,
    local: i64,
) -> RedisResult<Vec<ProductCut>> {
    let mut out: Vec<Option<ProductCut>> = vec![None; keys.len()];
    let mut todo: Vec<usize> = (0..keys.len()).collect();
    // Products whose meta hash held more fields than one bounded read returns.
    let mut wide = vec![false; keys.len()];
    for _ in 0..MAX_ROUNDS {
        if todo.is_empty() {
            break;
        }
        // Three steps, each sent when the one before has been answered, so that each reads
        // after the last: the newest event; the product's keys; whether the stream moved past
        // that event meanwhile (a hundred streams to an XREAD on a single server). Every
        // script's write appends an event, so a product whose stream stood still was read at
        // one instant. The XREAD costs a warm server half of what a second XREVRANGE each
        // did, but on the scale benchmark's cold memory about the same (1.28 against 1.13 us a
        // product, 2026-12-05): each key read costs the lookup, whatever the command.
        let firsts = redis
            .pipeline(todo.iter().map(|&i| newest(&keys[i])).collect())
            .await;
        let positions: Vec<Option<EventId>> =
            firsts.iter().map(position).collect::<RedisResult<_>>()?;
        let batch: Vec<Keyed> = todo
            .iter()
            .flat_map(|&i| items(&keys[i], wide[i]))
            .collect();
        let results = redis.pipeline(batch).await;
        // A product whose events key is of another type has no stream to hold still: its read
        // stands as it is (the type is what it reports).
        let asks: Vec<(&ProductKeys, EventId)> = todo
            .iter()
            .zip(&positions)
            .filter_map(|(&i, p)| Some((&keys[i], (*p)?)))
            .collect();
        let mut moved = moved_after(redis, &asks).await?.into_iter();
        let mut again = Vec::new();
        for ((&i, r), at) in todo.iter().zip(results.chunks(4)).zip(positions) {
            let [stock, meta, buyers, ledger] = r else {
                return Err(RedisError::from((ErrorKind::Parse, "short pipeline reply")));
            };
            if at.is_some() && moved.next().unwrap_or(true) {
                again.push(i);
                continue;
            }
            let mut meta = if wide[i] {
                meta_from(meta)?
            } else if let Some(m) = meta_from_whole(meta)? {
                m
            } else {
                wide[i] = true;
                again.push(i);
                continue;
            };
            let foreign = match wrong_hash("buyers", &keys[i].buyers, buyers)? {
                Some(w) => Some(w),
                None => wrong_hash("ledger", &keys[i].ledger, ledger)?,
            };
            if meta.corrupt.is_none() {
                meta.corrupt = foreign.clone();
            }
            out[i] = Some(ProductCut {
                stock: stock_from(stock)?,
                meta,
                position: at,
                now_ms: clock_for(redis, clocks, &keys[i]).unwrap_or(local),
                keys: KeysPresent {
                    buyers: exists(buyers)?,
                    ledger: exists(ledger)?,
                    // Settled below for a product without events.
                    events: at != Some(EventId::ZERO),
                    foreign,
                },
            });
        }
        todo = again;
    }
    if let Some(&i) = todo.first() {
        return Err(RedisError::from((
            ErrorKind::Client,
            "no consistent read: the product changed during every attempt",
            keys[i].stock.clone(),
        )));
    }
    let mut cuts: Vec<ProductCut> = out.into_iter().flatten().collect();
    let empty: Vec<usize> = (0..cuts.len())
        .filter(|&i| cuts[i].position == Some(EventId::ZERO))
        .collect();
    for (i, there) in streams_exist(redis, keys, &empty).await? {
        cuts[i].keys.events = there;
    }
    super::product_state::name_wrong_types(redis, keys, &mut cuts).await?;
    Ok(cuts)
}

/// Whether the events key of each product of `which` exists. On a single server a hundred go
/// to one EXISTS, which answers how many exist: a full count or none settles them all (a sale
/// preheated, or one not yet), and only a batch in between is asked key by key (in a cluster
/// each key sits in a slot of its own).
async fn streams_exist(
    redis: &RedisStore,
    keys: &[ProductKeys],
    which: &[usize],
) -> RedisResult<Vec<(usize, bool)>> {
    let mut out = Vec::with_capacity(which.len());
    let mut unsure: Vec<usize> = Vec::new();
    if redis.is_cluster() {
        unsure.extend_from_slice(which);
    } else {
        let batches: Vec<&[usize]> = which.chunks(STREAMS_PER_COMMAND).collect();
        let counts = redis
            .pipeline(
                batches
                    .iter()
                    .map(|b| {
                        let mut cmd = redis::cmd("EXISTS");
                        for &i in *b {
                            cmd.arg(&keys[i].events);
                        }
                        Keyed::new(&keys[b[0]].events, cmd)
                    })
                    .collect(),
            )
            .await;
        for (batch, count) in batches.into_iter().zip(counts) {
            match count? {
                Value::Int(n) if n == batch.len() as i64 => {
                    out.extend(batch.iter().map(|&i| (i, true)));
                }
                Value::Int(0) => out.extend(batch.iter().map(|&i| (i, false))),
                _ => unsure.extend_from_slice(batch),
            }
        }
    }
    if !unsure.is_empty() {
        let types = redis
            .pipeline(unsure.iter().map(|&i| type_of(&keys[i].events)).collect())
            .await;
        for (&i, t) in unsure.iter().zip(types) {
            out.push((i, exists(&t)?));
        }
    }
    Ok(out)
}

/// Streams one command asks about at once on a single server (the XREAD of which moved, the
/// EXISTS of which are there): about 60 us of Redis for 100 warm (0.6 us a stream against 1.1
/// us for an XREAD each, measured on this machine), a command SLOWLOG keeps short of 1 ms.
const STREAMS_PER_COMMAND: usize = 100;

/// For each `(keys, position)`: whether the product's stream holds an event after the
/// position (XREAD COUNT 1, which answers only for the streams that moved). On a single server
/// (or behind Sentinel) a hundred streams go in one XREAD; a cluster's keys each sit in a slot
/// of their own, so one XREAD each. A batch that fails as a whole (one key of another type)
/// says "moved" for all of its products: they are read whole.
pub async fn moved_after(
    redis: &RedisStore,
    asks: &[(&ProductKeys, EventId)],
) -> RedisResult<Vec<bool>> {
    // A window at a time, as the cut reads them: a cluster's 100,000 XREADs are not built at
    // once.
    windowed(asks, |window| moved_window(redis, window)).await
}

async fn moved_window(
    redis: &RedisStore,
    asks: &[(&ProductKeys, EventId)],
) -> RedisResult<Vec<bool>> {
    let per = if redis.is_cluster() {
        1
    } else {
        STREAMS_PER_COMMAND
    };
    let batches: Vec<&[(&ProductKeys, EventId)]> = asks.chunks(per).collect();
    let cmds: Vec<Keyed> = batches
        .iter()
        .map(|batch| {
            let mut cmd = redis::cmd("XREAD");
            cmd.arg("COUNT").arg(1).arg("STREAMS");
            for (k, _) in *batch {
                cmd.arg(&k.events);
            }
            for (_, at) in *batch {
                cmd.arg(at.to_string());
            }
            Keyed::new(&batch[0].0.events, cmd)
        })
        .collect();
    let mut out = Vec::with_capacity(asks.len());
    for (batch, reply) in batches.iter().zip(redis.pipeline(cmds).await) {
        let named: std::collections::HashSet<Vec<u8>> = match reply {
            Ok(v) => streams_named(&v),
            Err(e) if super::reply::is_wrong_type(&e) || super::reply::is_try_again(&e) => {
                out.extend(batch.iter().map(|_| true));
                continue;
            }
            Err(e) => return Err(e),
        };
        out.extend(
            batch
                .iter()
                .map(|(k, _)| named.contains(k.events.as_bytes())),
        );
    }
    Ok(out)
}

/// For each product: whether its stock or its events key exists now. Asked of products whose
/// last cut found no key at all (an activity before its preheat, or one whose keys expired):
/// every script that writes a product appends an event, so a preheat, a fix or a rebuild
/// creates the stream, and a stock set by hand shows as well. On a single server fifty
/// products (a hundred keys) go to one EXISTS, which answers how many exist: none settles the
/// batch, any other count has the batch read whole (a preheat writes them all at once); in a
/// cluster one EXISTS per product (its two keys share a slot).
pub async fn appeared(redis: &RedisStore, keys: &[&ProductKeys]) -> RedisResult<Vec<bool>> {
    windowed(keys, |window| appeared_window(redis, window)).await
}

async fn appeared_window(redis: &RedisStore, keys: &[&ProductKeys]) -> RedisResult<Vec<bool>> {
    let per = if redis.is_cluster() {
        1
    } else {
        STREAMS_PER_COMMAND / 2
    };
    let batches: Vec<&[&ProductKeys]> = keys.chunks(per).collect();
    let cmds: Vec<Keyed> = batches
        .iter()
        .map(|batch| {
            let mut cmd = redis::cmd("EXISTS");
            for k in *batch {
                cmd.arg(&k.stock).arg(&k.events);
            }
            Keyed::new(&batch[0].stock, cmd)
        })
        .collect();
    let mut out = Vec::with_capacity(keys.len());
    for (batch, reply) in batches.iter().zip(redis.pipeline(cmds).await) {
        let any = match reply {
            Ok(v) => !matches!(v, Value::Int(0)),
            // The slot is migrating with the product's keys split between two nodes (or none
            // on either): its whole read says so, as a fresh `status` does; failed here, the
            // whole live refresh failed instead (chaos test, invariant 7).
            Err(e) if super::reply::is_try_again(&e) => true,
            Err(e) => return Err(e),
        };
        out.extend(batch.iter().map(|_| any));
    }
    Ok(out)
}

/// The keys an XREAD reply has entries for: nil (none), an array of `[key, entries]`
/// (RESP2) or a map of key to entries (RESP3).
fn streams_named(v: &Value) -> std::collections::HashSet<Vec<u8>> {
    match v {
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::Array(parts) => parts.first().and_then(super::reply::bytes),
                _ => None,
            })
            .collect(),
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, _)| super::reply::bytes(k))
            .collect(),
        _ => Default::default(),
    }
}

/// Each primary's clock (TIME), for cuts carried over from an earlier read.
#[derive(Debug)]
pub struct Clocks {
    local: i64,
    nodes: HashMap<String, i64>,
}

impl Clocks {
    pub async fn read(redis: &RedisStore) -> Self {
        Clocks {
            local: chrono::Utc::now().timestamp_millis(),
            nodes: node_clocks(redis).await,
        }
    }

    /// The latest node's clock (the local clock where no node told its time).
    pub fn latest(&self) -> i64 {
        self.nodes.values().copied().max().unwrap_or(self.local)
    }

    /// Redis's clock on the node of `k`'s product (the local clock where TIME is refused).
    pub fn of(&self, redis: &RedisStore, k: &ProductKeys) -> i64 {
        clock_for(redis, &self.nodes, k).unwrap_or(self.local)
    }
}

/// Each primary's clock, ms since the epoch (TIME). A node that refuses TIME (an ACL user
/// allowed only reads) is left out and its products use the local clock.
async fn node_clocks(redis: &RedisStore) -> HashMap<String, i64> {
    let primaries = redis.primaries();
    redis
        .on_nodes(&primaries, &redis::cmd("TIME"))
        .await
        .into_iter()
        .filter_map(|(addr, r)| match r.ok()? {
            Value::Array(parts) => {
                let secs: i64 = text(parts.first()?)?.parse().ok()?;
                let micros: i64 = text(parts.get(1)?)?.parse().ok()?;
                Some((addr, secs * 1000 + micros / 1000))
            }
            _ => None,
        })
        .collect()
}

/// Redis's clock on the node of `k`'s product, ms since the epoch (the local clock when TIME
/// is not allowed or the node does not answer it).
pub async fn clock_of(redis: &RedisStore, k: &ProductKeys) -> i64 {
    let local = chrono::Utc::now().timestamp_millis();
    let clocks = node_clocks(redis).await;
    clock_for(redis, &clocks, k).unwrap_or(local)
}

fn clock_for(redis: &RedisStore, clocks: &HashMap<String, i64>, k: &ProductKeys) -> Option<i64> {
    redis
        .node_for_key(&k.stock)
        .ok()
        .and_then(|n| clocks.get(&n.addr).copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn run<T>(f: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    /// A read of one window that waits on "Redis" `waits` times, noting when it starts and
    /// ends.
    async fn read(
        log: &RefCell<Vec<String>>,
        window: &[usize],
        waits: usize,
    ) -> RedisResult<Vec<usize>> {
        let first = window[0] / WINDOW;
        log.borrow_mut().push(format!("start {first}"));
        for _ in 0..waits {
            tokio::task::yield_now().await;
        }
        log.borrow_mut().push(format!("end {first}"));
        Ok(window.iter().map(|i| i * 10).collect())
    }

    /// The second window is read while the first still waits, and a window that finishes
    /// first does not put its products first.
    #[test]
    fn windows_overlap_and_keep_the_items_order() {
        let items: Vec<usize> = (0..WINDOW * 3 + 5).collect();
        let log = RefCell::new(Vec::new());
        // Each window waits less than the one before: they finish in reverse.
        let out = run(windowed(&items, |w| read(&log, w, 10 - w[0] / WINDOW))).expect("windows");
        assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        let log = log.into_inner();
        let at = |e: &str| log.iter().position(|l| l == e).expect(e);
        assert!(at("start 1") < at("end 0"), "{log:?}");
        assert!(at("start 2") > at("end 1"), "two at a time: {log:?}");
    }

    #[test]
    fn a_window_that_fails_fails_the_read() {
        let items: Vec<usize> = (0..WINDOW * 3).collect();
        let out = run(windowed(&items, |w: &[usize]| {
            let bad = w[0] == WINDOW;
            async move {
                if bad {
                    Err(RedisError::from((ErrorKind::Io, "cut")))
                } else {
                    Ok(w.to_vec())
                }
            }
        }));
        assert!(out.is_err());
    }
}
