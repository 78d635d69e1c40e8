//! The activity list as a view that stays open keeps it (the TUI's Activities view and its
//! overview): the activities' rows at every refresh, and their products' figures (how many, the
//! total stock) read again every [`TOTALS_EVERY`], and at once for an activity the last read did
//! not cover (one just imported). The list as `activity list` reads it sums every product of
//! every activity ever imported: at every refresh (1 Hz in the TUI) that work grew with
//! products that stood still, a finished sale's included.

use crate::db::Db;
use crate::db::activity::{self, ActivitySummary};
use crate::error::Result;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a view that stays open sums the products of every activity again. A top-up or an
/// import of more products into a listed activity shows in the list within this (the Stock
/// view shows it at once).
pub const TOTALS_EVERY: Duration = Duration::from_secs(30);

/// The activity list with the products' figures kept between refreshes.
#[derive(Debug)]
pub struct Listing {
    every: Duration,
    /// Per activity: its products and their total stock, as last summed.
    totals: HashMap<String, (i64, i64)>,
    /// When every activity was last summed.
    at: Option<Instant>,
}

impl Listing {
    pub fn new(every: Duration) -> Self {
        Listing {
            every,
            totals: HashMap::new(),
            at: None,
        }
    }

    /// Every activity, newest window first, with its products' figures (kept ones while they
    /// are younger than the period).
    pub async fn read(&mut self, db: &Db) -> Result<Vec<ActivitySummary>> {
        let activities = activity::rows(db).await?;
        if self.at.is_none_or(|t| t.elapsed() >= self.every) {
            self.totals = activity::totals(db, None).await?;
            self.at = Some(Instant::now());
        } else {
            let new: Vec<&str> = activities
                .iter()
                .map(|a| a.activity_id.as_str())
                .filter(|id| !self.totals.contains_key(*id))
                .collect();
            if !new.is_empty() {
                self.totals.extend(activity::totals(db, Some(&new)).await?);
            }
        }
        // An activity without products is covered too: it is not asked again until the period
        // ends.
        for a in &activities {
            self.totals
                .entry(a.activity_id.as_str().to_string())
                .or_insert((0, 0));
        }
        Ok(activity::summarize(activities, &self.totals))
    }
}
