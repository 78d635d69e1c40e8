//! The live view's quiet products (issue 22, item 1): a product nothing happened to costs a
//! share of one XREAD per refresh, not a read of its keys; whatever a script writes (a sale, a
//! pause) shows within two refreshes; a write outside the scripts shows at the product's next
//! whole read, or at once on the signal that comes with it. A `status` where nothing happened
//! writes nothing, and a read far bigger than one reply's timeout is sent in windows. Checked
//! with Redis's own command counts (`INFO commandstats`) on a private server, standalone and
//! cluster.

use crate::harness::Topo;
use crate::harness::fixtures::{
    buy, commandstats, import, live_window, preheat_go, preheat_options, product_keys, redis_cmd,
};
use seckill_console::db::Db;
use seckill_console::domain::ActivityId;
use seckill_console::domain::stock::State;
use seckill_console::ops::pause::set_paused;
use seckill_console::ops::preheat::preheat;
use seckill_console::ops::progress::Silent;
use seckill_console::ops::quiet::QuietOptions;
use seckill_console::ops::snapshot::Reading;
use seckill_console::ops::tracker::{Tracker, TrackerOptions};
use seckill_console::redis::{KeySpace, RedisStore};
use std::collections::HashMap;
use std::time::Duration;

const PRODUCTS: usize = 40;

/// [`PRODUCTS`] products `<prefix>00`, `<prefix>01`, ... of 100 units, imported into a live
/// activity (not preheated).
async fn import_quiet(db: &seckill_console::db::Db, name: &str, prefix: &str) {
    let ids: Vec<String> = (0..PRODUCTS).map(|i| format!("{prefix}{i:02}")).collect();
    let products: Vec<(&str, i64, i64)> = ids.iter().map(|p| (p.as_str(), 100, 5)).collect();
    import(db, name, &products, live_window()).await;
}

/// Calls per command on every primary since the last reset (`INFO commandstats`).
async fn calls(store: &RedisStore) -> HashMap<String, u64> {
    commandstats(store)
        .await
        .into_iter()
        .map(|(name, (calls, _))| (name, calls))
        .collect()
}

async fn reset_stats(store: &RedisStore) {
    let reset = redis::cmd("CONFIG").arg("RESETSTAT").clone();
    for (addr, r) in store.on_nodes(&store.primaries(), &reset).await {
        r.unwrap_or_else(|e| panic!("CONFIG RESETSTAT on {addr}: {e}"));
    }
}

