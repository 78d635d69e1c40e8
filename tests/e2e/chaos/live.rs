//! The live view in the chaos test (issue 52): a tracker carried from step to step, as the
//! TUI, `watch` and the exporter carry theirs, on connections of its own. After every step its
//! figures must equal a fresh `status` (invariant 7), also after the faults that reach a
//! reader in production as a dropped connection:
//! - `reconnect`: the live view's connections are cut in the middle of its next refresh (at
//!   its cut), as a node restart or a network blip does;
//! - `failover.N`: every product's keys go back to how they were N steps ago (a replica that
//!   had not yet received the last writes is promoted), and the live view's connections drop;
//! - `migrate.pN` (cluster): the product's slot is left migrating to another primary; both the
//!   live view and `status` must raise the critical `slot_migrating` alert naming the product,
//!   and then the slot is set stable again (what `redis-cli --cluster fix` does).

use super::invariants::read_status;
use super::world::{Saved, Violation, World};
use seckill_console::domain::ActivityId;
use seckill_console::domain::alerts::AlertKind;
use seckill_console::domain::stock::{Piece, ProductStatus, State};
use seckill_console::ops::snapshot::{Interleave, Stage};
use seckill_console::ops::status::{StatusOptions, StatusReport, status_tracked};
use seckill_console::ops::tracker::{Tracker, TrackerOptions};
use seckill_console::redis::RedisStore;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Steps back a failover may lose (the ring of saved states holds one more: now).
pub const FAILOVER_DEPTH: usize = 3;

/// Reads of both views before a difference counts: a deduction may cross the grace window
/// between the fresh read and the live one.
const ATTEMPTS: usize = 3;

/// The live view of one case.
pub struct Live {
    tracker: Tracker,
    /// Its own connections (a kill of them leaves the world's alone).
    store: RedisStore,
    /// The world's handle, which sends the kill.
    main: RedisStore,
    /// Cut the live view's connections at its next cut.
    armed: Arc<AtomicBool>,
    /// The live view's connections were cut since its last good refresh: one failed refresh
    /// is expected (and must leave no trace).
    dropped: bool,
    opts: StatusOptions,
}

/// Each node's id of the live view's connection there (`CLIENT ID` on every primary).
async fn connection_ids(store: &RedisStore) -> Vec<(String, i64)> {
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg("ID");
    store
        .on_nodes(&store.primaries(), &cmd)
        .await
        .into_iter()
        .filter_map(|(addr, r)| match r {
            Ok(redis::Value::Int(id)) => Some((addr, id)),
            _ => None,
        })
        .collect()
}

/// Kills the given connections from the world's own handle.
async fn kill(main: &RedisStore, ids: &[(String, i64)]) {
    for node in main.primaries() {
        for (_, id) in ids.iter().filter(|(addr, _)| *addr == node.addr) {
            let mut cmd = redis::cmd("CLIENT");
            cmd.arg("KILL").arg("ID").arg(*id);
            let _ = node.query(&cmd).await;
        }
    }
}

impl Live {
    pub fn new(store: RedisStore, main: RedisStore, id: ActivityId, grace: Duration) -> Live {
        let armed = Arc::new(AtomicBool::new(false));
        let mut opts = TrackerOptions::live(grace, false);
        opts.interleave = {
            let (store, main, armed) = (store.clone(), main.clone(), armed.clone());
            Interleave::new(move |stage| {
                let (store, main, armed) = (store.clone(), main.clone(), armed.clone());
                Box::pin(async move {
                    if stage == Stage::Cut && armed.swap(false, Ordering::SeqCst) {
                        let ids = connection_ids(&store).await;
                        kill(&main, &ids).await;
                    }
                })
            })
        };
        Live {
            tracker: Tracker::new(id, opts),
            store,
            main,
            armed,
            dropped: false,
            opts: StatusOptions {
                grace,
                compensation_alert: Duration::from_secs(3600),
                outbox_alert: Duration::from_secs(3600),
                gauge: Default::default(),
            },
        }
    }

    /// The live view's connections are cut during its next refresh.
    pub fn arm(&mut self) {
        self.armed.store(true, Ordering::SeqCst);
        self.dropped = true;
    }

    /// The live view's connections drop now (a failover: the old primary is gone).
    pub async fn drop_now(&mut self) {
        let ids = connection_ids(&self.store).await;
        kill(&self.main, &ids).await;
        self.dropped = true;
    }

    /// Keys changed outside the scripts: production's signal (evicted keys counted, a node
    /// that restarted) is given by hand.
    pub fn recut(&mut self) {
        self.tracker.recut();
    }

    async fn refresh(&mut self, w: &World) -> Result<StatusReport, String> {
        status_tracked(&mut self.tracker, &self.store, &w.db, &w.keys, &self.opts)
            .await
            .map_err(|e| e.to_string())
    }

