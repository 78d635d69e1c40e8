//! A seller in a child process of its own (its CPU is not the console's): `deduct.lua` on the
//! first `products` products of an activity in turn, `rate` sales a second in all, each sale's
//! order and outbox row written every 10 ms, as an app server does. The benchmarks run it by
//! starting their own binary again with `BENCH_SELLER` set ([`spawn`], [`run_if_asked`]).

use super::fixtures::{product_keys, standalone};
use super::{RedisServer, TestDb};
use std::time::{Duration, Instant};

/// What the seller sells.
#[derive(Clone, Debug)]
pub struct Sale {
    pub activity: String,
    /// Products `<product_prefix><n>`, n zero-padded to `width` digits, for n < `products`.
    pub product_prefix: String,
    pub width: usize,
    pub products: u64,
    /// Sales a second, in all.
    pub rate: u64,
    /// Keeps the request ids of one run apart from another's.
    pub request_prefix: String,
}

async fn sell(redis_url: &str, db_url: &str, secs: u64, sale: &Sale) {
    use seckill_console::db::orders::{NewOrder, insert_with_outbox};
    use seckill_console::domain::order::OrderStatus;
    use seckill_console::redis::stock::{Deducted, deduct};
    let store = standalone(redis_url).await;
    let db = seckill_console::db::Db::connect(
        &seckill_console::redact::SecretUrl::new(db_url.to_string()),
        &seckill_console::db::DbOptions::default(),
    )
    .await
    .expect("seller's database");
    let per_tick = (sale.rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut n: u64 = 0;
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        tick.tick().await;
        let mut orders = Vec::new();
        for _ in 0..per_tick {
            n += 1;
            let product = format!(
                "{}{:0width$}",
                sale.product_prefix,
                n % sale.products.max(1),
                width = sale.width
            );
            let p = &sale.request_prefix;
            let (rid, user) = (format!("{p}-{n}"), format!("{p}-u{n}"));
            let k = product_keys(&sale.activity, &product);
            if let Ok(Deducted::Remaining(_)) = deduct(&store, &k, &rid, &user, "1").await {
                orders.push(NewOrder {
                    order_id: format!("o-{rid}"),
                    request_id: rid,
                    activity_id: sale.activity.clone(),
                    product_id: product,
                    user_id: user,
                    quantity: 1,
                    status: OrderStatus::PendingPayment,
                });
            }
        }
        if !orders.is_empty() {
            insert_with_outbox(&db, &orders).await.expect("orders");
        }
    }
}

/// The seller for `secs` seconds, in a child process of this binary.
pub fn spawn(server: &RedisServer, db: &TestDb, secs: u64, sale: &Sale) -> std::process::Child {
    let s = sale;
    std::process::Command::new(std::env::current_exe().expect("exe"))
        .env(
            "BENCH_SELLER",
            format!(
                "{} {} {secs} {} {} {} {} {} {}",
                server.url(),
                db.url,
                s.activity,
                s.product_prefix,
                s.width,
                s.products,
                s.rate,
                s.request_prefix
            ),
        )
        .spawn()
        .expect("seller")
}

/// In a child started by [`spawn`]: sells, and returns true (the caller then exits).
pub fn run_if_asked(rt: &tokio::runtime::Runtime) -> bool {
    let Ok(args) = std::env::var("BENCH_SELLER") else {
        return false;
    };
    let parts: Vec<&str> = args.split(' ').collect();
    if let [
        redis_url,
        db_url,
        secs,
        activity,
        pp,
        width,
        products,
        rate,
        rp,
    ] = parts.as_slice()
    {
        let sale = Sale {
            activity: activity.to_string(),
            product_prefix: pp.to_string(),
            width: width.parse().unwrap_or(5),
            products: products.parse().unwrap_or(1),
            rate: rate.parse().unwrap_or(100),
            request_prefix: rp.to_string(),
        };
        rt.block_on(sell(redis_url, db_url, secs.parse().unwrap_or(30), &sale));
    }
    true
}
