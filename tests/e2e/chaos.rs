//! The chaos test (issue 19): seeded random histories against real Redis (a standalone server
//! and a 3-primary cluster) and SQLite. Buyers deduct and retry, orders land late (stamped up
//! to the grace window in the past, on a database clock up to 10 s behind), get paid, expire
//! and are returned; callers record compensation entries. Faults strike one product at a
//! time: DEL (eviction) of any one key, XDEL or XTRIM of the event stream, a corrupt value,
//! INCRBY outside the scripts, a restart from an older snapshot, a restart without
//! persistence, a failover that loses the last writes. The console fixes, preheats (forced or not), tops up (raise and cut, also one
//! whose console dies between its two writes), pauses and resumes, and a second console (or
//! a burst of buyers) acts at a chosen stage of the first console's write.
//!
//! After every step the invariants are checked against the model's own history (never
//! against the console's figures):
//! 1. no console step lets Redis sell more than `initial - live - pending` (the pending
//!    deductions Redis can still know of), counting the units of returns on their way and
//!    looking through a pause; a repair that reports a product fixed leaves no such excess;
//! 2. no sale takes a buyer above the per-user limit, unless a fault touched the product's
//!    buyers or ledger since its last clean repair;
//! 3. a pause written stays (nothing sells) until a fault undoes it, and a lost pause never
//!    reads as `ok`;
//! 4. a product with more live (and known pending) units than its initial stock reads
//!    `oversold`;
//! 5. once the faults stop and every order landed or was abandoned, a few rounds of
//!    `compensation resolve --all`, `preheat` and `fix --yes` bring every product to `ok` (or
//!    `paused`, as the database says) with drift 0, its stock exactly the truth, every live
//!    order recorded and no buyer's holding below their live orders;
//! 6. a product missing a piece never reads as `ok`;
//! 7. a live view carried from step to step on connections of its own (the tracker of the
//!    TUI, `watch` and the exporter) shows each product in the state a fresh `status` shows
//!    (a healthy one with every figure equal, a drifting one with the same drift), also after its
//!    connections are cut mid-refresh (`reconnect`), after a failover to a replica that lacks
//!    the last steps' writes (`failover.N`) and while a product's slot is left migrating
//!    (`migrate.pN`, a cluster: both raise `slot_migrating`). See `chaos/live.rs`; three
//!    narrow disagreements are still open and counted rather than failed (`live::KNOWN`: a
//!    death dated apart by the two readers, a stream gap one reader keeps and the other does
//!    not show, an expiry the live view's feed has not seen yet); `SECKILL_CHAOS_LIVE_STRICT=1`
//!    fails on them.
//!
//! A failure prints the topology, the seed, the broken invariant with its figures and the
//! step log. Then the first case of each kind of failure (at most `SECKILL_CHAOS_SHRINK_KINDS`,
//! default 4) is shrunk: re-run on fresh keys with steps taken out (delta debugging, at most
//! `SECKILL_CHAOS_SHRINK` re-runs per topology in all, default 200) while it still fails the
//! same way, and the smallest step list is printed with the line that replays it.
//!
//! Running and replaying (`scripts/chaos --cases N --seed S --topology T --steps LIST` sets
//! these variables):
//!
//! ```text
//! cargo test --test e2e chaos -- --nocapture              # the suite: 200 cases, both topologies
//! SECKILL_CHAOS_CASES=5000 cargo test --test e2e chaos -- --nocapture   # a long hunt
//! SECKILL_CHAOS_TOPOLOGY=cluster SECKILL_CHAOS_SEED=123 \
//!     cargo test --test e2e chaos -- --nocapture          # replay one case by its seed
//! SECKILL_CHAOS_TOPOLOGY=cluster SECKILL_CHAOS_SEED=123 \
//!     SECKILL_CHAOS_STEPS='deduct.p1.u3.2,del.p1.ledger,fix@beforewrite0:pause.p1' \
//!     cargo test --test e2e chaos -- --nocapture          # replay a (shrunk) step list exactly
//! ```
//!
//! - `SECKILL_CHAOS_CASES`: cases in all (split over the topologies run), from seed
//!   `SECKILL_CHAOS_SEED` on (default 1). A seed without a count runs that one case; a count
//!   with `SECKILL_CHAOS_STEPS` runs the list that many times side by side (a failure that
//!   needs a loaded machine).
//! - `SECKILL_CHAOS_TOPOLOGY`: `standalone`, `cluster` or `both` (the default).
//! - `SECKILL_CHAOS_PARALLEL`: cases at once per topology (default 8), each on its own
//!   activity and SQLite database.
//! - `SECKILL_CHAOS_GRACE_MS`: the grace window the console is given (default 1200).
//! - `SECKILL_CHAOS_WITHOUT=corrupt.p1.paused,flush`: generated steps whose text contains one
//!   of these are left out (a hunt past a known bug).
//! - `SECKILL_CHAOS_LOG=1`: the step log of passing cases too.
//! - `SECKILL_CHAOS_LIVE_STRICT=1`: the known live-view disagreements fail too
//!   (`chaos/live.rs`); `SECKILL_CHAOS_DEBUG_LIVE=1`: both views' figures in the step log.
//!
//! The step list: steps joined by `,`, fields by `.`, e.g. `deduct.p1.u3.2` (product, user,
//! units), `land.17.300` (a pending order, by a number taken modulo those there are; stamped
//! 300 ms late), `del.p1.ledger`, `corrupt.p2.limit`, `checkpoint.p1`, `rollback`, `wait.5`,
//! `fix`, `preheat.force`, `topup.p2.-3`, `crash.p1.+2.db.aged` (a top-up whose console died
//! after its database write, its lease passed). A console step may carry a hook:
//! `fix@beforewrite0:pause.p1` pauses p1 from a second console the first time the fix reaches
//! its `BeforeWrite` stage. `chaos/steps.rs` lists them all.
//!
//! A replay is exact up to timing: the grace window is real time, and a step that runs slow
//! on a loaded machine may make an order land (the app servers keep the grace window) or a
//! deduction count as stale where the first run did not; the step log says so where it does.