fn product(snap: &Reading, id: &str) -> seckill_console::domain::stock::ProductStatus {
    snap.status(id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not in the snapshot"))
}

struct Sale {
    store: RedisStore,
    db: Db,
    keys: KeySpace,
    id: ActivityId,
    name: String,
}

impl Sale {
    /// [`PRODUCTS`] products of 100 units, preheated.
    async fn open(topo: &Topo, db: Db, name: &str) -> Self {
        let ids: Vec<String> = (0..PRODUCTS).map(|i| format!("q{i:02}")).collect();
        let products: Vec<(&str, i64, i64)> = ids.iter().map(|p| (p.as_str(), 100, 5)).collect();
        Self::of(topo, db, name, &products).await
    }

    /// These `(id, stock, limit)` products, imported and preheated.
    async fn of(topo: &Topo, db: Db, name: &str, products: &[(&str, i64, i64)]) -> Self {
        let store = topo.store().await;
        import(&db, name, products, live_window()).await;
        let id = ActivityId::parse(name).expect("id");
        let keys = KeySpace::default();
        let r = preheat(
            &store,
            &db,
            &keys,
            &id,
            &preheat_options("test", Duration::from_secs(3600)),
            &Silent,
        )
        .await
        .expect("preheat");
        assert_eq!(r.decision, "go", "{:?}", r.reasons);
        Sale {
            store,
            db,
            keys,
            id,
            name: name.to_string(),
        }
    }

    /// Product `id` in a `status` of the sale.
    async fn status_of(&self, id: &str) -> seckill_console::domain::stock::ProductStatus {
        let r = self.status().await;
        r.products
            .into_iter()
            .find(|p| p.product == id)
            .unwrap_or_else(|| panic!("{id} not in status"))
    }

    /// `status` of the sale, as an operator runs it.
    async fn status(&self) -> seckill_console::ops::status::StatusReport {
        seckill_console::ops::status::status(
            &self.store,
            &self.db,
            &self.keys,
            &self.id,
            &status_options(),
        )
        .await
        .expect("status")
    }

    fn tracker(&self, full_every: Duration) -> Tracker {
        let mut opts = TrackerOptions::live(Duration::from_secs(3600), false);
        // The streams asked, as where the server refuses to push what moved.
        opts.quiet = Some(QuietOptions {
            hot: 1,
            slow_after: 3,
            slow_every: 2,
            full_every,
            track: false,
            ..QuietOptions::default()
        });
        Tracker::new(self.id.clone(), opts)
    }

    async fn refresh(&self, t: &mut Tracker) -> Reading {
        t.refresh(&self.store, &self.db, &self.keys)
            .await
            .expect("refresh")
    }

    /// Refreshes until every product has been quiet long enough to be asked every other time.
    async fn settle(&self, t: &mut Tracker) {
        for _ in 0..6 {
            self.refresh(t).await;
        }
        assert_eq!(t.cost.quiet.whole, 0, "still reading whole: {:?}", t.cost);
    }
}

async fn quiet_products_cost_a_share_of_an_xread(topo: Topo) {
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "quiet1").await;
    let mut t = sale.tracker(Duration::from_secs(3600));
    sale.settle(&mut t).await;

    // A quiet refresh: no product's keys read, half of them asked, the rest resting.
    reset_stats(&sale.store).await;
    let snap = sale.refresh(&mut t).await;
    let c = calls(&sale.store).await;
    let q = t.cost.quiet;
    assert_eq!(q.whole, 0, "{q:?}");
    assert_eq!(q.asked + q.resting, PRODUCTS as u64, "{q:?}");
    assert!(
        q.asked > 0 && q.resting > 0,
        "half asked, half resting: {q:?}"
    );
    for read in ["get", "hmget", "type", "xrevrange", "xrange"] {
        assert_eq!(c.get(read), None, "a quiet refresh sent {read}: {c:?}");
    }
    let xreads = c.get("xread").copied().unwrap_or(0);
    if sale.store.is_cluster() {
        assert_eq!(xreads, q.asked, "one XREAD per asked product: {c:?}");
    } else {
        assert_eq!(xreads, 1, "one XREAD for every asked product: {c:?}");
    }
    assert!(
        snap.statuses.iter().all(|v| v.state == State::Ok),
        "a preheated, quiet activity is ok"
    );

    // A sale shows within two refreshes, with its figures.
    let before = product(&snap, "q07");
    buy(&sale.store, &sale.db, &sale.name, "q07", "r1", "u1", 2).await;
    let mut seen = None;
    for _ in 0..2 {
        let snap = sale.refresh(&mut t).await;
        let p = product(&snap, "q07");
        if p.redis_remaining != before.redis_remaining {
            seen = Some(p);
            break;
        }
    }
    let p = seen.expect("the sale of q07 did not show within two refreshes");
    assert_eq!(p.redis_remaining, Some(98));
    assert_eq!(p.db_sold, 2);
    assert_eq!(p.state, State::Ok, "{p:?}");

    // A pause (another console's: the pause script appends an event) shows within two.
    let only = vec!["q11".to_string()];
    set_paused(
        &sale.store,
        &sale.db,
        &sale.keys,
        &sale.id,
        Some(&only),
        true,
        ("other", "test"),
    )
    .await
    .expect("pause");
    let mut paused = None;
    for _ in 0..2 {
        let snap = sale.refresh(&mut t).await;
        let p = product(&snap, "q11");
        if p.paused {
            paused = Some(p);
            break;
        }
    }
    let p = paused.expect("the pause of q11 did not show within two refreshes");
    // The database's side too: the live view keeps the product rows, and reads again the row
    // of a product that moved.
    assert!(p.db_paused, "{p:?}");
    assert_eq!(p.pause_reason, "test");
    assert_eq!(p.state, State::Paused, "{p:?}");

    // A stock set by hand leaves no event: shown once the product is read whole, at once on
    // a signal (the node evicted keys, a connection opened again).
    sale.settle(&mut t).await;
    let k = product_keys(&sale.name, "q20");
    redis_cmd(&sale.store, &["INCRBY", &k.stock, "5"]).await;
    t.recut();
    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, PRODUCTS as u64, "{:?}", t.cost);
    let p = product(&snap, "q20");
    assert_eq!(p.redis_remaining, Some(105));
    assert_ne!(
        p.state,
        State::Ok,
        "a stock raised by hand is never ok: {p:?}"
    );
    sale.db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn quiet_products_cost_a_share_of_an_xread_standalone() {
    quiet_products_cost_a_share_of_an_xread(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn quiet_products_cost_a_share_of_an_xread_cluster() {
    quiet_products_cost_a_share_of_an_xread(Topo::cluster()).await;
}

/// Issue 57, item 2: with Redis pushing which keys of the activity were written (client
/// tracking), a refresh where nothing moved reads no product at all, not even a stream; a sale,
/// a stock set by hand, a key deleted (as an eviction does) and a flush each show at the next
/// refresh, which reads whole only the products named. `by_key`: the pushes asked for by key
/// (the default on one primary) rather than by the activity's prefix.
async fn quiet_products_cost_nothing_when_redis_says_what_moved(topo: Topo, by_key: bool) {
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "pushed").await;
    let mut opts = TrackerOptions::live(Duration::from_secs(3600), false);
    if !by_key && let Some(q) = opts.quiet.as_mut() {
        q.track_keys_max = 0;
    }
    let mut t = Tracker::new(sale.id.clone(), opts);
    sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, PRODUCTS as u64, "{:?}", t.cost);
    assert!(t.cost.quiet.tracked, "{:?}", t.cost);
    // What Redis keeps for the reader: every product's five keys by key, one prefix else.
    let stats = sale
        .store
        .node_for_key("x")
        .expect("a node")
        .query(&redis::cmd("INFO").arg("stats").clone())
        .await;
    let stats = match stats {
        Ok(redis::Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(redis::Value::VerbatimString { text, .. }) => text,
        other => panic!("INFO stats: {other:?}"),
    };
    let field = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {stats}"))
    };
    if by_key {
        assert_eq!(field("tracking_total_keys"), 5 * PRODUCTS as u64, "{stats}");
        assert_eq!(field("tracking_total_prefixes"), 0, "{stats}");
    } else {
        assert_eq!(field("tracking_total_keys"), 0, "{stats}");
        assert!(field("tracking_total_prefixes") >= 1, "{stats}");
    }

    reset_stats(&sale.store).await;
    for _ in 0..3 {
        let snap = sale.refresh(&mut t).await;
        let q = t.cost.quiet;
        assert_eq!((q.whole, q.asked), (0, 0), "{q:?}");
        assert_eq!(q.resting, PRODUCTS as u64, "{q:?}");
        assert!(q.tracked, "{q:?}");
        assert!(snap.statuses.iter().all(|v| v.state == State::Ok));
    }
    let c = calls(&sale.store).await;
    for read in [
        "get",
        "hmget",
        "hrandfield",
        "type",
        "xrevrange",
        "xrange",
        "xread",
        "exists",
    ] {
        assert_eq!(c.get(read), None, "a quiet refresh sent {read}: {c:?}");
    }

    // A node's evicted keys grew (the status poll's signal): the pushes name what was
    // evicted, so nothing is read again (in an eviction storm a console re-read every product
    // at every poll, on the Redis short of memory).
    t.recut();
    sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, 0, "{:?}", t.cost);

    // A sale: that product alone read whole, at the next refresh.
    buy(&sale.store, &sale.db, &sale.name, "q07", "r1", "u1", 2).await;
    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, 1, "{:?}", t.cost);
    let p = product(&snap, "q07");
    assert_eq!((p.redis_remaining, p.db_sold), (Some(98), 2), "{p:?}");
    assert_eq!(p.state, State::Ok, "{p:?}");
    // By key, Redis pushes a key once after it was registered: the read registered it again,
    // so the next sale of the same product shows too.
    buy(&sale.store, &sale.db, &sale.name, "q07", "r2", "u2", 1).await;
    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, 1, "{:?}", t.cost);
    let p = product(&snap, "q07");
    assert_eq!((p.redis_remaining, p.db_sold), (Some(97), 3), "{p:?}");
    // And a product read at the refresh after its sale stays quiet: nothing pushed twice.
    sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, 0, "{:?}", t.cost);

    // A stock raised by hand leaves no event, but Redis names the key: shown at once.
    let k = product_keys(&sale.name, "q20");
    redis_cmd(&sale.store, &["INCRBY", &k.stock, "5"]).await;
    let snap = sale.refresh(&mut t).await;
    let p = product(&snap, "q20");
    assert_eq!(p.redis_remaining, Some(105));
    assert_ne!(
        p.state,
        State::Ok,
        "a stock raised by hand is never ok: {p:?}"
    );

    // A key gone without a script (an eviction, a DEL): the lost piece at the next refresh.
    let k = product_keys(&sale.name, "q21");
    redis_cmd(&sale.store, &["DEL", &k.buyers]).await;
    let snap = sale.refresh(&mut t).await;
    let p = product(&snap, "q21");
    assert_ne!(
        p.state,
        State::Ok,
        "a product without its buyers hash: {p:?}"
    );

    // A flush: every product read whole, every one missing.
    let flush = redis::cmd("FLUSHALL").clone();
    for (addr, r) in sale.store.on_nodes(&sale.store.primaries(), &flush).await {
        r.unwrap_or_else(|e| panic!("FLUSHALL on {addr}: {e}"));
    }
    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, PRODUCTS as u64, "{:?}", t.cost);
    assert!(
        snap.statuses.iter().all(|v| v.state == State::Missing),
        "{:?}",
        snap.statuses.iter().map(|v| v.state).collect::<Vec<_>>()
    );
    sale.db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn quiet_products_cost_nothing_when_redis_says_what_moved_standalone() {
    quiet_products_cost_nothing_when_redis_says_what_moved(Topo::standalone(), true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn quiet_products_cost_nothing_when_redis_says_what_moved_by_prefix() {
    quiet_products_cost_nothing_when_redis_says_what_moved(Topo::standalone(), false).await;
}

/// A cluster's slots move under a reshard: the pushes are asked for by prefix there.
#[tokio::test(flavor = "multi_thread")]
async fn quiet_products_cost_nothing_when_redis_says_what_moved_cluster() {
    quiet_products_cost_nothing_when_redis_says_what_moved(Topo::cluster(), false).await;
}

/// A user whose ACL refuses CLIENT (tracking) still gets an exact live view: the streams are
/// asked, as before the pushes; and a server restarted under a tracking console (its pushes
/// lost with the connection) is read whole again.
#[tokio::test(flavor = "multi_thread")]
async fn without_pushes_the_streams_are_asked_and_a_restart_reads_whole() {
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "refused").await;
    topo.servers()[0].cli(&[
        "ACL", "SETUSER", "notrack", "on", ">pw", "~*", "&*", "+@all", "-client",
    ]);
    let url = format!("redis://notrack:pw@127.0.0.1:{}", topo.ports()[0]);
    let limited = crate::harness::fixtures::standalone(&url).await;
    let mut t = Tracker::new(
        sale.id.clone(),
        TrackerOptions::live(Duration::from_secs(3600), false),
    );
    let mut asked = 0;
    for _ in 0..45 {
        t.refresh(&limited, &sale.db, &sale.keys)
            .await
            .expect("refresh");
        assert!(!t.cost.quiet.tracked, "{:?}", t.cost);
        asked += t.cost.quiet.asked;
    }
    assert!(asked > 0, "quiet products were never asked");
    buy(&sale.store, &sale.db, &sale.name, "q03", "r1", "u1", 1).await;
    let mut shown = false;
    for _ in 0..6 {
        let snap = t
            .refresh(&limited, &sale.db, &sale.keys)
            .await
            .expect("refresh");
        if product(&snap, "q03").redis_remaining == Some(99) {
            shown = true;
            break;
        }
    }
    assert!(shown, "the sale never showed without the pushes");

    // With the pushes: quiet, then the server restarts (its data kept on disk).
    let mut t = Tracker::new(
        sale.id.clone(),
        TrackerOptions::live(Duration::from_secs(3600), false),
    );
    sale.refresh(&mut t).await;
    sale.refresh(&mut t).await;
    assert_eq!(t.cost.quiet.whole, 0, "{:?}", t.cost);
    topo.servers()[0].cli(&["SAVE"]);
    let mut topo = topo;
    if let Topo::Standalone(s) = &mut topo {
        s.restart();
    }
    let mut whole = 0;
    for _ in 0..3 {
        let r = t.refresh(&sale.store, &sale.db, &sale.keys).await;
        if let Ok(snap) = r {
            whole = t.cost.quiet.whole;
            assert_eq!(product(&snap, "q03").redis_remaining, Some(99));
            if whole > 0 {
                break;
            }
        }
    }
    assert_eq!(
        whole, PRODUCTS as u64,
        "a restart reads every product whole"
    );
    sale.db.close().await;
}

/// Without a signal, a write outside the scripts shows at the product's next whole read:
/// every product is read whole at least once per `full_every`, in turns.
#[tokio::test(flavor = "multi_thread")]
async fn a_hand_written_stock_shows_within_the_whole_read_period() {
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "quiet2").await;
    let period = Duration::from_secs(2);
    let mut t = sale.tracker(period);
    for _ in 0..6 {
        sale.refresh(&mut t).await;
    }
    let k = product_keys(&sale.name, "q03");
    redis_cmd(&sale.store, &["SET", &k.stock, "77"]).await;
    let started = std::time::Instant::now();
    let mut whole = 0;
    let shown = loop {
        let snap = sale.refresh(&mut t).await;
        whole += t.cost.quiet.whole;
        let p = product(&snap, "q03");
        if p.redis_remaining == Some(77) {
            break p;
        }
        assert!(
            started.elapsed() < period + Duration::from_secs(5),
            "a stock set by hand did not show within the period of {period:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_ne!(shown.state, State::Ok, "{shown:?}");
    // No script wrote, so no signal came with it: the stock showed through a whole read.
    assert!(whole >= 1, "the product was read whole");
    sale.db.close().await;
}

/// A `status` of products where nothing happened since the last one writes no checkpoint: the
/// first saves the books, the second finds them as saved and writes nothing (it sent 400,000
/// writes for 100,000 quiet products).
#[tokio::test(flavor = "multi_thread")]
async fn a_status_where_nothing_happened_writes_nothing() {
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "quiet3").await;
    buy(&sale.store, &sale.db, &sale.name, "q01", "r1", "u1", 1).await;
    let writes = ["hset", "rename", "pexpire", "pexpireat", "persist", "del"];
    let mut written = Vec::new();
    for _ in 0..3 {
        reset_stats(&sale.store).await;
        let r = sale.status().await;
        assert!(r.all_ok(), "{:?}", r.alerts);
        let c = calls(&sale.store).await;
        written.push(
            writes
                .iter()
                .map(|w| c.get(*w).copied().unwrap_or(0))
                .sum::<u64>(),
        );
    }
    assert!(
        written[0] > 0,
        "the first status saves the books: {written:?}"
    );
    assert_eq!(
        written[1..],
        [0, 0],
        "nothing happened, nothing written: {written:?}"
    );
    // A sale since: that product's checkpoint only.
    buy(&sale.store, &sale.db, &sale.name, "q02", "r2", "u2", 1).await;
    reset_stats(&sale.store).await;
    sale.status().await;
    let c = calls(&sale.store).await;
    assert_eq!(c.get("rename"), Some(&1), "one checkpoint written: {c:?}");
    sale.db.close().await;
}

/// A `status` reads each product's stream once before its keys and asks after them whether it
/// moved, a hundred streams to an XREAD (it read every stream twice); it reads the meta hash
/// whole in one bounded command, and a hash wider than that by the fields' names.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_reads_each_stream_once_and_the_meta_hash_whole() {
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "quiet4").await;
    // 70 fields another writer left in one product's meta hash.
    let k = product_keys(&sale.name, "q05");
    let mut hset = vec!["HSET".to_string(), k.meta.clone()];
    for i in 0..70 {
        hset.extend([format!("x{i}"), "1".to_string()]);
    }
    redis_cmd(
        &sale.store,
        &hset.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    reset_stats(&sale.store).await;
    let r = sale.status().await;
    assert!(r.all_ok(), "{:?}", r.alerts);
    let wide = r.products.iter().find(|p| p.product == "q05").expect("q05");
    assert_eq!(
        (wide.redis_remaining, wide.redis_limit),
        (Some(100), Some(5)),
        "{wide:?}"
    );
    let c = calls(&sale.store).await;
    let n = PRODUCTS as u64;
    // The wide hash's product is read a second time, by name.
    assert_eq!(c.get("xrevrange"), Some(&(n + 1)), "{c:?}");
    assert_eq!(c.get("hrandfield"), Some(&n), "{c:?}");
    assert_eq!(c.get("hmget"), Some(&1), "{c:?}");
    // The two hashes' types per product; whether the (empty) streams are there, a hundred to
    // an EXISTS.
    assert_eq!(c.get("type"), Some(&(2 * n + 2)), "{c:?}");
    assert_eq!(c.get("exists"), Some(&1), "{c:?}");
    assert!(
        c.get("xread").is_some_and(|&x| (1..=4).contains(&x)),
        "{c:?}"
    );
    sale.db.close().await;
}

