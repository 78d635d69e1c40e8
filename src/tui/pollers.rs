//! Pollers: background tasks that read Redis and the database at the refresh interval and send
//! whole snapshots to the loop. One poll at a time per poller (the next waits for the last),
//! each bounded by a deadline (the status poll's, on reads that stopped coming: a settle from
//! scratch runs on while it reads), each in its own task so that even a panic only costs one
//! snapshot. A change of activity or a "refresh now" wakes them early.

use super::action::Action;
use super::feed::Fetched;
use super::feed::Overview;
use super::services::Services;
use crate::db::{audit, compensation};
use crate::domain::{ActivityId, Phase};
use crate::error::{Error, Result};
use crate::ops::glance::{self, Glance};
use crate::ops::health;
use crate::ops::listing::{Listing, TOTALS_EVERY};
use crate::ops::progress::SettleGauge;
use crate::ops::status::{StatusOptions, StatusReport, status_tracked};
use crate::ops::tracker::{Tracker, TrackerOptions};
use chrono::Utc;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The longest one poll may take before it counts as failed. Redis has its own response
/// timeout; this bounds what has none (a query on a stopped database server).
pub const POLL_DEADLINE: Duration = Duration::from_secs(10);
/// Compensation entries and audit rows listed.
const COMPENSATION_LIMIT: i64 = 1000;
const AUDIT_LIMIT: i64 = 500;
/// Activities whose alerts and preheat state the overview reads, besides the selected one.
const OVERVIEW_MAX: usize = 20;
/// Activities larger than this are left out of the overview (its glance reads every product's
/// cut when it first sees the activity and again every few minutes).
const OVERVIEW_MAX_PRODUCTS: i64 = 20_000;

/// What wakes the pollers.
#[derive(Clone)]
pub struct Wake {
    pub activity: watch::Receiver<Option<ActivityId>>,
    pub refresh: watch::Receiver<u64>,
}