mod buyers;
mod console;
mod faults;
mod invariants;
mod live;
mod migration;
mod steps;
mod world;

use crate::harness::fixtures::{import, live_window, preheat_options};
use crate::harness::{TestDb, Topo};
use futures::StreamExt;
use seckill_console::domain::ActivityId;
use seckill_console::ops::preheat::preheat;
use seckill_console::ops::progress::Silent;
use seckill_console::ops::repair;
use seckill_console::ops::snapshot::{self, Scope};
use seckill_console::redis::{KeySpace, RedisStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use steps::{PRODUCTS, Rng, Step};
use tokio::sync::Mutex;
use world::{Effects, ProductModel, Violation, World};

/// Cases in the suite, over both topologies.
const CASES: usize = 200;

/// Activity ids are unique across every run of the process (shrinking re-runs on fresh keys).
static RUNS: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Debug)]
struct Config {
    /// Cases per topology run, and their seeds.
    seeds: Vec<u64>,
    /// Replay exactly this list (with the first seed).
    steps: Option<Vec<Step>>,
    parallel: usize,
    grace: Duration,
    shrink_runs: usize,
    /// Kinds of failure shrunk (the first case of each).
    shrink_kinds: usize,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_num(name: &str) -> Option<u64> {
    env(name).map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

/// The configuration of the topology `t` (0 standalone, 1 cluster), or None when it is not
/// to run.
fn config(t: u64) -> Option<Config> {
    let topology = env("SECKILL_CHAOS_TOPOLOGY").unwrap_or_else(|| "both".into());
    let both = match topology.as_str() {
        "both" => true,
        "standalone" => {
            if t != 0 {
                return None;
            }
            false
        }
        "cluster" => {
            if t != 1 {
                return None;
            }
            false
        }
        other => panic!("SECKILL_CHAOS_TOPOLOGY={other}: use standalone, cluster or both"),
    };
    let base = env_num("SECKILL_CHAOS_SEED");
    let cases = env_num("SECKILL_CHAOS_CASES");
    let steps = env("SECKILL_CHAOS_STEPS")
        .map(|s| steps::parse(&s).unwrap_or_else(|e| panic!("SECKILL_CHAOS_STEPS: {e}")));
    let seeds: Vec<u64> = match (base, cases) {
        // One case: a replay.
        (Some(seed), None) => vec![seed],
        // The same list again and again (a failure that depends on timing).
        (base, Some(n)) if steps.is_some() => (0..n).map(|i| base.unwrap_or(1) + i).collect(),
        _ if steps.is_some() => vec![base.unwrap_or(1)],
        (base, cases) => {
            let total = usize::try_from(cases.unwrap_or(CASES as u64)).unwrap_or(CASES);
            let base = base.unwrap_or(1);
            if both {
                // Distinct seeds on the two topologies: standalone even, cluster odd offsets.
                let mine = (total + 1 - usize::try_from(t).unwrap_or(0)) / 2;
                (0..mine as u64).map(|i| base + 2 * i + t).collect()
            } else {
                (0..total as u64).map(|i| base + i).collect()
            }
        }
    };
    Some(Config {
        seeds,
        steps,
        parallel: usize::try_from(env_num("SECKILL_CHAOS_PARALLEL").unwrap_or(8))
            .unwrap_or(8)
            .max(1),
        grace: Duration::from_millis(env_num("SECKILL_CHAOS_GRACE_MS").unwrap_or(1200)),
        shrink_runs: usize::try_from(env_num("SECKILL_CHAOS_SHRINK").unwrap_or(200)).unwrap_or(200),
        shrink_kinds: usize::try_from(env_num("SECKILL_CHAOS_SHRINK_KINDS").unwrap_or(4))
            .unwrap_or(4),
    })
}

/// Where and how a case failed.
#[derive(Clone, Debug)]
struct Failure {
    /// The index of the failing step (`steps.len()` and on: the convergence).
    at: usize,
    step: String,
    violation: Violation,
    log: Vec<String>,
}

/// What a passing case did.
#[derive(Clone, Debug, Default)]
struct Stats {
    faults: usize,
    repairs: usize,
    rounds: usize,
}

/// Runs one step and checks the invariants after it.
async fn one_step(world: &Arc<Mutex<World>>, i: usize, step: &Step) -> Result<(), Violation> {
    let before = {
        let mut w = world.lock().await;
        w.say(format!("-- {i}: {step}"));
        w.auto_land().await;
        w.remember().await;
        let probes = invariants::probes(&w).await;
        w.fx = Effects::default();
        invariants::excess(&w, &probes)
    };
    console::exec(world, step).await;
    let mut w = world.lock().await;
    // Keys changed by hand reach a reader in production as a signal (evicted keys counted,
    // a restarted node's dropped connection); a failover drops the connections itself.
    if step.is_fault() && !matches!(step, Step::Failover { .. }) {
        w.recut_live();
    }
    w.mark_stale();
    w.refresh_products().await;
    invariants::check(&mut w, step, &before).await
}

/// Stops the faults, lands or abandons every pending order, then runs rounds of
/// `compensation resolve --all`, `preheat` and `fix --yes` until every product is back to
/// the truth (at most 4, the grace window between them).
async fn converge(world: &Arc<Mutex<World>>, seed: u64, first: usize) -> Result<usize, Failure> {
    let grace = {
        let mut w = world.lock().await;
        w.say("-- convergence: the faults stop; every pending order lands or is abandoned");
        for p in 0..PRODUCTS.len() {
            // A top-up left between its writes is resolved once its lease passed.
            w.lease_pass(p).await;
        }
        let mut r = Rng::new(seed ^ 0x00C0_FFEE);
        let pending: Vec<usize> = (0..w.deds.len()).filter(|&i| w.deds[i].pending()).collect();
        for i in pending {
            if r.chance(70) {
                w.land_idx(i, 0).await;
            } else {
                w.deds[i].abandoned = true;
            }
        }
        for _ in 0..w.deds.len() {
            if r.chance(50) {
                w.give_back(r.pick()).await;
            }
        }
        w.grace
    };
    let mut at = first;
    let mut last = (String::new(), String::new());
    for round in 1..=4 {
        for step in [
            Step::Resolve,
            Step::Preheat {
                force: false,
                hook: None,
            },
            Step::Fix { hook: None },
        ] {
            one_step(world, at, &step)
                .await
                .map_err(|v| failure(world, at, &step, v))?;
            at += 1;
        }
        match invariants::converged(&*world.lock().await).await {
            Ok(()) => return Ok(round),
            Err(problems) => last = problems,
        }
        if round < 4 {
            world.lock().await.say(format!(
                "   not yet converged:\n  {}\n   waiting {} ms",
                last.1,
                grace.as_millis() + 300
            ));
            tokio::time::sleep(grace + Duration::from_millis(300)).await;
        }
    }
    let v = Violation {
        inv: "5-convergence",
        tag: last.0,
        detail: format!(
            "after 4 rounds of resolve, preheat and fix:\n  {}\n  {}",
            last.1,
            full_read(&*world.lock().await).await
        ),
    };
    let step = Step::Fix { hook: None };
    Err(failure(world, at, &step, v))
}

/// What a read from scratch (the one `fix` acts on) makes of each product, for a failure
/// message: where the console's own figures part from the model's.
async fn full_read(w: &World) -> String {
    let scope = Scope {
        full: true,
        ..Scope::default()
    };
    match snapshot::take(&w.store, &w.db, &w.keys, &w.id, w.grace, &scope).await {
        Ok(snap) => snap
            .products
            .iter()
            .map(|v| {
                let t = &v.status;
                format!(
                    "full read of {}: plan {:?}, state {} drift {:?} db_sold {} in_flight {} orphaned {} (orphans {:?}) unledgered {} offset {:?} unexplained {} lost {:?}",
                    t.product,
                    repair::plan(v),
                    t.state.as_str(),
                    t.drift,
                    t.db_sold,
                    t.in_flight,
                    t.orphaned,
                    v.split.orphans,
                    t.unledgered,
                    t.offset,
                    t.unexplained,
                    t.lost
                )
            })
            .collect::<Vec<_>>()
            .join("\n  "),
        Err(e) => format!("a full read failed: {e}"),
    }
}

fn failure(world: &Arc<Mutex<World>>, at: usize, step: &Step, violation: Violation) -> Failure {
    let log = world.try_lock().map(|w| w.log.clone()).unwrap_or_default();
    Failure {
        at,
        step: step.to_string(),
        violation,
        log,
    }
}

/// One case on fresh keys and a fresh database.
async fn run_case(
    (topo, store): (&Topo, &RedisStore),
    cfg: &Config,
    seed: u64,
    list: &[Step],
) -> Result<Stats, Failure> {
    let tdb = TestDb::sqlite();
    let db = tdb.open().await;
    let activity = format!("ch{seed}-{}", RUNS.fetch_add(1, Ordering::Relaxed));
    import(&db, &activity, &PRODUCTS, live_window()).await;
    let id = ActivityId::parse(&activity).expect("activity id");
    let id_live = id.clone();
    let keys = KeySpace::default();
    let opts = preheat_options(world::ACTOR, cfg.grace);
    let r = preheat(store, &db, &keys, &id, &opts, &Silent)
        .await
        .expect("the first preheat");
    assert_eq!(r.decision, "go", "the first preheat: {:?}", r.reasons);
    let world = Arc::new(Mutex::new(World {
        store: store.clone(),
        db: db.clone(),
        activity,
        id,
        keys,
        grace: cfg.grace,
        deds: Vec::new(),
        failed: Vec::new(),
        next: 0,
        behind_ms: 0,
        saved: None,
        products: [ProductModel::default(), ProductModel::default()],
        log: vec![format!("case seed {seed}: {}", steps::show(list))],
        fx: Effects::default(),
        live: Some(live::Live::new(
            topo.store().await,
            store.clone(),
            id_live,
            cfg.grace,
        )),
        history: Default::default(),
    }));
    world.lock().await.refresh_products().await;
    let mut stats = Stats::default();
    for (i, step) in list.iter().enumerate() {
        stats.faults += usize::from(step.is_fault());
        stats.repairs += usize::from(step.is_repair());
        one_step(&world, i, step)
            .await
            .map_err(|v| failure(&world, i, step, v))?;
    }
    stats.rounds = converge(&world, seed, list.len()).await?;
    if env("SECKILL_CHAOS_LOG").is_some() {
        println!("{}", world.lock().await.log.join("\n"));
    }
    db.close().await;
    Ok(stats)
}

fn replay_line(topo: &str, seed: u64, list: Option<&[Step]>) -> String {
    match list {
        None => format!(
            "SECKILL_CHAOS_TOPOLOGY={topo} SECKILL_CHAOS_SEED={seed} cargo test --locked --test e2e chaos -- --nocapture"
        ),
        Some(list) => format!(
            "SECKILL_CHAOS_TOPOLOGY={topo} SECKILL_CHAOS_SEED={seed} SECKILL_CHAOS_STEPS='{}' cargo test --locked --test e2e chaos -- --nocapture",
            steps::show(list)
        ),
    }
}

fn shown_failure(topo: &str, seed: u64, list: &[Step], f: &Failure) -> String {
    let at = if f.at < list.len() {
        format!("step {} ({})", f.at, f.step)
    } else {
        format!("convergence ({})", f.step)
    };
    format!(
        "==== chaos FAILURE: {topo} seed {seed}, {at}\ninvariant {}: {}\nstep log:\n{}\nreplay: {}\n",
        f.violation.inv,
        f.violation.detail,
        f.log.join("\n"),
        replay_line(topo, seed, Some(list))
    )
}

/// The same failure: the same invariant broken the same way (the step's hook may differ:
/// the shrinker tries without it).
fn same(f: &Failure, like: &Violation) -> bool {
    let head = |t: &str| t.split('@').next().unwrap_or_default().to_string();
    f.violation.inv == like.inv && head(&f.violation.tag) == head(&like.tag)
}

/// Delta debugging: removes chunks of steps while the case still breaks the same invariant,
/// testing the candidates of one granularity side by side; at most `budget` runs.
async fn shrink(
    (topo, store): (&Topo, &RedisStore),
    cfg: &Config,
    (seed, list, first): (u64, &[Step], &Failure),
    budget: usize,
) -> (Vec<Step>, Failure, usize) {
    let like = &first.violation;
    let mut best: Vec<Step> = list.to_vec();
    let mut best_f = first.clone();
    let mut runs = 0;
    let trial = |cand: Vec<Step>| async move {
        let r = run_case((topo, store), cfg, seed, &cand).await;
        (cand, r.err())
    };
    // The steps after the failing one cannot have caused it.
    if first.at + 1 < best.len() {
        let cut = best[..=first.at].to_vec();
        runs += 1;
        if let (cand, Some(f)) = trial(cut).await
            && same(&f, like)
        {
            best = cand;
            best_f = f;
        }
    }
    let mut n = 2usize;
    while best.len() >= 2 && runs < budget {
        let chunk = best.len().div_ceil(n);
        let candidates: Vec<Vec<Step>> = (0..n)
            .map(|i| {
                best.iter()
                    .enumerate()
                    .filter(|(j, _)| j / chunk != i)
                    .map(|(_, s)| s.clone())
                    .collect::<Vec<Step>>()
            })
            .filter(|c| !c.is_empty() && c.len() < best.len())
            .collect();
        let mut found = None;
        for batch in candidates.chunks(cfg.parallel) {
            let left = budget.saturating_sub(runs);
            if left == 0 {
                break;
            }
            let batch: Vec<Vec<Step>> = batch.iter().take(left).cloned().collect();
            runs += batch.len();
            let results = futures::future::join_all(batch.into_iter().map(trial)).await;
            if let Some((cand, f)) = results
                .into_iter()
                .find_map(|(c, f)| f.filter(|f| same(f, like)).map(|f| (c, f)))
            {
                found = Some((cand, f));
                break;
            }
        }
        match found {
            Some((cand, f)) => {
                best = cand;
                best_f = f;
                n = (n - 1).max(2);
            }
            None if n >= best.len() => break,
            None => n = (n * 2).min(best.len()),
        }
    }
    // Then each hook alone: a failure that needs no second console says so.
    for i in 0..best.len() {
        if runs >= budget {
            break;
        }
        if best[i].hook().is_none() {
            continue;
        }
        let mut cand = best.clone();
        cand[i] = cand[i].without_hook();
        runs += 1;
        if let (cand, Some(f)) = trial(cand).await
            && same(&f, like)
        {
            best = cand;
            best_f = f;
        }
    }
    (best, best_f, runs)
}

/// Runs the configured cases on one topology; fails listing every broken case, the first of
/// each broken invariant shrunk.
async fn hunt(t: u64) {
    let Some(cfg) = config(t) else {
        eprintln!(
            "chaos: topology {} not selected",
            if t == 0 { "standalone" } else { "cluster" }
        );
        return;
    };
    let topo = if t == 0 {
        Topo::standalone()
    } else {
        Topo::cluster()
    };
    let name = topo.name();
    let store = topo.store().await;
    let started = Instant::now();
    // Steps left out of generated cases while a known bug is open (their text contains one
    // of these, e.g. `corrupt.p1.paused`), so that a hunt finds the others.
    let without: Vec<String> = env("SECKILL_CHAOS_WITHOUT")
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();
    let cases: Vec<(u64, Vec<Step>)> = cfg
        .seeds
        .iter()
        .map(|&s| {
            let list = cfg.steps.clone().unwrap_or_else(|| {
                steps::generate(s)
                    .into_iter()
                    .filter(|step| {
                        let text = step.to_string();
                        !without
                            .iter()
                            .any(|w| !w.is_empty() && text.contains(w.as_str()))
                    })
                    .collect()
            });
            (s, list)
        })
        .collect();
    let total = cases.len();
    let done = AtomicU64::new(0);
    let results: Vec<(u64, Vec<Step>, Result<Stats, Failure>)> = futures::stream::iter(cases)
        .map(|(seed, list)| {
            let (store, cfg, done, topo) = (&store, &cfg, &done, &topo);
            async move {
                let t0 = Instant::now();
                let r = run_case((topo, store), cfg, seed, &list).await;
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                match &r {
                    Ok(s) => println!(
                        "chaos {name} {n}/{total} seed {seed}: ok, {} steps ({} faults, {} repairs), converged in round {}, {:.1} s",
                        list.len(),
                        s.faults,
                        s.repairs,
                        s.rounds,
                        t0.elapsed().as_secs_f64()
                    ),
                    Err(f) => println!(
                        "chaos {name} {n}/{total} seed {seed}: FAILED invariant {} at step {}, {:.1} s",
                        f.violation.inv,
                        f.at,
                        t0.elapsed().as_secs_f64()
                    ),
                }
                (seed, list, r)
            }
        })
        .buffer_unordered(cfg.parallel)
        .collect()
        .await;
    let failed: Vec<(u64, Vec<Step>, Failure)> = results
        .into_iter()
        .filter_map(|(s, l, r)| r.err().map(|f| (s, l, f)))
        .collect();
    println!(
        "chaos {name}: {total} case(s), {} failed, {:.1} s; known live-view disagreements met in this process (issue 52, chaos/live.rs): {}",
        failed.len(),
        started.elapsed().as_secs_f64(),
        live::met_summary()
    );
    if failed.is_empty() {
        return;
    }
    let mut summary = Vec::new();
    let mut kinds: Vec<(&str, String)> = Vec::new();
    let mut to_shrink = Vec::new();
    for (seed, list, f) in &failed {
        println!("{}", shown_failure(name, *seed, list, f));
        summary.push(format!(
            "{name} seed {seed}: invariant {} ({}) at step {}",
            f.violation.inv, f.violation.tag, f.at
        ));
        // The first case of each kind of failure is shrunk, a few kinds at most (each shrink
        // re-runs the case up to SECKILL_CHAOS_SHRINK times); an exact replay is not.
        let kind = (f.violation.inv, f.violation.tag.clone());
        if !kinds.contains(&kind) {
            kinds.push(kind);
            if cfg.steps.is_none() && cfg.shrink_runs > 0 && to_shrink.len() < cfg.shrink_kinds {
                to_shrink.push((*seed, list, f));
            }
        }
    }
    // One budget of re-runs for every kind, the first failures first.
    let mut budget = cfg.shrink_runs;
    for (seed, list, f) in to_shrink {
        if budget == 0 {
            break;
        }
        let (small, sf, runs) = shrink((&topo, &store), &cfg, (seed, list, f), budget).await;
        budget = budget.saturating_sub(runs);
        println!(
            "==== shrunk {name} seed {seed} from {} to {} step(s) in {runs} run(s); invariant {} ({}): {}\nstep log:\n{}\nreplay: {}\n",
            list.len(),
            small.len(),
            sf.violation.inv,
            sf.violation.tag,
            sf.violation.detail,
            sf.log.join("\n"),
            replay_line(name, seed, Some(&small))
        );
        summary.push(format!(
            "shrunk ({} {}): {}",
            sf.violation.inv,
            sf.violation.tag,
            replay_line(name, seed, Some(&small))
        ));
    }
    panic!(
        "{} of {total} chaos case(s) on {name} broke an invariant:\n{}",
        failed.len(),
        summary.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_standalone() {
    hunt(0).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_cluster() {
    hunt(1).await;
}

/// The shrunk step lists of failures this test found (topology, seed, steps): each once broke
/// an invariant, and each is replayed on every run so that it stays fixed. A new finding's
/// `replay:` line gives the three fields.
const FOUND: [(&str, u64, &str); 35] = [
    // A corrupt `paused` was kept as a pause the database never held.
    ("standalone", 23, "corrupt.p2.paused"),
    // A rebuild left a recorded order's buyer without the holding.
    (
        "standalone",
        5137,
        "deduct.p2.u3.2,deduct.p1.u1.1,flush.p1,topup.p1.+2@beforewrite0:fix,del.p1.meta",
    ),
    // A top-up of a product without keys raced a fix or preheat writing the old stock.
    ("standalone", 61, "flush.p1,fix@snapshot0:topup.p1.-5"),
    ("cluster", 124, "flush.p1,preheat@beforewrite0:topup.p1.-2"),
    ("standalone", 7, "flush.p1,topup.p1.-3@beforewrite0:fix"),
    ("cluster", 86, "flush.p2,fix@aftercut0:topup.p2.-5"),
    // A crashed top-up over a corrupt stock could never be resolved.
    (
        "standalone",
        5178,
        "crash.p2.+3.nodb.young,corrupt.p2.stock",
    ),
    // A booking's stamp read as a clock 70 s behind, and an orphan stayed in flight.
    (
        "standalone",
        20466,
        "deduct.p1.u2.1,flush.p1,land.280623.903,wait.813526,wait.210664,fix,deduct.p1.u1.1,land.99647.701,del.p1.buyers,expire.902379",
    ),
    // One corrupt product failed the whole `compensation resolve`.
    (
        "standalone",
        9,
        "deduct.p1.u1.1,abandon.0,wait.0,corrupt.p1.stock,comp.0",
    ),
    // A meta hash recreated by a pause read as counters of zero.
    (
        "standalone",
        3,
        "deduct.p2.u2.2,del.p2.meta,pause.p2,del.p2.ledger,fix",
    ),
    // Orders a restart forgot, recorded as if the counters held them.
    (
        "standalone",
        21430,
        "checkpoint.p2,deduct.p1.u5.1,deduct.p2.u1.2,rollback,deduct.p1.u4.2,deduct.p2.u3.2,del.p2.ledger,land.418361.957,fix",
    ),
    // An orphan and a forgotten order cancelled out and read `ok`.
    (
        "cluster",
        21983,
        "deduct.p1.u1.2,flush.p1,preheat.force,deduct.p1.u0.2,wait.603711",
    ),
    // A forgotten order claimed the unexplained unit of another buyer's deduction: that
    // buyer's holding double, this one's missing.
    (
        "standalone",
        102042,
        "preheat.force@aftercut0:buyers.2.11263,del.p1.ledger,preheat.force,checkpoint.p1,flush.p2,fix,deduct.p1.u3.1,land.472675.551,del.p2.meta,rollback",
    ),
    (
        "cluster",
        102779,
        "corrupt.p1.limit,checkpoint.p2,deduct.p1.u2.2,topup.p2.-4@begun0:buyers.4.188280,expire.256911,pause.p2,rollback,deduct.p1.u5.2,deduct.p2.u1.2,del.p2.ledger,preheat.force,expire.1003819",
    ),
    // A cut of a product whose counters and stock were lost took no account of the deduction
    // its ledger still held: the truth oversold.
    (
        "cluster",
        200497,
        "deduct.p1.u3.2,del.p1.meta,del.p1.stock,topup.p1.-5",
    ),
    // A second rebuild took units held back by a first (whose holdings came from the ledger)
    // for units in the holdings: the buyer's order then never counted.
    (
        "standalone",
        258965911,
        "deduct.p2.u1.2,del.p2.buyers,del.p2.ledger,fix,del.p2.ledger,fix",
    ),
    (
        "cluster",
        258961912,
        "deduct.p1.u1.2,del.p1.buyers,del.p1.ledger,fix,del.p1.stock,preheat.force",
    ),
    // The model's own mistakes, kept so that they stay fixed: a repair credited for an order
    // that landed during it; an expiry of an oversold product read as growth.
    (
        "cluster",
        100491,
        "checkpoint.p1,deduct.p1.u3.2,deduct.p1.u5.1,rollback,deduct.p1.u5.2,preheat.force@snapshot0:buyers.3.315968,deduct.p1.u3.2",
    ),
    (
        "cluster",
        101351,
        "deduct.p1.u5.2,checkpoint.p1,crash.p1.-3.db.young,rollback,deduct.p1.u1.2,land.443050.783,expire.777578",
    ),
    // A rebuild with `returned` corrupt (rolled back to a snapshot that held the corruption)
    // and the ledger lost ignored the readable `deducted`: an in-flight deduction's unit went
    // back on sale.
    (
        "standalone",
        912703,
        "corrupt.p1.returned,checkpoint.p1,fix,deduct.p1.u5.1,rollback,deduct.p1.u3.1,del.p1.ledger,incr.p1.4,fix",
    ),
    (
        "cluster",
        912703,
        "corrupt.p1.returned,checkpoint.p1,fix,deduct.p1.u5.1,rollback,deduct.p1.u3.1,del.p1.ledger,incr.p1.4,fix",
    ),
    // An order landing for a deduction a rebuild had recorded (its time the console's, seconds
    // after the order) was read as a database clock 5 s behind: every death was dated that
    // much later, and an orphan stayed "in flight" past the convergence rounds.
    (
        "cluster",
        912769,
        "giveback.672177,expire.263552,deduct.p1.u0.2,retry.494304,deduct.p1.u2.1,checkpoint.p1,checkpoint.p2,giveback.1030130,deduct.p2.u4.2,deduct.p2.u1.2,wait.17881,topup.p1.-1@begun0:buyers.2.232942,checkpoint.p2,corrupt.p1.limit,fix,retry.512550,wait.323178,del.p1.meta,abandon.89168,wait.627517,incr.p2.2,expire.1031795,land.109812.565,retry.635205,resume.p2,expire.311508,retry.412909,topup.p1.+2@written0:fix,del.p2.ledger,resume.p2,fix,checkpoint.p2,rollback,deduct.p2.u2.2,expire.712272,deduct.p2.u0.2,del.p2.meta,fix@beforewrite1:pause.p2,pay.238135,deduct.p1.u5.2,giveback.885590,deduct.p2.u0.1,xdel.p2.680935",
    ),
    // A second rebuild kept the first one's time for the units it held back: a deduction made
    // since (its ledger entry lost with the ledger) went back on sale with the old units, its
    // order's window not yet passed (hunt seed 932768, shrunk by hand to its core).
    (
        "standalone",
        932768,
        "deduct.p1.u1.1,del.p1.ledger,fix,wait.1,deduct.p1.u2.1,del.p1.ledger,fix",
    ),
    (
        "cluster",
        932768,
        "deduct.p1.u1.1,del.p1.ledger,fix,wait.1,deduct.p1.u2.1,del.p1.ledger,fix",
    ),
    // The meta hash and the ledger lost, the stock raised by a stray write: a rebuild read no
    // units held and sold an in-flight deduction's units again; the surviving buyers hash
    // counted them (hunt seed 942080, shrunk by hand).
    (
        "standalone",
        942080,
        "incr.p1.4,deduct.p1.u3.2,del.p1.ledger,del.p1.meta,fix",
    ),
    (
        "cluster",
        942080,
        "incr.p1.4,deduct.p1.u3.2,del.p1.ledger,del.p1.meta,fix",
    ),
    // A failover lost two deductions whose orders then landed; the ledger was lost after two
    // more: the rebuild took a surviving holding of a later deduction for a landed order's,
    // and sold that unit again (hunt seed 306774462, 2026-12-07).
    (
        "cluster",
        306776381,
        "fix,del.p1.events,fix,deduct.p1.u4.2,deduct.p1.u5.1,failover.2,land.479674.769,deduct.p1.u0.1,deduct.p1.u5.1,corrupt.p1.returned,del.p1.ledger,deduct.p1.u4.2,fix@cut0:resume.p2",
    ),
    (
        "standalone",
        306776381,
        "fix,del.p1.events,fix,deduct.p1.u4.2,deduct.p1.u5.1,failover.2,land.479674.769,deduct.p1.u0.1,deduct.p1.u5.1,corrupt.p1.returned,del.p1.ledger,deduct.p1.u4.2,fix@cut0:resume.p2",
    ),
    // The live view dropped an order's expiry while the product's ledger was lost (the books
    // could not tell whether they counted the order) and, once a failover brought the ledger
    // back, showed it sold where `status` showed it in flight (hunt seed 306774462).
    (
        "standalone",
        306775808,
        "deduct.p1.u0.1,deduct.p2.u3.1,wait.1035636,del.p2.ledger,expire.350094,failover.3",
    ),
    // A fix finished a top-up its console left with a meta write and no event: the live view,
    // asking the quiet product only whether its stream moved, kept the `held` alert.
    (
        "standalone",
        306776604,
        "crash.p2.+5.nodb.aged,expire.1024355,deduct.p1.u1.1,checkpoint.p2,retry.631742,crash.p2.+3.db.aged,land.533818.872,crash.p1.+4.db.young,giveback.778281,giveback.620562,deduct.p1.u5.1,fix",
    ),
    (
        "cluster",
        306776507,
        "crash.p1.-3.db.aged,land.344900.306,retry.416595,deduct.p2.u3.1,topup.p1.-5,comp.687298,expire.299274,deduct.p2.u3.2,giveback.303707,retry.229284,pause.p2,fix",
    ),
    // A slot left migrating with a flushed product's keys on neither node: the live view's
    // question "did its keys appear?" met TRYAGAIN and failed the whole refresh.
    (
        "cluster",
        306774843,
        "flush.p1,deduct.p2.u3.1,crash.p2.-4.nodb.young,land.591621.843,deduct.p2.u0.1,migrate.p2,retry.128163,expire.675573,expire.652569,pay.187378,migrate.p1",
    ),
    // After its connections were cut, the live view resumed from a checkpoint and read an
    // order again whose ledger entry was lost: taken as a new sale Redis lost, it counted
    // twice, a false `oversold` (hunt seed 26421340, 2026-12-07).
    (
        "cluster",
        26421897,
        "topup.p1.-5,deduct.p1.u0.1,del.p1.ledger,land.524011.134,reconnect",
    ),
    // Under load only (the hunt's eight cases at once; alone it passed): the live view resumed
    // from a checkpoint whose feed had read an order's death, read it again in the margin and
    // subtracted it a second time: -2 units sold and a false orphan (hunt seed 372191492).
    (
        "standalone",
        372194848,
        "preheat.force@snapshot0:buyers.1.145228,pause.p1,deduct.p1.u3.1,fix,fix@cut0:buyers.1.775588,pause.p2,deduct.p1.u5.1,del.p1.buyers,checkpoint.p2,xdel.p1.380850,expire.456956,checkpoint.p2,rollback,land.496743.623,checkpoint.p2,del.p2.events,incr.p2.3,del.p1.meta,deduct.p2.u5.2,land.153840.937,del.p1.events,pay.70538,pause.p2,topup.p2.-4@begun0:buyers.4.213654,checkpoint.p1,reconnect,deduct.p1.u0.2,land.564210.29,flush.p1,fix,checkpoint.p1,land.949825.445,deduct.p1.u0.2,flush.p2",
    ),
    // Under load only: a failover brought back the ledger the live view's books had been
    // settled without; a start over hid it whenever the dropped connection failed a refresh,
    // else the books kept a false `corrupt` (the counters' units named by no entry).
    (
        "standalone",
        372193378,
        "resume.p2,topup.p1.+1@begun0:buyers.2.753427,land.770679.251,rollback,flush.p1,corrupt.p1.limit,fix,deduct.p1.u5.2,retry.2022,expire.956501,migrate.p2,pause.p1,preheat.force@cut0:buyers.4.934056,land.429445.358,lease.p2,deduct.p2.u5.2,giveback.153300,deduct.p2.u3.1,land.841708.443,rollback,land.644885.51,deduct.p1.u3.1,preheat@round0:buyers.1.89261,checkpoint.p1,retry.770615,land.798403.246,wait.706993,comp.232706,land.150861.279,deduct.p1.u5.2,land.718620.186,deduct.p2.u0.1,preheat.force@aftercut0:topup.p1.-4,xdel.p2.379187,del.p2.ledger,failover.1",
    ),
];

/// Replays every case of `FOUND` found on `topo`'s kind, side by side as the hunt runs its cases
/// (each on an activity and a database of its own), and fails naming each that breaks again.
async fn replay_found(topo: Topo) {
    let name = topo.name();
    let store = topo.store().await;
    let cfg = Config {
        seeds: Vec::new(),
        steps: None,
        parallel: 8,
        grace: Duration::from_millis(1200),
        shrink_runs: 0,
        shrink_kinds: 0,
    };
    let cases: Vec<(u64, Vec<Step>)> = FOUND
        .iter()
        .filter(|(t, _, _)| *t == name)
        .map(|(_, seed, text)| {
            let list = steps::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            (*seed, list)
        })
        .collect();
    assert!(!cases.is_empty(), "no case of FOUND is for {name}");
    let (store, cfg, topo) = (&store, &cfg, &topo);
    let failed: Vec<String> = futures::stream::iter(cases)
        .map(|(seed, list)| async move {
            run_case((topo, store), cfg, seed, &list)
                .await
                .err()
                .map(|f| shown_failure(name, seed, &list, &f))
        })
        .buffer_unordered(cfg.parallel)
        .filter_map(|f| async move { f })
        .collect()
        .await;
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_failures_found_before_stay_fixed_standalone() {
    replay_found(Topo::standalone()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_failures_found_before_stay_fixed_cluster() {
    replay_found(Topo::cluster()).await;
}
