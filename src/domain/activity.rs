//! Activities and their products, as the database holds them.

use super::{ActivityId, ProductId};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// The statuses an activity row may carry; the live / ended phase comes from its window.
pub const ACTIVITY_STATUSES: [&str; 3] = ["draft", "scheduled", "cancelled"];

/// What an activity row's `status` says (the live / ended phase comes from its window).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityStatus {
    Draft,
    Scheduled,
    Cancelled,
}

impl ActivityStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityStatus::Draft => "draft",
            ActivityStatus::Scheduled => "scheduled",
            ActivityStatus::Cancelled => "cancelled",
        }
    }

    /// The status a row or a file spells; None for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "draft" => ActivityStatus::Draft,
            "scheduled" => ActivityStatus::Scheduled,
            "cancelled" => ActivityStatus::Cancelled,
            _ => return None,
        })
    }
}

impl std::fmt::Display for ActivityStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One activity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Activity {
    pub activity_id: ActivityId,
    pub name: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub status: ActivityStatus,
}

/// Where an activity is in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Upcoming,
    Live,
    Ended,
    /// The row says `cancelled`: nothing of it is for sale, whatever its window says.
    Cancelled,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Upcoming => "upcoming",
            Phase::Live => "live",
            Phase::Ended => "ended",
            Phase::Cancelled => "cancelled",
        }
    }
}

impl Activity {
    pub fn phase(&self, now: DateTime<Utc>) -> Phase {
        if self.status == ActivityStatus::Cancelled {
            Phase::Cancelled
        } else if now < self.starts_at {
            Phase::Upcoming
        } else if now < self.ends_at {
            Phase::Live
        } else {
            Phase::Ended
        }
    }

    /// The sale window as `deduct.lua` enforces it (the meta hash's `opens` and `closes`).
    pub fn sale_window(&self) -> SaleWindow {
        // Held to what the scripts read as an integer (15 digits, from 1970 to the year
        // 33658): a window written "from -infinity to infinity" (PostgreSQL) sells always.
        let ms = |t: DateTime<Utc>| t.timestamp_millis().clamp(0, SaleWindow::LAST_MS);
        SaleWindow {
            opens_ms: ms(self.starts_at),
            closes_ms: ms(self.ends_at),
        }
    }

    /// The window in seconds (at least 1, so rates never divide by zero).
    pub fn window_secs(&self) -> i64 {
        (self.ends_at - self.starts_at).num_seconds().max(1)
    }

    /// When the activity's keys expire: `days` after it ends (ms since the epoch); None for 0
    /// (never), and None for an end so late that the expiry falls past the last instant chrono
    /// knows (a row written by hand).
    pub fn keys_expire_at(&self, days: u32) -> Option<i64> {
        if days == 0 {
            return None;
        }
        self.ends_at
            .checked_add_signed(chrono::Duration::days(i64::from(days)))
            .map(|at| at.timestamp_millis())
    }
}

/// When a product sells: `opens_ms <= Redis time < closes_ms`, ms since the epoch. Preheat
/// writes it into the meta hash (`opens`, `closes`) from the activity's window, and
/// `deduct.lua` answers -8 outside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SaleWindow {
    pub opens_ms: i64,
    pub closes_ms: i64,
}

impl SaleWindow {
    /// The latest instant a script reads (15 digits of ms, about the year 33658).
    pub const LAST_MS: i64 = 999_999_999_999_999;

    /// True when a deduction at `at_ms` (Redis time) falls outside the window.
    pub fn excludes(&self, at_ms: i64) -> bool {
        at_ms < self.opens_ms || at_ms >= self.closes_ms
    }
}

/// One product of an activity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Product {
    pub product_id: ProductId,
    pub name: String,
    pub initial_stock: i64,
    pub per_user_limit: i64,
    /// The operator's pause, as the database holds it (Redis holds a copy the deduction reads).
    pub pause: Pause,
    /// The activity's sale window, which every write of the product's meta hash carries; None
    /// where the product was not read with its activity (a file, a test): nothing writes or
    /// compares a window then.
    #[serde(skip)]
    pub window: Option<SaleWindow>,
}

/// A product's pause in the database: the operator's intent, written back to Redis by every
/// preheat and fix.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pause {
    pub paused: bool,
    pub reason: String,
    /// Counts every pause and resume; Redis keeps the newest of two written at once.
    pub generation: i64,
}

impl Product {
    /// A product as a file or a test names it: selling, never paused.
    pub fn new(product_id: ProductId, name: &str, initial_stock: i64, per_user_limit: i64) -> Self {
        Product {
            product_id,
            name: name.to_string(),
            initial_stock,
            per_user_limit,
            pause: Pause::default(),
            window: None,
        }
    }
}

/// An activity with its products, as imported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ActivityDef {
    pub activity: Activity,
    pub products: Vec<Product>,
    /// False when the file gave no status: a re-import keeps the one the database holds (a
    /// cancelled activity is not un-cancelled by re-importing its original file).
    pub status_given: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_sale_window_is_held_to_what_the_scripts_read() {
        let a = Activity {
            activity_id: ActivityId::parse("a").expect("valid"),
            name: String::new(),
            starts_at: DateTime::<Utc>::MIN_UTC,
            ends_at: DateTime::<Utc>::MAX_UTC,
            status: ActivityStatus::Scheduled,
        };
        let w = a.sale_window();
        assert_eq!((w.opens_ms, w.closes_ms), (0, SaleWindow::LAST_MS));
        assert_eq!(SaleWindow::LAST_MS.to_string().len(), 15);
        assert!(!w.excludes(Utc::now().timestamp_millis()));
        assert!(w.excludes(SaleWindow::LAST_MS) && !w.excludes(0));
    }

    #[test]
    fn phase_follows_the_window() {
        let t = |h| {
            Utc.with_ymd_and_hms(2026, 1, 1, h, 0, 0)
                .single()
                .expect("valid time")
        };
        let a = Activity {
            activity_id: ActivityId::parse("a").expect("valid"),
            name: String::new(),
            starts_at: t(10),
            ends_at: t(12),
            status: ActivityStatus::Scheduled,
        };
        assert_eq!(a.phase(t(9)), Phase::Upcoming);
        assert_eq!(a.phase(t(10)), Phase::Live);
        assert_eq!(a.phase(t(12)), Phase::Ended);
        assert_eq!(a.window_secs(), 7200);
        let cancelled = Activity {
            status: ActivityStatus::Cancelled,
            ..a
        };
        assert_eq!(cancelled.phase(t(11)), Phase::Cancelled);
    }

    #[test]
    fn keys_of_an_activity_ending_at_the_edge_of_time_never_expire() {
        let mut a = Activity {
            activity_id: ActivityId::parse("a").expect("valid"),
            name: String::new(),
            starts_at: DateTime::<Utc>::MIN_UTC,
            ends_at: Utc
                .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
                .single()
                .expect("time"),
            status: ActivityStatus::Scheduled,
        };
        assert_eq!(a.keys_expire_at(0), None);
        assert_eq!(
            a.keys_expire_at(1),
            Some(
                Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0)
                    .single()
                    .expect("time")
                    .timestamp_millis()
            )
        );
        a.ends_at = DateTime::<Utc>::MAX_UTC;
        assert_eq!(a.keys_expire_at(7), None);
    }
}
