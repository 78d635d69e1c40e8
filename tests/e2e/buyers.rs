//! Many concurrent buyers against one product: never oversold, never negative, limits hold, the
//! ledger matches the successes, and SCRIPT FLUSH in the middle of the run fails no request.

use crate::harness::Topo;
use redis::Value;
use seckill_console::domain::{ActivityId, ProductId};
use seckill_console::redis::stock::{Deducted, deduct};
use seckill_console::redis::{KeySpace, ProductKeys, RedisStore};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const STOCK: i64 = 100;
const DISTINCT_BUYERS: usize = 2000;
const REPEAT_CLICKS: usize = 500;
const TASKS: usize = 64;

fn keys(p: &str) -> ProductKeys {
    KeySpace::default().product(
        &ActivityId::parse("crowd").expect("valid"),
        &ProductId::parse(p).expect("valid"),
    )
}

/// Requests in a fixed shuffled order: every buyer once, some of them twice.
fn requests() -> Vec<(String, String)> {
    let mut reqs: Vec<(String, String)> = (0..DISTINCT_BUYERS)
        .map(|i| (format!("req-{i}"), format!("user-{i}")))
        .collect();
    reqs.extend((0..REPEAT_CLICKS).map(|i| (format!("again-{i}"), format!("user-{}", i * 3))));
    let mut seed: u64 = 0x5eed;
    for i in (1..reqs.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = usize::try_from(seed >> 33).unwrap_or(0) % (i + 1);
        reqs.swap(i, j);
    }
    reqs
}

struct Results {
    outcomes: Vec<(String, String, Result<Deducted, String>)>,
    min_seen: i64,
}

async fn run_crowd(store: &RedisStore, k: &ProductKeys, flush: bool) -> Results {
    let reqs = Arc::new(requests());
    let next = Arc::new(AtomicUsize::new(0));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let min_seen = Arc::new(AtomicI64::new(i64::MAX));

    // A watcher reads the stock all the time: it must never see a negative value.
    let watcher = {
        let (store, k, done, min_seen) = (store.clone(), k.clone(), done.clone(), min_seen.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                if let Ok(Value::BulkString(b)) =
                    store.query(&k.stock, redis::cmd("GET").arg(&k.stock)).await
                    && let Some(v) = std::str::from_utf8(&b)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                {
                    min_seen.fetch_min(v, Ordering::Relaxed);
                }
                tokio::task::yield_now().await;
            }
        })
    };
    // SCRIPT FLUSH on every node, over and over, while buyers run.
    let flusher = flush.then(|| {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            let mut flushes = 0;
            while !done.load(Ordering::Relaxed) {
                let nodes = store.primaries();
                for (_, r) in store
                    .on_nodes(&nodes, redis::cmd("SCRIPT").arg("FLUSH"))
                    .await
                {
                    r.expect("SCRIPT FLUSH");
                }
                flushes += 1;
                tokio::time::sleep(std::time::Duration::from_millis(3)).await;
            }
            flushes
        })
    });

    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (store, k, reqs, next, outcomes) = (
            store.clone(),
            k.clone(),
            reqs.clone(),
            next.clone(),
            outcomes.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((rid, uid)) = reqs.get(i) else { break };
                let r = deduct(&store, &k, rid, uid, "1")
                    .await
                    .map_err(|e| e.to_string());
                if let Ok(mut o) = outcomes.lock() {
                    o.push((rid.clone(), uid.clone(), r));
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("buyer task");
    }
    done.store(true, Ordering::Relaxed);
    watcher.await.expect("watcher");
    if let Some(f) = flusher {
        let flushes = f.await.expect("flusher");
        assert!(flushes >= 2, "the flusher ran only {flushes} times");
    }
    let outcomes = std::mem::take(&mut *outcomes.lock().expect("lock"));
    Results {
        outcomes,
        min_seen: min_seen.load(Ordering::Relaxed),
    }
}

async fn setup(store: &RedisStore, k: &ProductKeys) {
    store
        .query(&k.stock, redis::cmd("SET").arg(&k.stock).arg(STOCK))
        .await
        .expect("set stock");
    store
        .query(
            &k.meta,
            redis::cmd("HSET")
                .arg(&k.meta)
                .arg("initial")
                .arg(STOCK)
                .arg("limit")
                .arg(1),
        )
        .await
        .expect("set meta");
    // The pieces the scripts check exist from the preheat on.
    for (key, field, value) in [(&k.buyers, "", "0"), (&k.ledger, "", "-")] {
        store
            .query(key, redis::cmd("HSET").arg(key).arg(field).arg(value))
            .await
            .expect("placeholder");
    }
    store
        .query(
            &k.events,
            redis::cmd("XADD")
                .arg(&k.events)
                .arg("*")
                .arg("a")
                .arg("0|"),
        )
        .await
        .expect("stream");
}