/// Starts every poller; they stop when aborted or when the loop is gone.
pub fn spawn(
    services: Arc<Services>,
    tx: UnboundedSender<Action>,
    wake: Wake,
) -> Vec<JoinHandle<()>> {
    let config = services.ctx.config.clone();
    let refresh = config.refresh;
    let opts = StatusOptions {
        grace: config.grace,
        compensation_alert: config.compensation_alert,
        outbox_alert: config.outbox_alert,
        gauge: Default::default(),
    };
    let keys = config.keys.clone();
    let mut tasks = Vec::new();

    // The status of the selected activity: the Stock, Alerts and Reconcile views. Its tracker
    // keeps the books between refreshes, so a refresh reads what changed, not what was sold.
    {
        let (s, tx, opts, keys) = (services.clone(), tx.clone(), opts.clone(), keys.clone());
        let trackers = Trackers::new(config.read_only, config.warm_share_pct);
        let selected = wake.activity.clone();
        tasks.push(tokio::spawn(every(refresh, wake.clone(), move |current| {
            let (s, tx, opts, keys) = (s.clone(), tx.clone(), opts.clone(), keys.clone());
            let (trackers, selected) = (trackers.clone(), selected.clone());
            async move {
                let Some(id) = current else { return true };
                let a = id.clone();
                let gauge = trackers.gauge.clone();
                let refresh = async move {
                    let mut t = trackers.take(&a, opts.grace);
                    let r = async {
                        let redis = s.redis().await?;
                        let db = s.db().await?;
                        status_tracked(&mut t, &redis, &db, &keys, &opts).await
                    }
                    .await;
                    // Only a refresh that finished hands its books on (one cut short may have
                    // moved them half way).
                    trackers.keep(t);
                    r
                };
                let settling = |p| tx.send(Action::Settling(id.clone(), p)).is_ok();
                let bounds = (SETTLING_EVERY, POLL_DEADLINE);
                match settled(refresh, (&gauge, bounds), &selected, &id, settling).await {
                    Some(result) => tx.send(Action::Status(id, Fetched::now(result))).is_ok(),
                    None => !tx.is_closed(),
                }
            }
        })));
    }

    // The activity list, kept between polls and shared by the activities poller and the
    // overview: the products' figures are summed every 30 s, not at every refresh of either.
    let listing = Arc::new(tokio::sync::Mutex::new(Listing::new(TOTALS_EVERY)));

    // The activities list; it also tells the header whether the database answers.
    {
        let (s, tx, listing) = (services.clone(), tx.clone(), listing.clone());
        tasks.push(tokio::spawn(every(refresh, wake.clone(), move |_| {
            let (s, tx, listing) = (s.clone(), tx.clone(), listing.clone());
            async move {
                let result = guarded(async move {
                    let db = s.db().await?;
                    listing.lock().await.read(&db).await
                })
                .await;
                tx.send(Action::Activities(Fetched::now(result))).is_ok()
            }
        })));
    }

    // What Redis alone shows of the other activities, less often.
    {
        let (s, tx, keys) = (services.clone(), tx.clone(), keys.clone());
        let period = refresh.max(Duration::from_secs(5));
        let glances = Glances::default();
        tasks.push(tokio::spawn(every(period, wake.clone(), move |current| {
            let (s, tx, keys) = (s.clone(), tx.clone(), keys.clone());
            let (glances, listing) = (glances.clone(), listing.clone());
            async move {
                let result = guarded(async move {
                    overview(&s, &keys, current.as_ref(), (&glances, &listing)).await
                })
                .await;
                tx.send(Action::Overview(Fetched::now(result))).is_ok()
            }
        })));
    }

    // The compensation queue of the selected activity.
    {
        let (s, tx) = (services.clone(), tx.clone());
        tasks.push(tokio::spawn(every(refresh, wake.clone(), move |current| {
            let (s, tx) = (s.clone(), tx.clone());
            async move {
                let Some(id) = current else { return true };
                let a = id.clone();
                let result = guarded(async move {
                    compensation::list(&s.db().await?, &a, COMPENSATION_LIMIT).await
                })
                .await;
                tx.send(Action::Compensation(id, Fetched::now(result)))
                    .is_ok()
            }
        })));
    }

    // The console's own writes.
    {
        let (s, tx) = (services.clone(), tx.clone());
        tasks.push(tokio::spawn(every(refresh, wake.clone(), move |_| {
            let (s, tx) = (s.clone(), tx.clone());
            async move {
                let result = guarded(async move {
                    let db = s.db().await?;
                    audit::recent(&db, None, AUDIT_LIMIT)
                        .await
                        .map_err(|e| db.error(&e))
                })
                .await;
                tx.send(Action::Audit(Fetched::now(result))).is_ok()
            }
        })));
    }

    // Redis nodes; it also tells the header whether Redis answers.
    {
        let (s, tx) = (services, tx);
        tasks.push(tokio::spawn(every(refresh, wake, move |_| {
            let (s, tx) = (s.clone(), tx.clone());
            async move {
                let result =
                    guarded(async move { Ok(health::redis_info(&s.redis().await?).await) }).await;
                tx.send(Action::Redis(Fetched::now(result))).is_ok()
            }
        })));
    }
    tasks
}

/// Runs `poll` now and then every `period`, or sooner when the activity changes or a refresh
/// is asked for. `poll` gets the selected activity and returns false once the loop is gone.
async fn every<F, Fut>(period: Duration, mut wake: Wake, mut poll: F)
where
    F: FnMut(Option<ActivityId>) -> Fut,
    Fut: Future<Output = bool>,
{
    loop {
        let current = wake.activity.borrow_and_update().clone();
        wake.refresh.borrow_and_update();
        if !poll(current).await {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            changed = wake.activity.changed() => if changed.is_err() { return },
            changed = wake.refresh.changed() => if changed.is_err() { return },
        }
    }
}

