//! The minute's check of the sums in the live view (issue 57): the products at rest are
//! compared with one grouped sum of the live orders, not read, and only a product whose sum
//! moved is read. A change the feed of changed orders cannot show (an order cancelled without
//! its `updated_at` moving) still shows at the check, as `status` shows it.

use crate::harness::fixtures::{buy, import, live_window, preheat_go};
use seckill_console::domain::ActivityId;
use seckill_console::ops::status::{StatusOptions, status};
use seckill_console::ops::tracker::{Tracker, TrackerOptions};
use seckill_console::redis::KeySpace;
use std::time::Duration;

const PRODUCTS: usize = 40;

#[tokio::test(flavor = "multi_thread")]
async fn the_minutes_check_reads_only_the_products_whose_sum_moved() {
    let server = crate::harness::RedisServer::start();
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    let tdb = crate::harness::TestDb::sqlite();
    let db = tdb.open().await;
    let name = "rest2";
    let ids: Vec<String> = (0..PRODUCTS).map(|i| format!("r{i:02}")).collect();
    let products: Vec<(&str, i64, i64)> = ids.iter().map(|p| (p.as_str(), 100, 5)).collect();
    import(&db, name, &products, live_window()).await;
    preheat_go(&store, &db, name, Duration::from_secs(3600)).await;
    buy(&store, &db, name, "r03", "rest2-r1", "u1", 1).await;
    let keys = KeySpace::default();
    let id = ActivityId::parse(name).expect("id");
    let mut opts = TrackerOptions::live(Duration::from_secs(3600), false);
    // No sweep page (every product read is one something moved); the sums every 2 s.
    opts.sweep.products = 0;
    opts.verify_every = Duration::from_secs(2);
    let mut t = Tracker::new(id.clone(), opts);
    for _ in 0..3 {
        t.refresh(&store, &db, &keys).await.expect("refresh");
    }
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    // A check where nothing moved reads no product.
    let snap = t.refresh(&store, &db, &keys).await.expect("refresh");
    assert!(t.cost.verified, "{:?}", t.cost);
    assert_eq!(t.cost.books, 0, "{:?}", t.cost);
    assert_eq!(snap.status("r03").expect("r03").db_sold, 1);

    // Cancelled in the database without moving `updated_at`: the feed cannot see it.
    db.execute(
        "UPDATE seckill_order SET status = 'cancelled' WHERE request_id = 'rest2-r1'",
        &[],
    )
    .await
    .expect("cancel without moving updated_at");
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let snap = t.refresh(&store, &db, &keys).await.expect("refresh");
    assert!(t.cost.verified, "{:?}", t.cost);
    assert_eq!(t.cost.books, 1, "only r03 is read: {:?}", t.cost);
    let live = snap.status("r03").expect("r03").clone();
    let opts = StatusOptions {
        grace: Duration::from_secs(3600),
        compensation_alert: Duration::from_secs(60),
        outbox_alert: Duration::from_secs(60),
        gauge: Default::default(),
    };
    let fresh = status(&store, &db, &keys, &id, &opts)
        .await
        .expect("status")
        .products
        .into_iter()
        .find(|p| p.product == "r03")
        .expect("r03 in status");
    assert_eq!(live.db_sold, 0, "{live:?}");
    assert_eq!(
        (live.db_sold, live.in_flight, live.orphaned, live.state),
        (fresh.db_sold, fresh.in_flight, fresh.orphaned, fresh.state),
        "the live view and status differ: {live:?} / {fresh:?}"
    );
    db.close().await;
}
