//! Counters and latency histograms of a run: lock-free counters while it runs (read by the
//! progress display and the TUI), per-task histograms merged at the end.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The refusal of a paused product (-5).
pub const PAUSED: &str = "paused";

/// What one attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Deducted; the stock left.
    Sold(i64),
    SoldOut,
    UserLimited,
    /// The stock key is missing (-1) or the product paused (-5): a definite refusal.
    Refused(&'static str),
    /// The outcome is unknown (a dropped connection, a timeout): the request may be retried
    /// with the same request id (the script is idempotent); a compensation entry is written if
    /// it stays unknown.
    Unknown(String),
    /// An injected timeout: the caller gave up at once (no retry), leaving a compensation entry.
    GaveUp(String),
    /// The lock could not be taken in time.
    LockBusy,
    /// A definite error (an error reply, a database failure).
    Error(String),
}

/// One invariant a dry run checks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Invariant {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// The result of a run, as `load` and `dry-run` print it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunStats {
    pub strategy: String,
    pub requests: u64,
    pub succeeded: u64,
    pub sold_out: u64,
    pub user_limited: u64,
    /// Answered -5: the product is paused.
    pub paused: u64,
    pub errors: u64,
    pub unknown: u64,
    pub ops_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    /// Units sold beyond the stock (summed over products).
    pub oversold: i64,
    /// Samples of the watcher that saw a negative stock while the run went on.
    pub negative_seen: u64,
    pub round_trips_per_request: f64,
    pub lock_failures: u64,
    /// Units sold (live orders) and the stock they came from, over the whole activity after
    /// the run: earlier runs and other buyers included, not this run's alone (`succeeded`).
    pub sold: i64,
    pub stock: i64,
    pub elapsed_ms: u64,
    /// Orders paid and expired by the payment step (`load` only).
    pub paid: u64,
    pub expired: u64,
    pub compensation_entries: u64,
    /// Requests sent again (same request id) after an unknown outcome.
    pub retries: u64,
    /// Returns of expired orders' units that did not happen ([`Counters::restore_failures`]).
    pub restore_failures: u64,
    /// Why requests failed or stayed unknown, by reason, most first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_reasons: Vec<(String, u64)>,
    /// Buyers (per product) whose live orders hold more than the per-user limit, after the run
    /// (`load` only).
    pub over_limit: i64,
    /// Products paused live, whose shadow copies a dry run paused too (the Lua deduction sells
    /// nothing of them; the other strategies do not read the flag).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paused_products: Vec<String>,
    /// Invariants checked (dry runs), and whether all held.
    pub invariants: Vec<Invariant>,
    pub ok: bool,
}

/// Live counters, shared by the buyer tasks and whoever watches the run.
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub succeeded: AtomicU64,
    pub sold_out: AtomicU64,
    pub user_limited: AtomicU64,
    pub paused: AtomicU64,
    pub errors: AtomicU64,
    pub unknown: AtomicU64,
    pub lock_failures: AtomicU64,
    pub round_trips: AtomicU64,
    pub negative_seen: AtomicU64,
    pub compensation_entries: AtomicU64,
    pub paid: AtomicU64,
    pub expired: AtomicU64,
    /// Requests sent again after an unknown outcome.
    pub retries: AtomicU64,
    /// Sales whose order could not be written (their stock went back).
    pub order_failures: AtomicU64,
    /// Returns of expired orders' units that did not happen (the script refused, or Redis did
    /// not answer): orphans that `fix` returns once past the grace window.
    pub restore_failures: AtomicU64,
    /// Why requests failed, by reason (an error's code or the first words of its text): the
    /// rare path, so a lock is no cost.
    pub error_reasons: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// The reason an error is counted under: Redis's error code (NOPERM, TRYAGAIN, OOM, ...) when