/// Runs one poll in its own task under [`POLL_DEADLINE`]: a hang becomes an error, a panic
/// becomes an error, and the poller lives on.
async fn guarded<T, Fut>(fut: Fut) -> Result<T>
where
    T: Send + 'static,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let task = tokio::spawn(tokio::time::timeout(POLL_DEADLINE, fut));
    match task.await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(Error::unavailable(format!(
            "no answer within {} s",
            POLL_DEADLINE.as_secs()
        ))),
        Err(e) => Err(Error::internal(format!(
            "the poll stopped unexpectedly: {e}"
        ))),
    }
}

/// How often a poll that settles beside the polls says how far it read.
const SETTLING_EVERY: Duration = Duration::from_secs(1);

/// Runs the status refresh in its own task. A refresh normally ends within [`POLL_DEADLINE`];
/// one that settles books from scratch (a cold start on a big sale: 14 s for a million units on
/// this machine) runs on for as long as its pages keep coming, and `settling` is told how far
/// it read every second, so that it always finishes instead of being cut at the deadline and
/// started again from nothing. A refresh that reads nothing for [`POLL_DEADLINE`] is a hang and
/// ends as an error; one whose activity the operator left is dropped (None).
async fn settled<Fut>(
    refresh: Fut,
    (gauge, (tick, deadline)): (&SettleGauge, (Duration, Duration)),
    selected: &watch::Receiver<Option<ActivityId>>,
    id: &ActivityId,
    mut settling: impl FnMut(u8) -> bool,
) -> Option<Result<StatusReport>>
where
    Fut: Future<Output = Result<StatusReport>> + Send + 'static,
{
    let mut task = tokio::spawn(refresh);
    let mut last_read = gauge.total_read();
    let mut moved_at = tokio::time::Instant::now();
    loop {
        match tokio::time::timeout(tick, &mut task).await {
            Ok(Ok(result)) => return Some(result),
            Ok(Err(e)) => {
                return Some(Err(Error::internal(format!(
                    "the poll stopped unexpectedly: {e}"
                ))));
            }
            Err(_) => {}
        }
        if selected.borrow().as_ref() != Some(id) {
            task.abort();
            return None;
        }
        let read = gauge.total_read();
        if read != last_read {
            (last_read, moved_at) = (read, tokio::time::Instant::now());
        }
        if moved_at.elapsed() >= deadline {
            task.abort();
            return Some(Err(Error::unavailable(format!(
                "no answer within {} s",
                deadline.as_secs()
            ))));
        }
        if let Some(p) = gauge.percent()
            && !settling(p)
        {
            task.abort();
            return None;
        }
    }
}

/// The tracker of the activity the Stock poller follows, shared between its polls. A poll
/// takes it out and puts it back when it finished.
#[derive(Clone)]
struct Trackers {
    kept: Arc<std::sync::Mutex<HashMap<ActivityId, Tracker>>>,
    /// A read-only console keeps its books in memory only.
    read_only: bool,
    /// The share of Redis's time a first read may take, in percent.
    warm_share_pct: u8,
    /// How far the running settle from scratch has read.
    gauge: SettleGauge,
}

impl Trackers {
    fn new(read_only: bool, warm_share_pct: u8) -> Self {
        Trackers {
            kept: Arc::default(),
            read_only,
            warm_share_pct,
            gauge: SettleGauge::new(),
        }
    }

    fn take(&self, id: &ActivityId, grace: Duration) -> Tracker {
        self.kept
            .lock()
            .ok()
            .and_then(|mut m| m.remove(id))
            .unwrap_or_else(|| {
                let mut opts =
                    TrackerOptions::live(grace, self.read_only).warm_share(self.warm_share_pct);
                opts.gauge = self.gauge.clone();
                Tracker::new(id.clone(), opts)
            })
    }

    fn keep(&self, t: Tracker) {
        if let Ok(mut m) = self.kept.lock() {
            // One activity at a time: the books of one the operator left are not kept.
            m.retain(|id, _| id == t.activity());
            m.insert(t.activity().clone(), t);
        }
    }
}

