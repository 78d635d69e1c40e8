//! Many readers, one cost (issue 57): the readers of one activity share the safety net's reads
//! ([`seckill_console::redis::peers`]). Three live trackers on one real Redis (two that may
//! write and a read-only one), with the net's period cut to a few seconds: each product is read
//! for the net about once a period by one of them, not once by each; the read-only reader reads
//! none itself while the others tell it; an unreadable entry one writer's sweep finds shows in
//! every reader; and a digest that differs from a reader's own cut has it read that product at
//! once.

use crate::harness::Topo;
use crate::harness::fixtures::{import, live_window, preheat_go, product_keys, redis_cmd};
use seckill_console::domain::ActivityId;
use seckill_console::domain::stock::State;
use seckill_console::ops::tracker::{Tracker, TrackerOptions};
use seckill_console::redact::SecretUrl;
use seckill_console::redis::{KeySpace, RedisSettings, RedisStore, RedisTarget};
use std::time::{Duration, Instant};

const PRODUCTS: usize = 40;

/// The net's period here (ten minutes by default).
const NET: Duration = Duration::from_secs(4);

fn options(read_only: bool) -> TrackerOptions {
    let mut o = TrackerOptions::live(Duration::from_secs(3600), read_only);
    // The sweep of entries a little faster than the live view's default (40 products).
    o.sweep.products = 4;
    if let Some(q) = o.quiet.as_mut() {
        q.full_every_tracked = NET;
    }
    o
}

async fn read_only_store(topo: &Topo) -> RedisStore {
    let target = match topo {
        Topo::Standalone(s) => RedisTarget::Standalone(SecretUrl::new(s.url())),
        Topo::Cluster(c) => {
            RedisTarget::Cluster(c.seeds().split(',').map(SecretUrl::new).collect())
        }
    };
    RedisStore::connect(RedisSettings {
        target,
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_secs(2),
        tls_ca: None,
        read_only: true,
    })
    .await
    .expect("connect read-only")
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    whole: u64,
    shared: u64,
}

async fn readers_share_the_safety_net(topo: Topo) {
    let tdb = crate::harness::TestDb::sqlite();
    let db = tdb.open().await;
    let name = "peers";
    let ids: Vec<String> = (0..PRODUCTS).map(|i| format!("n{i:02}")).collect();
    let products: Vec<(&str, i64, i64)> = ids.iter().map(|p| (p.as_str(), 100, 5)).collect();
    import(&db, name, &products, live_window()).await;
    let store = topo.store().await;
    preheat_go(&store, &db, name, Duration::from_secs(3600)).await;
    let ro = read_only_store(&topo).await;
    let keys = KeySpace::default();
    let id = ActivityId::parse(name).expect("id");
    let mut readers = [
        (Tracker::new(id.clone(), options(false)), store.clone()),
        (Tracker::new(id.clone(), options(false)), store.clone()),
        (Tracker::new(id.clone(), options(true)), ro),
    ];

    // Until each heard the others that publish (the two writers each other, the read-only
    // one both; nobody hears the read-only one).
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        for (t, s) in readers.iter_mut() {
            t.refresh(s, &db, &keys).await.expect("refresh");
        }
        let peers: Vec<u64> = readers.iter().map(|(t, _)| t.cost.quiet.peers).collect();
        if peers == [1, 1, 2] {
            break;
        }
        assert!(
            Instant::now() < until,
            "the readers never heard each other: {peers:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Three periods of the net, a refresh of each every 200 ms.
    let mut tally = [Tally::default(); 3];
    let end = Instant::now() + NET * 3;
    while Instant::now() < end {
        for ((t, s), n) in readers.iter_mut().zip(&mut tally) {
            let snap = t.refresh(s, &db, &keys).await.expect("refresh");
            assert!(snap.statuses.iter().all(|p| p.state == State::Ok));
            n.whole += t.cost.quiet.whole;
            n.shared += t.cost.quiet.shared;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Alone, each would read every product once a period: 3 x 40 each, 360 for the three.
    // Together, one read a product a period (a period cut at both ends adds one).
    let per_reader = (PRODUCTS * 4) as u64;
    let whole: u64 = tally.iter().map(|t| t.whole).sum();
    assert!(
        whole <= per_reader,
        "three readers read {whole} products for the net in three periods (one alone reads {}): {tally:?}",
        PRODUCTS * 3
    );
    assert!(
        whole >= (PRODUCTS * 2) as u64,
        "the net read too little: {tally:?}"
    );
    // The read-only reader reads none itself: every product is told it.
    assert_eq!(tally[2].whole, 0, "{tally:?}");
    assert!(tally[2].shared >= (PRODUCTS * 2) as u64, "{tally:?}");
    // Each writer takes its share and is told the other's.
    assert!(tally[0].whole > 0 && tally[1].whole > 0, "{tally:?}");
    assert!(tally[0].shared > 0 && tally[1].shared > 0, "{tally:?}");

    // An unreadable buyers entry written by hand: the cut cannot see it, only a sweep. The
    // read-only reader sweeps nothing while the writers do (each its share), and shows it
    // once told.
    let k = product_keys(name, "n07");
    redis_cmd(&store, &["HSET", &k.buyers, "u9", "lots"]).await;
    let until = Instant::now() + Duration::from_secs(30);
    let mut seen = [false; 3];
    while !seen.iter().all(|s| *s) {
        for ((t, s), seen) in readers.iter_mut().zip(&mut seen) {
            let snap = t.refresh(s, &db, &keys).await.expect("refresh");
            let p = snap.status("n07").expect("n07");
            *seen |= p.state != State::Ok;
        }
        assert!(
            Instant::now() < until,
            "an unreadable entry not shown by every reader: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    redis_cmd(&store, &["HDEL", &k.buyers, "u9"]).await;

    // A digest that differs from a reader's own cut (a write it was not told of; forged
    // here): it reads that product at once.
    let channel = seckill_console::redis::peers::channel(keys.prefix(), name);
    let (t, s) = &mut readers[2];
    t.refresh(s, &db, &keys).await.expect("refresh");
    t.refresh(s, &db, &keys).await.expect("refresh");
    redis_cmd(
        &store,
        &[
            "PUBLISH",
            &channel,
            "00000000000000ff cuts n05=0000000000000001",
        ],
    )
    .await;
    t.refresh(s, &db, &keys).await.expect("refresh");
    assert_eq!(t.cost.quiet.whole, 1, "{:?}", t.cost);
    db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readers_share_the_safety_net_standalone() {
    readers_share_the_safety_net(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readers_share_the_safety_net_cluster() {
    readers_share_the_safety_net(Topo::cluster()).await;
}