    /// A refresh; after its connections were cut, one failure is expected and the refresh is
    /// made again at once (as the next poll would).
    pub async fn read(&mut self, w: &mut World) -> Result<StatusReport, Violation> {
        let r = match self.refresh(w).await {
            Err(e) if self.dropped => {
                w.say(format!(
                    "   live view: the refresh after the cut connections failed: {e}"
                ));
                self.refresh(w).await
            }
            r => r,
        };
        self.dropped = false;
        r.map_err(|e| violation("refresh failed", format!("a live refresh failed: {e}")))
    }
}

/// The figures a live view must share with `status`, one line per product.
fn figures(p: &ProductStatus) -> String {
    format!(
        "{} {} stock {:?} expected {} drift {:?} sold {} in_flight {} orphaned {} unledgered {} unexplained {} offset {:?} paused {}/{} lost {:?} corrupt {:?}",
        p.product,
        p.state.as_str(),
        p.redis_remaining,
        p.expected_remaining,
        p.drift,
        p.db_sold,
        p.in_flight,
        p.orphaned,
        p.unledgered,
        p.unexplained,
        p.offset,
        p.paused,
        p.db_paused,
        p.lost,
        p.corrupt_value
    )
}

/// A state whose figures the live view must show exactly as `status` does. A product in any
/// other state (a piece lost, a corrupt value, drift) reads the same state and, for drift and
/// oversold, the same drift (the figure its alert carries): its other figures depend on what
/// each reader learned before the fault (a live view remembers deductions a lost ledger no
/// longer shows; a `status` resumes from the last checkpoint) until the repair.
fn healthy(p: &ProductStatus) -> bool {
    matches!(p.state, State::Ok | State::Paused)
}

/// The alerts of the healthy products and of the slots: (kind, product).
fn alerts(r: &StatusReport, healthy: &BTreeSet<String>) -> BTreeSet<String> {
    r.alerts
        .iter()
        .filter(|a| match &a.product {
            Some(p) => healthy.contains(p),
            None => a.kind == AlertKind::SlotMigrating,
        })
        .map(|a| format!("{:?} {}", a.kind, a.product.as_deref().unwrap_or("-")))
        .collect()
}

/// The disagreements still open (issue 52), each counted and printed rather than failed;
/// `SECKILL_CHAOS_LIVE_STRICT=1` fails on them too. Nothing else may differ.
/// - `dated apart`: the same deductions, in flight for one reader and orphaned for the other.
///   A death is dated by the orders' clock lead over Redis's, which each reader learns from the
///   orders it saw (and, since this issue, from the checkpoint): after a rollback or failover
///   restores an older checkpoint, the two date a death up to the database clock's lag apart.
/// - `gap kept`: `stream_gap` is a flag books carry from the settle that met the gap until a
///   repair's marker; a settle from scratch sets it only while an active deduction lacks its
///   event. So one reader (the live view, or a `status` resuming from a checkpoint a failover
///   restored) can show the warning after the lost entry stopped mattering, and another not.
/// - `remembered`: a deduction whose event and ledger entry were both lost after the live view
///   saw it: the live view still names it (in flight or orphaned), a fresh `status` can only
///   count its units as ones the counters hold that no ledger entry names (the product reads
///   `missing` or `corrupt` there, where the live view may read `oversold`). The live view is
///   the better informed; `status` should count such units as held when it judges an oversell.
pub const KNOWN: [&str; 3] = ["dated apart", "gap kept", "remembered"];

/// Reads where each [`KNOWN`] disagreement was met, over the whole run.
pub static MET: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