/// The alerts an activity counts at a glance, as its own `status` would raise them: a
/// cancelled one's stock still in Redis is one `cancelled_on_sale`; an activity not selling yet
/// with no key in Redis is not preheated yet (info, no alert); else each product whose stock is
/// missing, corrupt, negative or off its counters.
pub fn overview_alerts(phase: Phase, draft: bool, bad: usize, present: usize) -> usize {
    match phase {
        Phase::Cancelled => usize::from(present > 0),
        Phase::Upcoming if present == 0 => 0,
        _ if draft && present == 0 => 0,
        _ => bad,
    }
}

/// The overview's glances, kept between its polls, and each node's evicted keys at the last
/// poll. A poll takes each glance out and puts it back when its read finished (one cut short
/// may hold a cut half way).
#[derive(Clone, Default)]
struct Glances(Arc<std::sync::Mutex<Glanced>>);

#[derive(Default)]
struct Glanced {
    by_activity: HashMap<ActivityId, Glance>,
    /// Each node's `evicted_keys` at the last poll.
    evicted: HashMap<String, u64>,
}

impl Glances {
    /// Keeps the glances of `wanted` only.
    fn retain(&self, wanted: &[ActivityId]) {
        if let Ok(mut m) = self.0.lock() {
            m.by_activity.retain(|id, _| wanted.contains(id));
        }
    }

    /// Weighs each node's evicted keys against the last poll's: a node that evicted keys may
    /// have taken a piece of a quiet product, so every glance reads whole next, as the live
    /// view does.
    fn evicted(&self, now: HashMap<String, u64>) {
        if let Ok(mut m) = self.0.lock() {
            if health::evicted_since(&m.evicted, &now) {
                m.by_activity.values_mut().for_each(Glance::recut);
            }
            m.evicted.extend(now);
        }
    }

    fn take(&self, id: &ActivityId) -> Glance {
        self.0
            .lock()
            .ok()
            .and_then(|mut m| m.by_activity.remove(id))
            .unwrap_or_else(|| Glance::new(id.clone(), glance::OVERVIEW))
    }

    fn keep(&self, g: Glance) {
        if let Ok(mut m) = self.0.lock() {
            m.by_activity.insert(g.activity().clone(), g);
        }
    }
}

