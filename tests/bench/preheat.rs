//! Preheat benchmark: 10,000 and 100,000 products on SQLite and a private redis-server, the
//! pipelined gate (with verification) against writing one key per round trip, measured in the
//! same run. Run with `scripts/bench preheat` (or `cargo bench --bench preheat`).

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{future_window, import, preheat_options, standalone};
use harness::{RedisServer, TestDb};
use seckill_console::domain::ActivityId;
use seckill_console::ops::preheat::preheat;
use seckill_console::ops::progress::Silent;
use seckill_console::redis::{KeySpace, RedisStore};
use std::time::{Duration, Instant};

/// Products written one key per round trip for the baseline (enough for a stable rate).
const NAIVE_SAMPLE: usize = 10_000;

/// The same gate, one command per round trip: read stock, meta and ledger size, write meta
/// and stock, read both back. Returns (whole gate, writes alone).
async fn naive(
    store: &RedisStore,
    activity: &ActivityId,
    products: &[String],
) -> (Duration, Duration) {
    let ks = KeySpace::new("naive").expect("prefix");
    let mut writes = Duration::ZERO;
    let started = Instant::now();
    for p in products {
        let k = ks.product(
            activity,
            &seckill_console::domain::ProductId::parse(p).expect("id"),
        );
        store
            .query(&k.stock, redis::cmd("GET").arg(&k.stock))
            .await
            .expect("GET");
        store
            .query(
                &k.meta,
                redis::cmd("HMGET")
                    .arg(&k.meta)
                    .arg(&seckill_console::domain::stock::META_FIELDS[..]),
            )
            .await
            .expect("HMGET");
        store
            .query(&k.ledger, redis::cmd("HLEN").arg(&k.ledger))
            .await
            .expect("HLEN");
        let w = Instant::now();
        store
            .query(
                &k.meta,
                redis::cmd("HSET")
                    .arg(&k.meta)
                    .arg("initial")
                    .arg(100)
                    .arg("limit")
                    .arg(2)
                    .arg("epoch")
                    .arg(1)
                    .arg("bucket_capacity")
                    .arg(200)
                    .arg("bucket_rate")
                    .arg(0.5)
                    .arg("deducted")
                    .arg(0)
                    .arg("returned")
                    .arg(0),
            )
            .await
            .expect("HSET");
        store
            .query(&k.stock, redis::cmd("SET").arg(&k.stock).arg(100).arg("NX"))
            .await
            .expect("SET");
        writes += w.elapsed();
        store
            .query(&k.stock, redis::cmd("GET").arg(&k.stock))
            .await
            .expect("GET");
        store
            .query(
                &k.meta,
                redis::cmd("HMGET")
                    .arg(&k.meta)
                    .arg(&seckill_console::domain::stock::META_FIELDS[..]),
            )
            .await
            .expect("HMGET");
    }
    (started.elapsed(), writes)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if std::env::var("SECKILL_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_env("SECKILL_LOG"))
            .with_writer(std::io::stderr)
            .try_init();
    }
    rt.block_on(async {
        let server = RedisServer::start();
        let store = standalone(&server.url()).await;
        println!(
            "preheat benchmark: redis-server {} (private), SQLite file",
            server.addr()
        );
        println!(
            "{:>9}  {:>10}  {:>12}  {:>22}  {:>7}  {:>24}",
            "products",
            "preheat_ms",
            "products/s",
            "one-per-round-trip/s",
            "ratio",
            "writes one-per-RT/s"
        );
        let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
            .ok()
            .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![10_000, 100_000]);
        for n in sizes {
            let db = TestDb::sqlite();
            let lib = db.open().await;
            let id = format!("bench{n}");
            let products: Vec<(String, i64, i64)> =
                (0..n).map(|i| (format!("p{i:06}"), 100, 2)).collect();
            let refs: Vec<(&str, i64, i64)> = products
                .iter()
                .map(|(p, s, l)| (p.as_str(), *s, *l))
                .collect();
            import(&lib, &id, &refs, future_window()).await;
            let activity = ActivityId::parse(&id).expect("id");
            let opts = preheat_options("bench", Duration::from_secs(60));

            let started = Instant::now();
            let report = preheat(
                &store,
                &lib,
                &KeySpace::default(),
                &activity,
                &opts,
                &Silent,
            )
            .await
            .expect("preheat");
            let took = started.elapsed();
            assert_eq!(report.decision, "go", "{:?}", report.reasons);
            assert_eq!(report.written, n);
            let rate = n as f64 / took.as_secs_f64();

            let sample: Vec<String> = products
                .iter()
                .take(NAIVE_SAMPLE)
                .map(|p| p.0.clone())
                .collect();
            let (naive_took, naive_writes) = naive(&store, &activity, &sample).await;
            let naive_rate = sample.len() as f64 / naive_took.as_secs_f64();
            let writes_rate = sample.len() as f64 / naive_writes.as_secs_f64();
            println!(
                "{n:>9}  {:>10.0}  {rate:>12.0}  {naive_rate:>22.0}  {:>6.1}x  {writes_rate:>24.0}",
                took.as_secs_f64() * 1000.0,
                rate / naive_rate
            );
            if n == 100_000 {
                println!(
                    "targets: pipelined >= 20x one-key: {}; 100,000 products under 2 s: {}",
                    if rate / naive_rate >= 20.0 {
                        "met"
                    } else {
                        "MISSED"
                    },
                    if took < Duration::from_secs(2) {
                        "met"
                    } else {
                        "MISSED"
                    }
                );
            }
            if std::env::var("BENCH_STATS").is_ok() {
                println!("{}", server.cli(&["INFO", "commandstats"]));
            }
            let _ = redis::cmd("FLUSHALL")
                .query_async::<()>(
                    &mut redis::Client::open(server.url())
                        .expect("client")
                        .get_multiplexed_async_connection()
                        .await
                        .expect("conn"),
                )
                .await;
            lib.close().await;
        }
    });
}
