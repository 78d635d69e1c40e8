//! `demo`: the console on its embedded default (see `seckill_console::demo`).

use super::{Ctx, Outcome};
use crate::cli::DemoArgs;
use seckill_console::demo::embedded::EmbeddedRedis;
use seckill_console::demo::{self, DEMO_ACTIVITY};
use seckill_console::domain::ActivityId;
use seckill_console::error::{Error, Result};
use seckill_console::ops::preheat::{PreheatOptions, preheat};
use seckill_console::ops::progress::Silent;
use seckill_console::redact::SecretUrl;
use seckill_console::redis::RedisTarget;
use seckill_console::tui::{TuiOptions, run};
use seckill_console::worker::demand::Demand;
use seckill_console::worker::payment::PaymentSpec;
use seckill_console::worker::{Faults, Live, LoadSpec, Strategy, run_load};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The demo's directory: the SQLite file and the redis-server's directory; removed on drop.
struct DemoDir(PathBuf);

impl Drop for DemoDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub async fn run_demo(ctx: &Ctx, args: DemoArgs) -> Result<Outcome> {
    if !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        return Err(Error::bad_input(
            "the demo opens the TUI and needs a terminal: run `seckill-console demo` in one",
        ));
    }
    if !(args.rate > 0.0 && args.rate <= 10_000.0) {
        return Err(Error::bad_input(format!(
            "--rate {} is out of range: use more than 0 and at most 10000 requests per second",
            seckill_console::error::echoed(args.rate)
        )));
    }
    let nanos = chrono::Utc::now().timestamp_subsec_nanos();
    let dir =
        DemoDir(std::env::temp_dir().join(format!("seckill-demo-{}-{nanos}", std::process::id())));
    std::fs::create_dir_all(&dir.0)
        .map_err(|e| Error::unavailable(format!("cannot create '{}': {e}", dir.0.display())))?;
    let server = EmbeddedRedis::start(&dir.0)?;

    let mut config = ctx.config.clone();
    config.redis = RedisTarget::Standalone(SecretUrl::new(server.url()));
    config.db = SecretUrl::new(format!("sqlite://{}", dir.0.join("demo.db").display()));
    config.db_is_default = false;
    let demo_ctx = Ctx { config };

    let db = demo_ctx.db().await?;
    let redis = demo_ctx.redis().await?;
    let def = demo::activity(chrono::Utc::now())?;
    let none = std::collections::HashSet::new();
    seckill_console::db::activity::import(&db, &def, (&demo_ctx.config.actor, "the demo"), &none)
        .await?;
    let activity = ActivityId::parse(DEMO_ACTIVITY)?;
    let keys = demo_ctx.config.keys.clone();
    let report = preheat(
        &redis,
        &db,
        &keys,
        &activity,
        &PreheatOptions {
            force: false,
            accept_eviction: false,
            actor: demo_ctx.config.actor.clone(),
            grace: demo_ctx.config.grace,
            key_ttl_days: demo_ctx.config.key_ttl_days,
            interleave: Default::default(),
        },
        &Silent,
    )
    .await?;
    if report.decision != "go" {
        return Err(Error::check_failed(format!(
            "the demo's preheat was a no-go: {}",
            report.reasons.join("; ")
        )));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let seed = u64::from(nanos);
    let spec = LoadSpec {
        activity: activity.clone(),
        keys: keys.clone(),
        strategy: Strategy::Lua,
        demand: Demand {
            buyers: 50_000_000,
            repeat_share: 0.2,
            products: 0,
            quantity: 1,
            seed,
            run_id: format!("demo-{nanos:08x}"),
        },
        concurrency: 8,
        rate: Some(args.rate),
        faults: Faults {
            timeout: 0.02,
            ..Faults::default()
        },
        payment: Some(PaymentSpec {
            pay_share: 0.75,
            window: Duration::from_secs(20),
            seed,
        }),
        watch_negative: false,
        retries: 1,
        clock: Default::default(),
    };
    let worker = {
        let (redis, db, stop) = (redis.clone(), db.clone(), stop.clone());
        tokio::spawn(
            async move { run_load(&redis, &db, &spec, Arc::new(Live::default()), stop).await },
        )
    };
    // The relay stops for two minutes after the second fault (a broker outage): the outbox
    // alert (60 s by default) fires, then clears when it sends again.
    let relay = tokio::spawn(demo::relay(
        db.clone(),
        Duration::from_secs(args.chaos_after_secs * 3),
        Duration::from_secs(120),
        stop.clone(),
    ));
    let chaos = tokio::spawn(demo::chaos(
        redis.clone(),
        keys,
        Duration::from_secs(args.chaos_after_secs),
        stop.clone(),
    ));

    let outcome = run(
        &demo_ctx,
        TuiOptions {
            activity: Some(activity),
        },
    )
    .await;

    stop.store(true, Ordering::Relaxed);
    chaos.abort();
    relay.abort();
    // The worker finishes its requests in flight; a hung one is not waited for.
    let _ = tokio::time::timeout(Duration::from_secs(3), worker).await;
    db.close().await;
    drop(server);
    drop(dir);
    outcome?;
    let text = "demo stopped: its redis-server and temporary files are gone\n".to_string();
    Outcome::ok(serde_json::json!({ "demo": "stopped" }), text)
}