/// Alert counts and preheat state of the activities that have not ended.
async fn overview(
    s: &Services,
    keys: &crate::redis::KeySpace,
    selected: Option<&ActivityId>,
    (glances, listing): (&Glances, &tokio::sync::Mutex<Listing>),
) -> Result<Vec<Overview>> {
    let db = s.db().await?;
    let list = listing.lock().await.read(&db).await?;
    let now = Utc::now();
    // Cancelled ones too: their stock left in Redis still sells (`cancelled_on_sale`).
    let wanted: Vec<(ActivityId, Phase, bool)> = list
        .iter()
        .filter(|a| a.activity.phase(now) != Phase::Ended)
        // A huge activity's whole reads would cost more than its alert count is worth here;
        // it shows its alerts once selected.
        .filter(|a| a.products <= OVERVIEW_MAX_PRODUCTS)
        .filter(|a| Some(&a.activity.activity_id) != selected)
        .map(|a| {
            let draft = a.activity.status == crate::domain::activity::ActivityStatus::Draft;
            (a.activity.activity_id.clone(), a.activity.phase(now), draft)
        })
        .take(OVERVIEW_MAX)
        .collect();
    glances.retain(&wanted.iter().map(|w| w.0.clone()).collect::<Vec<_>>());
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let redis = s.redis().await?;
    glances.evicted(health::evicted_keys(&redis).await);
    let mut out = Vec::new();
    for (id, phase, draft) in wanted {
        // Redis alone, at a glance: reconciling every other activity's orders in the
        // background would cost the database what the selected one's books save it.
        let mut g = glances.take(&id);
        // One activity that fails to read (removed meanwhile) leaves only its own row blank.
        if let Ok(c) = g.read(&redis, &db, keys).await {
            glances.keep(g);
            out.push(Overview {
                activity: id.to_string(),
                alerts: overview_alerts(phase, draft, c.alerts, c.present),
                preheated: c.products > 0 && c.present == c.products,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_activities_count_what_their_own_status_would_raise() {
        // A cancelled activity: one cancelled_on_sale while any stock is left, else nothing.
        assert_eq!(overview_alerts(Phase::Cancelled, false, 3, 3), 1);
        assert_eq!(overview_alerts(Phase::Cancelled, false, 3, 0), 0);
        // Not selling yet and never preheated: no alert (it is information).
        assert_eq!(overview_alerts(Phase::Upcoming, false, 2, 0), 0);
        assert_eq!(overview_alerts(Phase::Live, true, 2, 0), 0);
        // Half preheated, or live: every product with a problem.
        assert_eq!(overview_alerts(Phase::Upcoming, false, 1, 1), 1);
        assert_eq!(overview_alerts(Phase::Live, false, 2, 0), 2);
    }

    use std::sync::atomic::{AtomicBool, Ordering};

    const BOUNDS: (Duration, Duration) = (Duration::from_millis(20), Duration::from_millis(300));

    fn snapshot() -> StatusReport {
        crate::tui::tests::fixtures::report(0, 0)
    }

    /// A refresh that reads a page every `every` for `pages` pages, then answers.
    async fn reading(gauge: SettleGauge, pages: u64, every: Duration) -> Result<StatusReport> {
        gauge.start(pages);
        for p in 1..=pages {
            tokio::time::sleep(every).await;
            gauge.read(p);
        }
        gauge.finish();
        Ok(snapshot())
    }

    #[tokio::test]
    async fn a_settle_that_reads_on_outlives_the_deadline_and_says_how_far_it_is() {
        let gauge = SettleGauge::new();
        let id = ActivityId::parse("big").expect("id");
        let (_tx, rx) = watch::channel(Some(id.clone()));
        // 20 pages 50 ms apart: a second in all, three deadlines of 300 ms.
        let refresh = reading(gauge.clone(), 20, Duration::from_millis(50));
        let mut said = Vec::new();
        let out = settled(refresh, (&gauge, BOUNDS), &rx, &id, |p| {
            said.push(p);
            true
        })
        .await;
        assert!(matches!(out, Some(Ok(_))), "{out:?}");
        assert!(said.len() > 5, "{said:?}");
        assert!(said.windows(2).all(|w| w[0] <= w[1]), "{said:?}");
        assert!(said.iter().any(|&p| p > 0 && p < 100), "{said:?}");
    }

    #[tokio::test]
    async fn a_refresh_that_reads_nothing_for_the_deadline_is_a_hang() {
        let gauge = SettleGauge::new();
        let id = ActivityId::parse("big").expect("id");
        let (_tx, rx) = watch::channel(Some(id.clone()));
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        let hung = async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            flag.store(true, Ordering::SeqCst);
            Ok(snapshot())
        };
        let out = settled(hung, (&gauge, BOUNDS), &rx, &id, |_| true).await;
        let Some(Err(e)) = out else {
            panic!("not an error: {out:?}")
        };
        assert!(e.message.contains("no answer within"), "{}", e.message);
        assert!(!ended.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn leaving_the_activity_drops_its_settle() {
        let gauge = SettleGauge::new();
        let id = ActivityId::parse("big").expect("id");
        let (tx, rx) = watch::channel(Some(id.clone()));
        let refresh = reading(gauge.clone(), 100, Duration::from_millis(20));
        let out = settled(refresh, (&gauge, BOUNDS), &rx, &id, |_| {
            let _ = tx.send(Some(ActivityId::parse("other").expect("id")));
            true
        })
        .await;
        assert!(out.is_none(), "{out:?}");
    }
}
