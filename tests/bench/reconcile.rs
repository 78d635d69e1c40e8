//! Reconcile benchmark: `reconcile` (the status report: one grouped database query, pipelined
//! Redis reads per node) on 10,000 and 100,000 products of one activity on SQLite and a private
//! redis-server, with some products sold (orders in the database) and some in flight (deducted,
//! no order yet, so their ledgers are read). Run with `scripts/bench reconcile`.

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{future_window, import, product_keys, standalone};
use harness::{RedisServer, TestDb};
use seckill_console::db::orders::{NewOrder, insert_with_outbox};
use seckill_console::domain::ActivityId;
use seckill_console::ops::preheat::{PreheatOptions, preheat};
use seckill_console::ops::progress::Silent;
use seckill_console::ops::status::{StatusOptions, status};
use seckill_console::redis::KeySpace;
use seckill_console::redis::stock::deduct;
use std::time::{Duration, Instant};

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let server = RedisServer::start();
        let store = standalone(&server.url()).await;
        let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
            .ok()
            .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![10_000, 100_000]);
        println!("reconcile benchmark: redis-server {} (private), SQLite file", server.addr());
        println!("{:>9}  {:>8}  {:>9}  {:>12}  {:>12}", "products", "sold", "in flight", "reconcile_ms", "us/product");
        let mut per_product = Vec::new();
        for n in sizes {
            let db = TestDb::sqlite();
            let lib = db.open().await;
            let id = format!("rec{n}");
            let products: Vec<(String, i64, i64)> = (0..n).map(|i| (format!("p{i:06}"), 100, 5)).collect();
            let refs: Vec<(&str, i64, i64)> = products.iter().map(|(p, s, l)| (p.as_str(), *s, *l)).collect();
            import(&lib, &id, &refs, future_window()).await;
            let activity = ActivityId::parse(&id).expect("id");
            let opts = PreheatOptions { force: false, accept_eviction: false, actor: "bench".into(), grace: Duration::from_secs(60), key_ttl_days: 7, interleave: Default::default() };
            let r = preheat(&store, &lib, &KeySpace::default(), &activity, &opts, &Silent).await.expect("preheat");
            assert_eq!(r.decision, "go");

            // 5% of the products sell one unit with its order; 0.5% more are in flight.
            let (mut sold, mut in_flight) = (0, 0);
            let mut orders = Vec::new();
            for (i, (p, _, _)) in products.iter().enumerate() {
                if i % 20 != 0 && i % 200 != 7 {
                    continue;
                }
                let k = product_keys(&id, p);
                let rid = format!("r-{p}");
                deduct(&store, &k, &rid, "u1", "1").await.expect("deduct");
                if i % 20 == 0 {
                    sold += 1;
                    orders.push(NewOrder {
                        order_id: format!("o-{p}"),
                        request_id: rid,
                        activity_id: id.clone(),
                        product_id: p.clone(),
                        user_id: "u1".into(),
                        quantity: 1,
                        status: seckill_console::domain::order::OrderStatus::Paid,
                    });
                } else {
                    in_flight += 1;
                }
            }
            for chunk in orders.chunks(1000) {
                insert_with_outbox(&lib, chunk).await.expect("orders");
            }

            let sopts = StatusOptions {
                grace: Duration::from_secs(60),
                compensation_alert: Duration::from_secs(30),
                outbox_alert: Duration::from_secs(3600),
                gauge: Default::default(),
            };
            let mut runs = Vec::new();
            for _ in 0..3 {
                let started = Instant::now();
                let report = status(&store, &lib, &KeySpace::default(), &activity, &sopts).await.expect("reconcile");
                runs.push(started.elapsed());
                assert_eq!(report.products.len(), n);
                assert_eq!(report.totals.db_sold, sold);
                assert_eq!(report.totals.in_flight, in_flight);
                assert!(report.all_ok(), "{:?}", report.alerts.first());
            }
            runs.sort();
            let median = runs[1];
            let us = median.as_secs_f64() * 1e6 / n as f64;
            per_product.push((n, median, us));
            println!("{n:>9}  {sold:>8}  {in_flight:>9}  {:>12.0}  {us:>12.2}", median.as_secs_f64() * 1000.0);
            lib.close().await;
            let mut c = redis::Client::open(server.url()).expect("client").get_multiplexed_async_connection().await.expect("conn");
            // ASYNC: a synchronous FLUSHALL of 100,000 products outlives the client's response timeout.
            let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query_async(&mut c).await.expect("flush");
        }
        if let (Some(small), Some(big)) = (per_product.first(), per_product.last())
            && big.0 > small.0
        {
            let growth = big.1.as_secs_f64() / small.1.as_secs_f64();
            let size = big.0 as f64 / small.0 as f64;
            println!(
                "growth: {size:.0}x the products took {growth:.1}x the time (linear = {size:.0}x); 100,000 under 2 s: {}",
                if big.0 >= 100_000 && big.1 < Duration::from_secs(2) { "met" } else if big.0 >= 100_000 { "MISSED" } else { "n/a" }
            );
        }
    });
}