/// the text starts with one, else its first words.
pub fn error_reason(text: &str) -> String {
    let first = text.split_whitespace().next().unwrap_or("");
    if first.len() >= 2 && first.chars().all(|c| c.is_ascii_uppercase()) {
        return first.to_string();
    }
    if text.contains("timed out") || text.contains("timeout") {
        return "timed out".to_string();
    }
    text.split_whitespace()
        .take(4)
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(48)
        .collect()
}

impl Counters {
    pub fn record(&self, outcome: &Outcome) {
        let c = match outcome {
            Outcome::Sold(_) => &self.succeeded,
            Outcome::SoldOut => &self.sold_out,
            Outcome::UserLimited => &self.user_limited,
            Outcome::Refused(PAUSED) => &self.paused,
            Outcome::Unknown(_) | Outcome::GaveUp(_) => &self.unknown,
            Outcome::LockBusy => {
                self.lock_failures.fetch_add(1, Ordering::Relaxed);
                &self.errors
            }
            Outcome::Refused(_) | Outcome::Error(_) => &self.errors,
        };
        let why = match outcome {
            Outcome::Error(text) | Outcome::Unknown(text) | Outcome::GaveUp(text) => {
                Some(error_reason(text))
            }
            Outcome::Refused(r) if *r != PAUSED => Some((*r).to_string()),
            _ => None,
        };
        if let Some(why) = why
            && let Ok(mut reasons) = self.error_reasons.lock()
        {
            *reasons.entry(why).or_default() += 1;
        }
        c.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// Latencies in microseconds, 1 us to 60 s, 3 significant figures.
pub fn new_histogram() -> Histogram<u64> {
    // Constant, valid bounds: this cannot fail.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// A snapshot of a running run, for progress lines and the TUI.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LiveSnapshot {
    pub done: u64,
    pub total: u64,
    pub succeeded: u64,
    pub sold_out: u64,
    pub user_limited: u64,
    pub errors: u64,
    pub unknown: u64,
    /// Requests per second over the last interval.
    pub ops_per_sec: f64,
    /// Latency percentiles of the last interval.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub finished: bool,
}

/// The shared state of a run: counters, the run's latency histogram, a latency window for the
/// last interval, and the rate of the last interval. Two histograms per run, whatever the
/// concurrency: buyer tasks hand in their latencies in small batches.
pub struct Live {
    pub counters: Counters,
    pub total: AtomicU64,
    run: Mutex<Histogram<u64>>,
    window: Mutex<Histogram<u64>>,
    last: Mutex<(Instant, u64, f64, f64, f64)>,
    finished: std::sync::atomic::AtomicBool,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            counters: Counters::default(),
            total: AtomicU64::new(0),
            run: Mutex::new(new_histogram()),
            window: Mutex::new(new_histogram()),
            last: Mutex::new((Instant::now(), 0, 0.0, 0.0, 0.0)),
            finished: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Live {
    /// Records a batch of latencies (microseconds) in the run and in the window.
    pub fn record_latencies(&self, us: &[u64]) {
        for h in [&self.run, &self.window] {
            if let Ok(mut h) = h.lock() {
                for &v in us {
                    let _ = h.record(v.max(1));
                }
            }
        }
    }

    /// The latency histogram of the whole run so far.
    pub fn run_histogram(&self) -> Histogram<u64> {
        self.run
            .lock()
            .map(|h| h.clone())
            .unwrap_or_else(|_| new_histogram())
    }

    pub fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
    }

    /// The numbers since the previous call (rate, percentiles) and the totals so far. Call it
    /// at a steady interval (the progress line and the TUI do, once a second).
    pub fn snapshot(&self) -> LiveSnapshot {
        let c = &self.counters;
        let done = Counters::get(&c.requests);
        let (rate, p50, p99) = match self.last.lock() {
            Ok(mut last) => {
                let elapsed = last.0.elapsed();
                if elapsed >= Duration::from_millis(200) {
                    let (p50, p99) = match self.window.lock() {
                        Ok(mut w) => {
                            let out = if w.is_empty() {
                                (0.0, 0.0)
                            } else {
                                (ms(w.value_at_quantile(0.5)), ms(w.value_at_quantile(0.99)))
                            };
                            w.reset();
                            out
                        }
                        Err(_) => (0.0, 0.0),
                    };
                    let rate = (done.saturating_sub(last.1)) as f64 / elapsed.as_secs_f64();
                    *last = (Instant::now(), done, rate, p50, p99);
                }
                (last.2, last.3, last.4)
            }
            Err(_) => (0.0, 0.0, 0.0),
        };
        LiveSnapshot {
            done,
            total: self.total.load(Ordering::Relaxed),
            succeeded: Counters::get(&c.succeeded),
            sold_out: Counters::get(&c.sold_out),
            user_limited: Counters::get(&c.user_limited),
            errors: Counters::get(&c.errors),
            unknown: Counters::get(&c.unknown),
            ops_per_sec: rate,
            p50_ms: p50,
            p99_ms: p99,
            finished: self.finished.load(Ordering::Relaxed),
        }
    }
}

/// Microseconds to milliseconds, rounded to 3 decimals.
pub fn ms(us: u64) -> f64 {
    (us as f64 / 1000.0 * 1000.0).round() / 1000.0
}

impl RunStats {
    /// Final figures from the counters and the merged histogram of the whole run.
    pub fn from_run(
        strategy: &str,
        c: &Counters,
        hist: &Histogram<u64>,
        elapsed: Duration,
    ) -> Self {
        let requests = Counters::get(&c.requests);
        let secs = elapsed.as_secs_f64().max(1e-9);
        let q = |p: f64| {
            if hist.is_empty() {
                0.0
            } else {
                ms(hist.value_at_quantile(p))
            }
        };
        RunStats {
            strategy: strategy.to_string(),
            requests,
            succeeded: Counters::get(&c.succeeded),
            sold_out: Counters::get(&c.sold_out),
            user_limited: Counters::get(&c.user_limited),
            paused: Counters::get(&c.paused),
            errors: Counters::get(&c.errors),
            unknown: Counters::get(&c.unknown),
            ops_per_sec: (requests as f64 / secs * 10.0).round() / 10.0,
            p50_ms: q(0.5),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            oversold: 0,
            negative_seen: Counters::get(&c.negative_seen),
            round_trips_per_request: if requests == 0 {
                0.0
            } else {
                (Counters::get(&c.round_trips) as f64 / requests as f64 * 100.0).round() / 100.0
            },
            lock_failures: Counters::get(&c.lock_failures),
            sold: 0,
            stock: 0,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            paid: Counters::get(&c.paid),
            expired: Counters::get(&c.expired),
            compensation_entries: Counters::get(&c.compensation_entries),
            retries: Counters::get(&c.retries),
            restore_failures: Counters::get(&c.restore_failures),
            error_reasons: {
                let mut v: Vec<(String, u64)> = c
                    .error_reasons
                    .lock()
                    .map(|r| r.iter().map(|(k, n)| (k.clone(), *n)).collect())
                    .unwrap_or_default();
                v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                v
            },
            over_limit: 0,
            paused_products: Vec::new(),
            invariants: Vec::new(),
            ok: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percentiles() {
        let c = Counters::default();
        c.record(&Outcome::Sold(3));
        c.record(&Outcome::SoldOut);
        c.record(&Outcome::LockBusy);
        c.record(&Outcome::Unknown("timeout".into()));
        let mut h = new_histogram();
        for us in [100, 200, 300, 400, 10_000] {
            let _ = h.record(us);
        }
        let s = RunStats::from_run("lua", &c, &h, Duration::from_secs(2));
        assert_eq!(
            (
                s.requests,
                s.succeeded,
                s.sold_out,
                s.errors,
                s.unknown,
                s.lock_failures
            ),
            (4, 1, 1, 1, 1, 1)
        );
        assert_eq!(s.ops_per_sec, 2.0);
        assert!((s.p50_ms - 0.3).abs() < 0.01, "{}", s.p50_ms);
        assert!((s.p99_ms - 10.0).abs() < 0.1, "{}", s.p99_ms);
    }
}
