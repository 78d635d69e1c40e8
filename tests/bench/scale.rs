//! Scale benchmark: one activity of 100,000 products through import, preheat, status,
//! reconcile and fix, on SQLite and (when SECKILL_TEST_PG_URL is set) PostgreSQL, against a
//! private redis-server. Each figure is one measured run. Run with `scripts/bench scale`.
//! BENCH_PRODUCTS changes the size.

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{future_window, standalone};
use harness::{RedisServer, TestDb};
use seckill_console::db::activity::import;
use seckill_console::domain::activity::{Activity, ActivityDef, Product};
use seckill_console::domain::{ActivityId, ProductId};
use seckill_console::ops::fix::{FixOptions, fix};
use seckill_console::ops::preheat::{PreheatOptions, preheat};
use seckill_console::ops::progress::Silent;
use seckill_console::ops::snapshot::{Scope, take};
use seckill_console::ops::status::{StatusOptions, status};
use seckill_console::redis::{KeySpace, Keyed};
use std::time::{Duration, Instant};

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let n: usize = std::env::var("BENCH_PRODUCTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000);
        let server = RedisServer::start();
        let store = standalone(&server.url()).await;
        println!(
            "scale benchmark: {n} products in one activity, redis-server {} (private)",
            server.addr()
        );
        println!(
            "{:<10} {:>10} {:>10} {:>10} {:>12} {:>14}",
            "database", "import", "preheat", "status", "reconcile", "fix 1% drift"
        );
        let mut backends = vec![TestDb::sqlite()];
        backends.extend(TestDb::postgres().await);
        for db in backends {
            let lib = db.open().await;
            let id = ActivityId::parse(&format!("scale{}", db.name())).expect("id");
            let (s, e) = future_window();
            let def = ActivityDef {
                activity: Activity {
                    activity_id: id.clone(),
                    name: "Scale".into(),
                    starts_at: s,
                    ends_at: e,
                    status: seckill_console::domain::activity::ActivityStatus::Scheduled,
                },
                products: (0..n)
                    .map(|i| {
                        let id = ProductId::parse(&format!("p{i:06}")).expect("id");
                        Product::new(id, "", 100, 2)
                    })
                    .collect(),
                status_given: true,
            };
            let keys = KeySpace::default();
            let grace = Duration::from_secs(60);
            let t = Instant::now();
            import(&lib, &def, ("bench", "scale"), &Default::default())
                .await
                .expect("import");
            let t_import = t.elapsed();

            let t = Instant::now();
            let r = preheat(
                &store,
                &lib,
                &keys,
                &id,
                &PreheatOptions {
                    force: false,
                    accept_eviction: false,
                    actor: "bench".into(),
                    grace,
                    key_ttl_days: 7,
                    interleave: Default::default(),
                },
                &Silent,
            )
            .await
            .expect("preheat");
            let t_preheat = t.elapsed();
            assert_eq!(r.decision, "go", "{:?}", r.reasons);

            let opts = StatusOptions {
                grace,
                compensation_alert: Duration::from_secs(30),
                outbox_alert: Duration::from_secs(60),
            };
            let t = Instant::now();
            let st = status(&store, &lib, &keys, &id, &opts)
                .await
                .expect("status");
            let t_status = t.elapsed();
            assert!(st.all_ok());

            // Reconcile is the same report; it is what cron runs with --fail-on-drift.
            let t = Instant::now();
            let snap = take(&store, &lib, &keys, &id, grace, &Scope::default())
                .await
                .expect("reconcile");
            let t_reconcile = t.elapsed();
            assert_eq!(snap.products.len(), n);

            // Lost writes on 1% of the products, then one fix of the whole activity.
            let drifted: Vec<Keyed> = (0..n)
                .step_by(100)
                .map(|i| {
                    let k = keys.product(&id, &ProductId::parse(&format!("p{i:06}")).expect("id"));
                    Keyed::new(&k.stock, redis::cmd("INCRBY").arg(&k.stock).arg(3).clone())
                })
                .collect();
            let count = drifted.len();
            for r in store.pipeline(drifted).await {
                r.expect("INCRBY");
            }
            let t = Instant::now();
            let f = fix(
                &store,
                &lib,
                &keys,
                &id,
                &FixOptions {
                    product: None,
                    preview: false,
                    actor: "bench".into(),
                    grace,
                    confirmed: None,
                    key_ttl_days: 7,
                    interleave: Default::default(),
                },
            )
            .await
            .expect("fix");
            let t_fix = t.elapsed();
            assert_eq!(f.products.iter().filter(|p| p.applied).count(), count);
            let after = status(&store, &lib, &keys, &id, &opts)
                .await
                .expect("status");
            assert!(after.all_ok());

            let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
            println!(
                "{:<10} {:>10} {:>10} {:>10} {:>12} {:>14}",
                db.name(),
                ms(t_import),
                ms(t_preheat),
                ms(t_status),
                ms(t_reconcile),
                ms(t_fix)
            );
            lib.close().await;
            let mut c = redis::Client::open(server.url())
                .expect("client")
                .get_multiplexed_async_connection()
                .await
                .expect("conn");
            let _: () = redis::cmd("FLUSHALL")
                .query_async(&mut c)
                .await
                .expect("flush");
        }
    });
}