async fn check(store: &RedisStore, k: &ProductKeys, r: &Results, label: &str) {
    let failed: Vec<_> = r.outcomes.iter().filter(|(_, _, o)| o.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{label}: {} requests failed, e.g. {:?}",
        failed.len(),
        failed.first()
    );
    assert_eq!(r.outcomes.len(), DISTINCT_BUYERS + REPEAT_CLICKS, "{label}");

    let winners: Vec<&(String, String, Result<Deducted, String>)> = r
        .outcomes
        .iter()
        .filter(|(_, _, o)| matches!(o, Ok(Deducted::Remaining(_))))
        .collect();
    assert_eq!(
        winners.len() as i64,
        STOCK,
        "{label}: exactly the stock is sold"
    );
    let remaining: HashSet<i64> = winners
        .iter()
        .filter_map(|(_, _, o)| match o {
            Ok(Deducted::Remaining(n)) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(
        remaining,
        (0..STOCK).collect::<HashSet<i64>>(),
        "{label}: each remaining value once"
    );
    assert!(r.min_seen >= 0, "{label}: stock seen at {}", r.min_seen);
    for (_, _, o) in &r.outcomes {
        assert!(
            matches!(
                o,
                Ok(Deducted::Remaining(_) | Deducted::SoldOut | Deducted::UserLimit)
            ),
            "{label}: unexpected outcome {o:?}"
        );
    }

    let stock = store
        .query(&k.stock, redis::cmd("GET").arg(&k.stock))
        .await
        .expect("get");
    assert_eq!(
        stock,
        Value::BulkString(b"0".to_vec()),
        "{label}: stock ends at 0"
    );

    let mut buyers: HashMap<String, i64> = redis::from_redis_value(
        store
            .query(&k.buyers, redis::cmd("HGETALL").arg(&k.buyers))
            .await
            .expect("buyers"),
    )
    .expect("buyers hash");
    // Every buyer holds one unit; the placeholder field (an empty user id) holds none.
    assert_eq!(
        buyers.remove(""),
        Some(0),
        "{label}: the placeholder is there"
    );
    assert!(
        buyers
            .iter()
            .filter(|(u, _)| !u.is_empty())
            .all(|(_, &n)| n == 1),
        "{label}: a user holds more than the limit"
    );
    let winner_users: HashSet<&String> = winners.iter().map(|(_, u, _)| u).collect();
    assert_eq!(
        winner_users.len() as i64,
        STOCK,
        "{label}: no user won twice"
    );
    assert_eq!(
        buyers.keys().collect::<HashSet<_>>(),
        winner_users,
        "{label}"
    );

    let mut ledger: Vec<String> = redis::from_redis_value(
        store
            .query(&k.ledger, redis::cmd("HKEYS").arg(&k.ledger))
            .await
            .expect("ledger"),
    )
    .expect("ledger keys");
    // The placeholder (an empty request id) witnesses that the ledger was written; no sale.
    ledger.sort();
    assert_eq!(
        ledger.first().map(String::as_str),
        Some(""),
        "{label}: the ledger's placeholder is there"
    );
    ledger.remove(0);
    let mut won: Vec<String> = winners.iter().map(|(rid, _, _)| rid.clone()).collect();
    won.sort();
    assert_eq!(
        ledger, won,
        "{label}: the ledger holds exactly the successful request ids"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_thousand_buyers_never_oversell() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for p in ["hot", "warm"] {
            let k = keys(p);
            setup(&store, &k).await;
            let r = run_crowd(&store, &k, false).await;
            check(&store, &k, &r, &format!("{} {p}", topo.name())).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn script_flush_mid_run_fails_no_request() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let k = keys("flushed");
        setup(&store, &k).await;
        let r = run_crowd(&store, &k, true).await;
        check(
            &store,
            &k,
            &r,
            &format!("{} with SCRIPT FLUSH", topo.name()),
        )
        .await;
    }
}