/// Before a preheat none of the streams exists: one EXISTS of a hundred says so for all of them,
/// without asking each stream's type (a preheat's first read of 100,000 products sent 100,000
/// TYPEs for it).
#[tokio::test(flavor = "multi_thread")]
async fn a_read_before_the_preheat_asks_no_stream_by_name() {
    use seckill_console::ops::status::status;
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let db = tdb.open().await;
    import_quiet(&db, "quiet5", "q").await;
    let store = topo.store().await;
    reset_stats(&store).await;
    let id = ActivityId::parse("quiet5").expect("id");
    let r = status(&store, &db, &KeySpace::default(), &id, &status_options())
        .await
        .expect("status");
    assert_eq!(r.products.len(), PRODUCTS);
    assert!(
        r.products.iter().all(|p| p.redis_remaining.is_none()),
        "{:?}",
        r.products
    );
    let c = calls(&store).await;
    assert_eq!(c.get("exists"), Some(&1), "{c:?}");
    // The buyers and ledger keys' types only.
    assert_eq!(c.get("type"), Some(&(2 * PRODUCTS as u64)), "{c:?}");
    db.close().await;
}

fn status_options() -> seckill_console::ops::status::StatusOptions {
    seckill_console::ops::status::StatusOptions {
        grace: Duration::from_secs(3600),
        compensation_alert: Duration::from_secs(60),
        outbox_alert: Duration::from_secs(60),
        gauge: Default::default(),
    }
}