fn strict() -> bool {
    std::env::var("SECKILL_CHAOS_LIVE_STRICT").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Which [`KNOWN`] disagreement `f` (status) and `l` (the live view) show, if one.
fn known(f: &ProductStatus, l: &ProductStatus) -> Option<usize> {
    let rest = |p: &ProductStatus| {
        (
            p.redis_remaining,
            p.unledgered,
            p.unexplained,
            p.offset,
            p.paused,
            p.db_paused,
            p.lost.clone(),
        )
    };
    if strict() {
        return None;
    }
    let held = |p: &ProductStatus| p.in_flight + p.orphaned;
    if f.lost.contains(&Piece::Ledger)
        && f.lost == l.lost
        && f.db_sold == l.db_sold
        && f.unledgered == l.unledgered
        && held(l) > held(f)
    {
        return Some(2);
    }
    if rest(f) != rest(l) {
        return None;
    }
    // Everything else equal (a lost piece too: a death is dated the same way whatever else
    // the product lost), the same units split differently between in flight and orphaned.
    if f.db_sold == l.db_sold && held(f) == held(l) && f.orphaned != l.orphaned {
        return Some(0);
    }
    None
}

fn met(kind: usize) {
    MET[kind].fetch_add(1, Ordering::Relaxed);
}

/// What the run met of each known disagreement, for the hunt's summary line.
pub fn met_summary() -> String {
    KNOWN
        .iter()
        .zip(&MET)
        .map(|(k, n)| format!("{k} {}", n.load(Ordering::Relaxed)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the live view parts from `status`: (the tag a shrinker keeps, the detail).
fn differ(fresh: &StatusReport, live: &StatusReport) -> Option<(String, String)> {
    let mut healthy_in_both = BTreeSet::new();
    for f in &fresh.products {
        let Some(l) = live.products.iter().find(|l| l.product == f.product) else {
            return Some((
                "row missing".into(),
                format!("the live view lacks {}", f.product),
            ));
        };
        let (a, b) = (figures(f), figures(l));
        if let Some(kind) = known(f, l) {
            met(kind);
            continue;
        }
        let tag = if f.state != l.state {
            Some("state")
        } else if healthy(f) && a != b {
            Some("figures")
        } else if matches!(f.state, State::Drift | State::Oversold) && f.drift != l.drift {
            Some("drift")
        } else {
            None
        };
        if let Some(tag) = tag {
            return Some((tag.into(), format!("status: {a}\n   live view: {b}")));
        }
        if healthy(f) {
            healthy_in_both.insert(f.product.clone());
        }
    }
    let (a, b) = (
        alerts(fresh, &healthy_in_both),
        alerts(live, &healthy_in_both),
    );
    let but_gaps = |x: &BTreeSet<String>| -> BTreeSet<String> {
        x.iter()
            .filter(|s| !s.starts_with("StreamGap "))
            .cloned()
            .collect()
    };
    if a != b && !strict() && but_gaps(&a) == but_gaps(&b) {
        met(1);
        return None;
    }
    (a != b).then(|| {
        (
            "alerts".into(),
            format!("status alerts {a:?}\n   live view alerts {b:?}"),
        )
    })
}

fn violation(tag: &str, detail: String) -> Violation {
    Violation {
        inv: "7-live-view",
        tag: tag.to_string(),
        detail,
    }
}

/// Invariant 7: the live view, carried from the last step, shows what a fresh `status` shows
/// (`fresh`, read just before). A refresh may fail once after its connections were cut, and
/// the next must agree.
pub async fn agrees(w: &mut World, fresh: StatusReport) -> Result<(), Violation> {
    let Some(mut live) = w.live.take() else {
        return Ok(());
    };
    let r = agrees_with(w, &mut live, fresh).await;
    w.live = Some(live);
    r
}

async fn agrees_with(
    w: &mut World,
    live: &mut Live,
    mut fresh: StatusReport,
) -> Result<(), Violation> {
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            fresh = read_status(w).await?;
        }
        let shown = live.read(w).await?;
        if std::env::var("SECKILL_CHAOS_DEBUG_LIVE").is_ok() {
            let all = |r: &StatusReport| {
                r.products
                    .iter()
                    .map(|p| format!("{} gap={}", figures(p), p.stream_gap))
                    .collect::<Vec<_>>()
            };
            w.say(format!(
                "   [debug] status {:?}\n   [debug] live {:?}",
                all(&fresh),
                all(&shown)
            ));
        }
        match differ(&fresh, &shown) {
            None => return Ok(()),
            Some((tag, detail)) => {
                w.say(format!("   live view differs (read {attempt}): {detail}"));
                last = Some((tag, detail));
            }
        }
    }
    let (tag, detail) =
        last.unwrap_or_else(|| ("refresh failed".into(), "no live refresh succeeded".into()));
    Err(violation(
        &tag,
        format!(
            "the live view disagrees with a fresh status {ATTEMPTS} reads in a row:\n   {detail}"
        ),
    ))
}

impl World {
    /// Saves every product's keys before a step (what a lagging replica still holds).
    pub async fn remember(&mut self) {
        let mut all = Vec::with_capacity(super::steps::PRODUCTS.len());
        for p in 0..super::steps::PRODUCTS.len() {
            all.push(self.saved_of(p).await);
        }
        self.history.push_back(all);
        while self.history.len() > FAILOVER_DEPTH + 1 {
            self.history.pop_front();
        }
    }

    /// A failover to a replica `lost` steps behind: every product goes back, and the live
    /// view's connections drop.
    pub async fn failover(&mut self, lost: u32) {
        // The last entry is the state before this step (now).
        let back = usize::try_from(lost).unwrap_or(1).clamp(1, FAILOVER_DEPTH);
        let Some(at) = self.history.len().checked_sub(1 + back) else {
            self.say(format!(
                "   (no state {back} step(s) back yet: no failover)"
            ));
            return;
        };
        let states: Vec<Saved> = self.history.drain(at..).next().unwrap_or_default();
        self.history.clear();
        self.say(format!(
            "   failover: the new primary lacks the last {back} step(s)"
        ));
        for saved in states {
            self.restore(saved).await;
        }
        if let Some(live) = &mut self.live {
            live.drop_now().await;
        }
    }

    /// The live view's connections are cut in the middle of its next refresh.
    pub fn reconnect(&mut self) {
        if let Some(live) = &mut self.live {
            live.arm();
            self.say("   the live view's connections will be cut at its next cut");
        }
    }

    /// Production's signal that keys changed outside the scripts.
    pub fn recut_live(&mut self) {
        if let Some(live) = &mut self.live {
            live.recut();
        }
    }
}

/// The history ring of a case.
pub type History = VecDeque<Vec<Saved>>;
