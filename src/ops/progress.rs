//! Progress of long operations, reported by stage; the CLI draws it on a terminal, the TUI as a
//! gauge.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Receives progress: `done` of `total` units of `stage`.
pub trait Progress: Send + Sync {
    fn update(&self, stage: &str, done: usize, total: usize);
}

impl<F: Fn(&str, usize, usize) + Send + Sync> Progress for F {
    fn update(&self, stage: &str, done: usize, total: usize) {
        self(stage, done, total)
    }
}

/// Progress that goes nowhere.
pub struct Silent;

impl Progress for Silent {
    fn update(&self, _: &str, _: usize, _: usize) {}
}

/// How far the settles from scratch of a refresh have read, shared with whoever waits for it:
/// the live view says "settling, N%" while a cold settle runs beside its polls, and tells a
/// settle that reads on from one that hangs. A default gauge counts nothing.
#[derive(Clone, Debug, Default)]
pub struct SettleGauge(Option<std::sync::Arc<Counts>>);

#[derive(Debug, Default)]
struct Counts {
    /// Rows (events, orders, ledger entries) the running settle has read.
    read: AtomicU64,
    /// About how many it will read: each product's live units and active units (an event and
    /// an order per unit when every deduction takes one).
    expected: AtomicU64,
    /// Rows read by every settle so far: moves whenever a page comes back.
    total_read: AtomicU64,
    running: AtomicBool,
}

impl SettleGauge {
    /// A gauge that counts.
    pub fn new() -> Self {
        SettleGauge(Some(std::sync::Arc::default()))
    }

    /// A settle of about `expected` rows begins.
    pub fn start(&self, expected: u64) {
        if let Some(c) = &self.0 {
            c.read.store(0, Ordering::Relaxed);
            c.expected.store(expected.max(1), Ordering::Relaxed);
            c.running.store(true, Ordering::Release);
        }
    }

    /// The running settle has read `read` rows in all.
    pub fn read(&self, read: u64) {
        if let Some(c) = &self.0 {
            let before = c.read.swap(read, Ordering::Relaxed);
            c.total_read
                .fetch_add(read.saturating_sub(before), Ordering::Relaxed);
        }
    }

    pub fn finish(&self) {
        if let Some(c) = &self.0 {
            c.running.store(false, Ordering::Release);
        }
    }

    /// The running settle's share read, 0 to 99 (the estimate can fall short: it never says
    /// 100 before the settle ends); None when no settle runs.
    pub fn percent(&self) -> Option<u8> {
        let c = self.0.as_ref()?;
        if !c.running.load(Ordering::Acquire) {
            return None;
        }
        let read = c.read.load(Ordering::Relaxed);
        let expected = c.expected.load(Ordering::Relaxed).max(1);
        Some(u8::try_from((read.saturating_mul(100) / expected).min(99)).unwrap_or(99))
    }

    /// Rows read by every settle so far: a waiter that sees it move knows the reads go on.
    pub fn total_read(&self) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |c| c.total_read.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_says_how_far_a_settle_read_and_never_100_before_its_end() {
        let g = SettleGauge::new();
        assert_eq!(g.percent(), None);
        g.start(200);
        assert_eq!(g.percent(), Some(0));
        g.read(50);
        assert_eq!(g.percent(), Some(25));
        g.read(500);
        assert_eq!(g.percent(), Some(99));
        g.finish();
        assert_eq!(g.percent(), None);
        g.start(10);
        g.read(4);
        assert_eq!(g.total_read(), 504);
        assert_eq!(SettleGauge::default().percent(), None);
    }
}