/// 600,000 commands through one store whose replies may take 300 ms: sent all at once, the
/// last of them waited behind the rest past the timeout; in windows, every one is answered.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_bigger_than_the_response_timeout_goes_in_windows() {
    use seckill_console::redact::SecretUrl;
    use seckill_console::redis::{Keyed, RedisSettings, RedisTarget};
    let server = crate::harness::RedisServer::start();
    let store = RedisStore::connect(RedisSettings {
        target: RedisTarget::Standalone(SecretUrl::new(server.url())),
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_millis(300),
        tls_ca: None,
        read_only: true,
    })
    .await
    .expect("connect");
    let n = 600_000;
    let cmds: Vec<Keyed> = (0..n)
        .map(|i| {
            let key = format!("k{}", i % 1_000);
            Keyed::new(&key, redis::cmd("STRLEN").arg(&key).clone())
        })
        .collect();
    let replies = store.pipeline(cmds).await;
    let failed: Vec<String> = replies
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .take(3)
        .collect();
    assert_eq!(replies.len(), n);
    assert!(failed.is_empty(), "replies lost: {failed:?}");
}

/// An activity bigger than one window of the cut (2,000 products) is read a few windows at a
/// time; each product keeps its own cut: the stocks differ from product to product, and the
/// two written by hand (one raised, one deleted) are the ones reported, in the last windows.
async fn products_in_every_window_keep_their_own_cut(topo: Topo) {
    let tdb = crate::harness::TestDb::sqlite();
    let name = "windows";
    let n = 4_500;
    let stock = |i: usize| 10 + (i * 7 % 97) as i64;
    let ids: Vec<String> = (0..n).map(|i| format!("w{i:04}")).collect();
    let products: Vec<(&str, i64, i64)> = ids
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_str(), stock(i), 5))
        .collect();
    let sale = Sale::of(&topo, tdb.open().await, name, &products).await;
    let raised = product_keys(name, "w2500");
    redis_cmd(&sale.store, &["INCRBY", &raised.stock, "3"]).await;
    let gone = product_keys(name, "w4400");
    redis_cmd(&sale.store, &["DEL", &gone.stock]).await;

    let r = sale.status().await;
    assert_eq!(r.products.len(), n);
    for (i, p) in r.products.iter().enumerate() {
        assert_eq!(p.product, ids[i], "{}", topo.name());
        let (remaining, state) = match i {
            2500 => (Some(stock(i) + 3), State::Drift),
            4400 => (None, State::Missing),
            _ => (Some(stock(i)), State::Ok),
        };
        assert_eq!(
            (p.redis_remaining, p.state),
            (remaining, state),
            "{} {}: {p:?}",
            topo.name(),
            p.product
        );
    }
    sale.db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn products_in_every_window_keep_their_own_cut_standalone() {
    products_in_every_window_keep_their_own_cut(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn products_in_every_window_keep_their_own_cut_cluster() {
    products_in_every_window_keep_their_own_cut(Topo::cluster()).await;
}

/// Products with no key at all (an activity before its preheat) are asked whether a key
/// appeared, fifty to an EXISTS on a single server, not read whole on every refresh (that was
/// 0.7 s of Redis a refresh for 100,000 products); a stock set by hand and the preheat each
/// show within two refreshes.
async fn products_without_keys_are_asked_whether_one_appeared(topo: Topo) {
    let tdb = crate::harness::TestDb::sqlite();
    let db = tdb.open().await;
    let name = "bare";
    import_quiet(&db, name, "b").await;
    let sale = Sale {
        store: topo.store().await,
        db,
        keys: KeySpace::default(),
        id: ActivityId::parse(name).expect("id"),
        name: name.to_string(),
    };
    let mut t = sale.tracker(Duration::from_secs(3600));
    sale.settle(&mut t).await;

    reset_stats(&sale.store).await;
    let snap = sale.refresh(&mut t).await;
    let c = calls(&sale.store).await;
    let q = t.cost.quiet;
    assert_eq!(q.whole, 0, "{q:?}");
    assert!(q.asked > 0 && q.resting > 0, "{q:?}");
    for read in ["get", "hmget", "hrandfield", "type", "xrevrange", "xread"] {
        assert_eq!(
            c.get(read),
            None,
            "a refresh of bare products sent {read}: {c:?}"
        );
    }
    let exists = c.get("exists").copied().unwrap_or(0);
    if sale.store.is_cluster() {
        assert_eq!(exists, q.asked, "one EXISTS per asked product: {c:?}");
    } else {
        assert_eq!(exists, 1, "one EXISTS for every asked product: {c:?}");
    }
    assert!(
        snap.statuses.iter().all(|v| v.redis_remaining.is_none()),
        "nothing in Redis yet"
    );

    // A stock set by hand on a product without keys: shown within two refreshes, never ok.
    let k = product_keys(name, "b13");
    redis_cmd(&sale.store, &["SET", &k.stock, "50"]).await;
    let mut seen = None;
    for _ in 0..2 {
        let p = product(&sale.refresh(&mut t).await, "b13");
        if p.redis_remaining == Some(50) {
            seen = Some(p);
            break;
        }
    }
    let p = seen.expect("a stock set by hand did not show within two refreshes");
    assert_ne!(p.state, State::Ok, "{p:?}");
    redis_cmd(&sale.store, &["DEL", &k.stock]).await;
    sale.settle(&mut t).await;

    // The preheat writes every product: each shows its stock within two refreshes.
    preheat_go(&sale.store, &sale.db, name, Duration::from_secs(3600)).await;
    let mut shown = 0;
    for _ in 0..2 {
        let snap = sale.refresh(&mut t).await;
        shown = snap
            .statuses
            .iter()
            .filter(|v| v.redis_remaining == Some(100) && v.state == State::Ok)
            .count();
        if shown == PRODUCTS {
            break;
        }
    }
    assert_eq!(
        shown, PRODUCTS,
        "preheated products shown ok within two refreshes"
    );
    sale.db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn products_without_keys_are_asked_whether_one_appeared_standalone() {
    products_without_keys_are_asked_whether_one_appeared(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn products_without_keys_are_asked_whether_one_appeared_cluster() {
    products_without_keys_are_asked_whether_one_appeared(Topo::cluster()).await;
}

/// The TUI's overview of the activities not selected keeps a glance of each between its polls
/// and reads it as the live view does: a quiet product is asked, not read (the overview read up
/// to 20 activities of 20,000 products whole every 5 s). A preheat and a sale show at the next
/// poll, with the counts the overview shows.
async fn an_overview_glance_asks_quiet_products(topo: Topo) {
    use seckill_console::ops::glance::{Counts, Glance};
    let tdb = crate::harness::TestDb::sqlite();
    let db = tdb.open().await;
    let name = "glance";
    import_quiet(&db, name, "g").await;
    let store = topo.store().await;
    let keys = KeySpace::default();
    let id = ActivityId::parse(name).expect("id");
    let opts = QuietOptions {
        hot: 0,
        slow_after: 2,
        slow_every: 1,
        full_every: Duration::from_secs(3600),
        track: false,
        ..QuietOptions::default()
    };
    let mut g = Glance::new(id.clone(), opts);
    let n = PRODUCTS;
    let unpreheated = Counts {
        alerts: n,
        present: 0,
        products: n,
    };
    assert_eq!(
        g.read(&store, &db, &keys).await.expect("glance"),
        unpreheated
    );
    let key_reads = ["get", "hmget", "hrandfield", "type", "xrevrange"];
    let quiet = |c: &HashMap<String, u64>, asks: &str, what: &str| {
        for read in key_reads {
            assert_eq!(
                c.get(read),
                None,
                "{what}: a quiet glance sent {read}: {c:?}"
            );
        }
        let expected = if store.is_cluster() { n as u64 } else { 1 };
        assert_eq!(c.get(asks), Some(&expected), "{what}: {c:?}");
    };
    // A cluster's first read opens the connections to its nodes, which the next read takes
    // for a restart and reads whole.
    assert_eq!(
        g.read(&store, &db, &keys).await.expect("glance"),
        unpreheated
    );
    reset_stats(&store).await;
    assert_eq!(
        g.read(&store, &db, &keys).await.expect("glance"),
        unpreheated
    );
    quiet(&calls(&store).await, "exists", "before the preheat");

    preheat_go(&store, &db, name, Duration::from_secs(3600)).await;
    let preheated = Counts {
        alerts: 0,
        present: n,
        products: n,
    };
    assert_eq!(g.read(&store, &db, &keys).await.expect("glance"), preheated);
    reset_stats(&store).await;
    assert_eq!(g.read(&store, &db, &keys).await.expect("glance"), preheated);
    quiet(&calls(&store).await, "xread", "after the preheat");

    // A sale: its product is read whole at the next poll and stays without an alert.
    buy(&store, &db, name, "g07", "r1", "u1", 2).await;
    assert_eq!(g.read(&store, &db, &keys).await.expect("glance"), preheated);
    assert_eq!(g.cost().whole, 1, "{:?}", g.cost());
    db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overview_glance_asks_quiet_products_standalone() {
    an_overview_glance_asks_quiet_products(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overview_glance_asks_quiet_products_cluster() {
    an_overview_glance_asks_quiet_products(Topo::cluster()).await;
}

/// A product whose counters cannot be read (a hand-written `deducted`, a meta hash gone after
/// its sales) has no books to carry from one refresh to the next. The live view settled it
/// from scratch at every refresh: both sides read to the end, a whole ledger a second during
/// the incident that made it unreadable. It is now settled again only when its cut moves, or
/// once per `verify_every` (what the books' sum check costs a carried product): an order that
/// lands for it meanwhile shows by then.
async fn unreadable_counters_are_settled_again_when_the_cut_moves(topo: Topo) {
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::of(
        &topo,
        tdb.open().await,
        "unkept",
        &[("c", 100, 5), ("n", 100, 5)],
    )
    .await;
    buy(&sale.store, &sale.db, &sale.name, "c", "r1", "u1", 3).await;
    buy(&sale.store, &sale.db, &sale.name, "n", "r2", "u1", 1).await;
    let k = product_keys(&sale.name, "c");
    redis_cmd(&sale.store, &["HSET", &k.meta, "deducted", "x"]).await;
    let opts = TrackerOptions::live(Duration::from_secs(3600), false);
    let mut t = Tracker::new(sale.id.clone(), opts.clone());

    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.settled, 2, "{:?}", t.cost);
    let c = product(&snap, "c");
    assert_eq!((c.state, c.db_sold), (State::Corrupt, 3), "{c:?}");
    for n in 0..3 {
        let snap = sale.refresh(&mut t).await;
        assert_eq!(t.cost.settled, 0, "refresh {n} settled again: {:?}", t.cost);
        assert_eq!(t.cost.held, 1, "{:?}", t.cost);
        let c = product(&snap, "c");
        assert_eq!((c.state, c.db_sold), (State::Corrupt, 3), "{c:?}");
    }

    // Its cut moved (a stock written by hand): settled again at once, then held again.
    redis_cmd(&sale.store, &["SET", &k.stock, "90"]).await;
    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.settled, 1, "{:?}", t.cost);
    assert_eq!(product(&snap, "c").state, State::Corrupt);
    sale.refresh(&mut t).await;
    assert_eq!(t.cost.settled, 0, "{:?}", t.cost);

    // An order that lands with no move in Redis shows once `verify_every` has passed (here
    // at once: the period is set to zero).
    let order = seckill_console::db::orders::NewOrder {
        order_id: "o-late".into(),
        request_id: "late".into(),
        activity_id: sale.name.clone(),
        product_id: "c".into(),
        user_id: "u2".into(),
        quantity: 2,
        status: seckill_console::domain::order::OrderStatus::PendingPayment,
    };
    seckill_console::db::orders::insert_with_outbox(&sale.db, &[order])
        .await
        .expect("order");
    let mut t = t.with_options(TrackerOptions {
        verify_every: Duration::ZERO,
        ..opts.clone()
    });
    let snap = sale.refresh(&mut t).await;
    assert!(t.cost.settled >= 1, "{:?}", t.cost);
    assert_eq!(product(&snap, "c").db_sold, 5);
    let mut t = t.with_options(opts);

    // Readable again: carried like any other product.
    redis_cmd(&sale.store, &["HSET", &k.meta, "deducted", "3"]).await;
    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.settled, 1, "{:?}", t.cost);
    assert_ne!(product(&snap, "c").state, State::Corrupt);
    sale.refresh(&mut t).await;
    assert_eq!(t.cost.settled, 0, "{:?}", t.cost);
    sale.db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_counters_are_settled_again_when_the_cut_moves_standalone() {
    unreadable_counters_are_settled_again_when_the_cut_moves(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_counters_are_settled_again_when_the_cut_moves_cluster() {
    unreadable_counters_are_settled_again_when_the_cut_moves(Topo::cluster()).await;
}

/// A console opened on a running sale (its connections not yet open) reads every product
/// whole once, then only asks: opening a node's first connection during a read is not a
/// restart. A connection opened again between two reads is (the node may have restarted from
/// an older snapshot). One lost and opened again in the middle of a read follows the same rule
/// (`reopened`, unit-tested in `ops/quiet/mod.rs`); no hook here stops a read half way.
async fn a_new_console_reads_whole_once(topo: Topo) {
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "fresh1").await;
    // Another console's store: no connection of it is open yet.
    let fresh = topo.store().await;
    let mut opts = TrackerOptions::live(Duration::from_secs(3600), false);
    opts.quiet = Some(QuietOptions {
        hot: 0,
        slow_after: 1_000,
        slow_every: 1,
        full_every: Duration::from_secs(3600),
        track: false,
        ..QuietOptions::default()
    });
    let mut t = Tracker::new(sale.id.clone(), opts);
    t.refresh(&fresh, &sale.db, &sale.keys)
        .await
        .expect("first refresh");
    assert_eq!(t.cost.quiet.whole, PRODUCTS as u64, "{:?}", t.cost);
    for n in 2..=4 {
        let snap = t
            .refresh(&fresh, &sale.db, &sale.keys)
            .await
            .expect("refresh");
        let q = t.cost.quiet;
        assert_eq!(
            (q.whole, q.asked),
            (0, PRODUCTS as u64),
            "refresh {n} read whole again: {:?}",
            t.cost
        );
        assert!(snap.statuses.iter().all(|v| v.state == State::Ok));
    }

    // Every connection of the console dropped and opened again outside the tracker (a
    // restart, as the console sees one, found by another poller's command): the tracker's
    // next refresh succeeds and must read every product whole on the new connections' word
    // alone, and the one after reads none. (A refresh that met the dropped connection itself
    // would fail and start over, which proves nothing of this.)
    let kill = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("no")
        .clone();
    let ping = redis::cmd("PING").clone();
    for node in fresh.primaries() {
        let before = node.generation();
        let _ = node.query(&kill).await;
        let mut answered = false;
        for _ in 0..50 {
            if node.query(&ping).await.is_ok() && node.generation() > before {
                answered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(answered, "{}: no new connection after the kill", node.addr);
    }
    t.refresh(&fresh, &sale.db, &sale.keys)
        .await
        .expect("the refresh after the reconnection");
    assert_eq!(
        t.cost.quiet.whole, PRODUCTS as u64,
        "a reopened connection did not read whole: {:?}",
        t.cost
    );
    t.refresh(&fresh, &sale.db, &sale.keys)
        .await
        .expect("refresh");
    assert_eq!(t.cost.quiet.whole, 0, "{:?}", t.cost);
    sale.db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_console_reads_whole_once_standalone() {
    a_new_console_reads_whole_once(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_console_reads_whole_once_cluster() {
    a_new_console_reads_whole_once(Topo::cluster()).await;
}

/// A ledger lost and then back as it was (a failover or restart to a replica that still had
/// it): the live view's books, which while it was gone read its orders as unledgered, are
/// settled again and agree with a fresh `status`, without a dropped connection to force a start
/// over (5,000-case hunt, invariant 7: the live view kept a false `corrupt`, "the counters hold
/// 4 unit(s) that no ledger entry names", that `status` did not show).
#[tokio::test(flavor = "multi_thread")]
async fn a_ledger_back_after_its_loss_settles_the_live_books_again() {
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::of(&topo, tdb.open().await, "ledgerback", &[("lb", 20, 5)]).await;
    // Whole reads every refresh: what Redis lost shows without waiting for the period.
    let mut t = sale.tracker(Duration::ZERO);
    for (i, q) in [2, 1, 1].into_iter().enumerate() {
        let r = buy(
            &sale.store,
            &sale.db,
            &sale.name,
            "lb",
            &format!("lb-r{i}"),
            &format!("u{i}"),
            q,
        )
        .await;
        assert!(
            matches!(r, seckill_console::redis::stock::Deducted::Remaining(_)),
            "{r:?}"
        );
    }
    sale.refresh(&mut t).await;
    let before = product(&sale.refresh(&mut t).await, "lb");
    assert_eq!((before.state, before.db_sold), (State::Ok, 4), "{before:?}");

    let k = product_keys(&sale.name, "lb");
    let dump = match redis_cmd(&sale.store, &["DUMP", &k.ledger]).await {
        redis::Value::BulkString(b) => b,
        v => panic!("DUMP of the ledger: {v:?}"),
    };
    redis_cmd(&sale.store, &["DEL", &k.ledger]).await;
    // The newest event deleted too: the books' position is gone, so they are settled again
    // while the ledger is missing, and read its orders as unledgered.
    let newest = match redis_cmd(
        &sale.store,
        &["XREVRANGE", &k.events, "+", "-", "COUNT", "1"],
    )
    .await
    {
        redis::Value::Array(v) => match v.first() {
            Some(redis::Value::Array(e)) => match e.first() {
                Some(redis::Value::BulkString(id)) => String::from_utf8_lossy(id).into_owned(),
                other => panic!("event id: {other:?}"),
            },
            other => panic!("newest event: {other:?}"),
        },
        v => panic!("XREVRANGE: {v:?}"),
    };
    redis_cmd(&sale.store, &["XDEL", &k.events, &newest]).await;
    let lost = product(&sale.refresh(&mut t).await, "lb");
    assert_ne!(lost.state, State::Ok, "a lost ledger reads ok: {lost:?}");
    assert!(lost.unledgered > 0, "{lost:?}");
    let mut restore = redis::cmd("RESTORE");
    restore.arg(&k.ledger).arg(0).arg(dump);
    sale.store
        .query(&k.ledger, &restore)
        .await
        .expect("RESTORE the ledger");

    sale.refresh(&mut t).await;
    let live = product(&sale.refresh(&mut t).await, "lb");
    let fresh = sale.status_of("lb").await;
    assert_eq!(fresh.state, State::Ok, "{fresh:?}");
    assert_eq!(
        (
            live.state,
            live.db_sold,
            live.in_flight,
            live.unledgered,
            live.drift
        ),
        (
            fresh.state,
            fresh.db_sold,
            fresh.in_flight,
            fresh.unledgered,
            fresh.drift
        ),
        "live view {live:?}\nstatus {fresh:?}"
    );
    sale.db.close().await;
}

/// A product held (its meta hash corrupt: nothing checks its books against Redis) sees an
/// order that lands stamped before the latest change its settle read (a lagging app server's
/// clock, a commit that came late): the live view counts it sold, as `status` does, instead of
/// waiting for the hold's next settle (5,000-case hunt, invariant 7: `status` read the product
/// oversold where the live view still showed the units unsold).
#[tokio::test(flavor = "multi_thread")]
async fn a_held_product_counts_an_order_stamped_inside_the_margin() {
    use seckill_console::redis::stock::{Deducted, deduct};
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::of(&topo, tdb.open().await, "heldlate", &[("hl", 20, 5)]).await;
    let mut t = sale.tracker(Duration::ZERO);
    let k = product_keys(&sale.name, "hl");
    // A deduction whose order is still on its way, then a sale whose order lands.
    let r = deduct(&sale.store, &k, "hl-late", "u1", "2")
        .await
        .expect("deduct");
    assert!(matches!(r, Deducted::Remaining(_)), "{r:?}");
    buy(&sale.store, &sale.db, &sale.name, "hl", "hl-r0", "u0", 1).await;
    sale.refresh(&mut t).await;
    redis_cmd(&sale.store, &["HSET", &k.meta, "returned", "abc"]).await;
    let held = product(&sale.refresh(&mut t).await, "hl");
    assert_eq!((held.state, held.db_sold), (State::Corrupt, 1), "{held:?}");

    // The late order lands, stamped about a second before the sale's order: inside the
    // feed's margin of two seconds.
    let order = seckill_console::db::orders::NewOrder {
        order_id: "o-hl-late".into(),
        request_id: "hl-late".into(),
        activity_id: sale.name.clone(),
        product_id: "hl".into(),
        user_id: "u1".into(),
        quantity: 2,
        status: seckill_console::domain::order::OrderStatus::PendingPayment,
    };
    seckill_console::db::orders::insert_with_outbox(&sale.db, &[order])
        .await
        .expect("the late order");
    let stamp = chrono::Utc::now() - chrono::Duration::milliseconds(1_000);
    sale.db
        .execute(
            "UPDATE seckill_order SET created_at = ?, updated_at = ? WHERE request_id = ?",
            &[
                seckill_console::db::Arg::Time(stamp),
                seckill_console::db::Arg::Time(stamp),
                "hl-late".into(),
            ],
        )
        .await
        .expect("backdate");
    // One refresh sees the change, the next shows the product settled again.
    sale.refresh(&mut t).await;
    let live = product(&sale.refresh(&mut t).await, "hl");
    let fresh = sale.status_of("hl").await;
    assert_eq!(fresh.db_sold, 3, "{fresh:?}");
    assert_eq!(
        (live.state, live.db_sold),
        (fresh.state, fresh.db_sold),
        "live view {live:?}\nstatus {fresh:?}"
    );
    sale.db.close().await;
}

/// A product at rest costs a live refresh nothing (its books are not read, its status stands),
/// until an order of its changes in the database alone: the feed of changed orders names it and
/// the same refresh reads it, as a fresh `status` does.
#[tokio::test(flavor = "multi_thread")]
async fn products_at_rest_are_left_out_until_an_order_of_theirs_changes() {
    let topo = Topo::standalone();
    let tdb = crate::harness::TestDb::sqlite();
    let sale = Sale::open(&topo, tdb.open().await, "rest1").await;
    buy(&sale.store, &sale.db, &sale.name, "q03", "rest-r1", "u1", 1).await;
    let mut opts = TrackerOptions::live(Duration::from_secs(3600), false);
    // No sweep page: every product the refresh reads is one that something moved.
    opts.sweep.products = 0;
    let mut t = Tracker::new(sale.id.clone(), opts);
    for _ in 0..3 {
        sale.refresh(&mut t).await;
    }
    let snap = sale.refresh(&mut t).await;
    assert_eq!(t.cost.books, 0, "a quiet refresh read books: {:?}", t.cost);
    assert_eq!(snap.statuses.len(), PRODUCTS);
    assert_eq!(product(&snap, "q03").db_sold, 1);
    assert!(snap.statuses.iter().all(|s| s.state == State::Ok));

    // The order ends in the database; nothing moves in Redis.
    assert!(
        seckill_console::db::orders::expire(&sale.db, "rest-r1")
            .await
            .expect("expire")
    );
    let live = product(&sale.refresh(&mut t).await, "q03");
    assert_eq!(t.cost.books, 1, "only q03 is read: {:?}", t.cost);
    let fresh = sale.status_of("q03").await;
    assert_eq!(live.db_sold, 0, "{live:?}");
    assert_eq!(
        (live.db_sold, live.in_flight, live.orphaned, live.state),
        (fresh.db_sold, fresh.in_flight, fresh.orphaned, fresh.state),
        "the live view and status differ: {live:?} / {fresh:?}"
    );
    sale.db.close().await;
}
