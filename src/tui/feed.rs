//! What the pollers deliver and how the App keeps it: one poll's outcome ([`Fetched`]) and the
//! last good data with the last error ([`Feed`]), so a view shows old numbers marked stale
//! rather than nothing while a service is down.

use crate::error::Error;
use chrono::{DateTime, Utc};
use std::time::Instant;

/// One poll's outcome: when it arrived (the UI's clock, for "stale Ns"), when it was read
/// (the data's clock, for ages and rates) and the data or the error.
#[derive(Clone, Debug)]
pub struct Fetched<T> {
    /// When the runtime received it (monotonic; compared with [`Action::Tick`](super::action::Action::Tick)).
    pub at: Instant,
    /// When the data was read.
    pub taken_at: DateTime<Utc>,
    pub result: Result<T, Error>,
}

impl<T> Fetched<T> {
    /// A result stamped now.
    pub fn now(result: Result<T, Error>) -> Self {
        Fetched {
            at: Instant::now(),
            taken_at: Utc::now(),
            result,
        }
    }
}

/// The latest data of one poller: the last good data (kept while a service is down, so the
/// screen shows the old numbers marked stale rather than nothing) and the last error.
#[derive(Debug)]
pub struct Feed<T> {
    pub data: Option<T>,
    /// When the data was read.
    pub taken_at: Option<DateTime<Utc>>,
    /// When the last good data arrived (UI clock).
    pub received: Option<Instant>,
    /// The error of the last poll, when it failed (cleared by the next good one).
    pub error: Option<(Error, Instant)>,
}

impl<T> Default for Feed<T> {
    fn default() -> Self {
        Feed {
            data: None,
            taken_at: None,
            received: None,
            error: None,
        }
    }
}

impl<T> Feed<T> {
    /// Takes a poll's outcome.
    pub fn apply(&mut self, f: Fetched<T>) {
        match f.result {
            Ok(data) => {
                self.data = Some(data);
                self.taken_at = Some(f.taken_at);
                self.received = Some(f.at);
                self.error = None;
            }
            Err(e) => self.error = Some((e, f.at)),
        }
    }

    /// The error message of the last poll, if it failed.
    pub fn error_text(&self) -> Option<&str> {
        self.error.as_ref().map(|(e, _)| e.message.as_str())
    }
}

/// Per-activity figures for the Activities view, for activities other than the selected one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overview {
    pub activity: String,
    pub alerts: usize,
    /// Every product has its stock key in Redis.
    pub preheated: bool,
}
