//! The App: the state the views share, with each view's component in [`App::views`]. Changed
//! only by `update` (update.rs) and the snapshot handlers (data.rs); read by the views. No I/O
//! here.

use super::cursor::TableCursor;
use super::feed::Feed;
use super::selected::StockData;
use super::view::View;
use super::views::Views;
use super::views::dry_run::StrategyChoice;
use crate::config::Config;
use crate::db::activity::ActivitySummary;
use crate::domain::ActivityId;
use crate::ops::compensation::Which;
use crate::ops::health::RedisInfo;
use std::time::{Duration, Instant};

/// The parts of the configuration the UI shows or needs; built from [`Config`] so that
/// passwords never reach the App (the labels are redacted).
#[derive(Clone, Debug)]
pub struct AppConfig {
    pub read_only: bool,
    pub refresh: Duration,
    pub redis_label: String,
    pub db_label: String,
    /// The live key prefix, named when a dry run asks for confirmation (its shadow keys are
    /// `<prefix>-dry-...`).
    pub key_prefix: String,
    /// Where times are shown (the header names it).
    pub tz: crate::domain::zone::Zone,
    /// Draw in ASCII only (a terminal without Unicode: see `widgets::ascii`).
    pub ascii: bool,
}

impl AppConfig {
    pub fn from_config(c: &Config) -> Self {
        AppConfig {
            read_only: c.read_only,
            refresh: c.refresh,
            redis_label: c.redis.label(),
            db_label: c.db.redacted().to_string(),
            key_prefix: c.keys.prefix().to_string(),
            tz: c.tz,
            ascii: super::widgets::ascii::from_env(),
        }
    }

    /// Data older than this is stale: two polls missed, plus a second of slack.
    pub fn stale_after(&self) -> Duration {
        self.refresh * 2 + Duration::from_secs(1)
    }
}

/// A write the operator has been asked to confirm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingWrite {
    /// A fix; once previewed, what the operator saw of each product (the fix then applies
    /// exactly those, each only while it still shows that).
    Fix {
        activity: ActivityId,
        product: Option<String>,
        confirmed: Option<crate::ops::fix::Confirmation>,
    },
    Preheat {
        activity: ActivityId,
        force: bool,
    },
    Resolve {
        activity: ActivityId,
        which: Which,
    },
    /// A live top-up of one product.
    Topup {
        activity: ActivityId,
        product: String,
        add: i64,
        /// Why, for the audit trail (empty: "from the TUI").
        reason: String,
    },
    /// Pause or resume one product, or every product (None) of the activity.
    Pause {
        activity: ActivityId,
        product: Option<String>,
        pause: bool,
        reason: String,
    },
    /// A dry run: shadow keys and a temporary database, never the live ones.
    DryRun {
        activity: ActivityId,
        buyers: usize,
        concurrency: usize,
        strategy: StrategyChoice,
    },
    /// Leaving while a write or a dry run runs.
    Quit,
}

/// A confirmation: yes/no, or (when `typed` is set) the operator types that text and Enter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confirm {
    pub title: String,
    pub lines: Vec<String>,
    pub write: PendingWrite,
    pub typed: Option<String>,
    pub input: String,
    /// Set after an Enter with the wrong text.
    pub mismatch: bool,
    /// The first line of `lines` shown (they scroll when they do not fit).
    pub scroll: usize,
    /// The operator has had the last line on screen: a confirmation that does not fit counts
    /// only once it has been read to its end.
    pub seen_end: bool,
    /// Why the last confirming key did nothing, shown in the dialog itself (a tall dialog
    /// covers the footer's message line).
    pub note: Option<String>,
    /// The reason typed for the audit trail, for a write that records one (pause, top-up).
    pub reason: Option<String>,
    /// Keys type the reason (else the typed confirmation, when there is one; Tab switches).
    pub reason_focus: bool,
}

impl Confirm {
    /// A yes/no confirmation: Enter confirms.
    pub fn ask(title: impl Into<String>, lines: Vec<String>, write: PendingWrite) -> Self {
        Confirm {
            title: title.into(),
            lines,
            write,
            typed: None,
            input: String::new(),
            mismatch: false,
            scroll: 0,
            seen_end: false,
            note: None,
            reason: None,
            reason_focus: false,
        }
    }

    /// The same confirmation with a reason field (optional: empty is "from the TUI"), focused
    /// unless a typed confirmation comes first.
    pub fn with_reason(self) -> Self {
        Confirm {
            reason_focus: self.typed.is_none(),
            reason: Some(String::new()),
            ..self
        }
    }

    /// Whether a typed key goes to the reason.
    pub fn types_reason(&self) -> bool {
        self.reason.is_some() && (self.typed.is_none() || self.reason_focus)
    }

    /// The write to run, with the reason typed.
    pub fn write(&self) -> PendingWrite {
        let typed = self.reason.as_deref().map(str::trim).unwrap_or_default();
        let mut write = self.write.clone();
        if let PendingWrite::Topup { reason, .. } | PendingWrite::Pause { reason, .. } = &mut write
        {
            *reason = typed.to_string();
        }
        write
    }

    /// A confirmation the operator answers by typing `expected` (an activity id) and Enter.
    pub fn typed(
        title: impl Into<String>,
        lines: Vec<String>,
        write: PendingWrite,
        expected: Option<String>,
    ) -> Self {
        Confirm {
            typed: expected,
            ..Confirm::ask(title, lines, write)
        }
    }
}

/// The modal on top of the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dialog {
    /// Waiting for a background result (a preview, a write); Esc closes it, the work goes on.
    Working {
        title: String,
        detail: String,
        seq: u64,
        since: Instant,
        /// For a preview: the write the operator confirms once it arrives.
        then: Option<PendingWrite>,
    },
    Confirm(Confirm),
    /// The dry-run form (its values live in the Dry run view's component, so they are kept
    /// between runs): Enter goes on to the confirmation, Esc closes it.
    DryRunForm,
    /// The units to add to (or, negative, take from) the highlighted product: Enter goes on to
    /// the confirmation, Esc closes it.
    TopupForm {
        activity: ActivityId,
        product: String,
        input: String,
        error: Option<String>,
        /// The keystroke refused last, shown after the input until Backspace takes it back:
        /// meanwhile nothing more is typed and Enter goes nowhere (the digits typed after a
        /// refused `.` made `1.5` read 15).
        refused: Option<char>,
    },
    /// A result, an error or a row's whole text to read; any of Esc, Enter, q closes it (q and
    /// space only once it has been on screen a moment), the arrows scroll it.
    Message {
        title: String,
        lines: Vec<String>,
        error: bool,
        /// The first line shown.
        scroll: usize,
    },
}

/// A one-line message in the footer (a refusal, a result), shown for a while.
#[derive(Clone, Debug)]
pub struct Flash {
    pub text: String,
    pub error: bool,
    pub at: Instant,
}

/// How long a confirmation dialog ignores its confirming key after it opens.
pub const CONFIRM_AFTER: Duration = Duration::from_millis(400);

/// How long a flash message stays.
pub const FLASH_FOR: Duration = Duration::from_secs(8);

/// A write running in the background.
#[derive(Clone, Debug)]
pub struct Busy {
    pub seq: u64,
    pub what: String,
    pub since: Instant,
}

/// The whole state of the UI: what several views share. Each view's own state (its cursor,
/// its rows' order, its form) lives in its component, in [`App::views`].
#[derive(Debug)]
pub struct App {
    pub config: AppConfig,
    pub view: View,
    /// The view to go back to when Help closes.
    pub back_to: View,
    /// The UI's clock: the last Tick (or snapshot) instant.
    pub now: Instant,
    pub should_quit: bool,
    /// Why the UI left on its own (the input failed), printed after the terminal is restored.
    pub exit_error: Option<String>,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// Columns and rows of the terminal (for page moves).
    pub size: (u16, u16),

    /// The activity every view shows.
    pub activity: Option<ActivityId>,
    /// Every activity (the Activities view, the header's database link, the window shown).
    pub activities: Feed<Vec<ActivitySummary>>,
    /// The selected activity's status (Stock, Alerts, Reconcile, the footer's counts).
    pub stock: StockData,
    /// Every Redis node (the Redis view and the header's Redis link).
    pub redis: Feed<RedisInfo>,
    /// Each view's own state.
    pub views: Views,

    /// The filter input of the current view's table is open.
    pub filtering: bool,
    pub dialog: Option<Dialog>,
    pub flash: Option<Flash>,
    /// When the open confirmation dialog opened: Enter within [`CONFIRM_AFTER`] of it is
    /// ignored (typed ahead, before the dialog could be read).
    pub dialog_at: Instant,
    pub busy: Option<Busy>,
    pub next_seq: u64,
    /// Ring the terminal's bell when a snapshot raises a critical alert (`b` switches it).
    pub bell: bool,
    /// The first screen's choice among several live activities is being asked for.
    pub picking: bool,
    /// When the selected activity was chosen (how long its first snapshot has been awaited).
    pub watch_since: Instant,
    /// The sales-rate history of each activity shown before, kept for when it is shown again.
    pub rate_histories: std::collections::HashMap<String, (std::collections::VecDeque<f64>, f64)>,
}

impl App {
    /// A fresh App; `activity` is shown first when given.
    pub fn new(config: AppConfig, activity: Option<ActivityId>, now: Instant) -> Self {
        App {
            config,
            view: View::Stock,
            back_to: View::Stock,
            now,
            should_quit: false,
            exit_error: None,
            dirty: true,
            size: (0, 0),
            activity,
            activities: Feed::default(),
            stock: StockData::default(),
            redis: Feed::default(),
            views: Views::default(),
            filtering: false,
            dialog: None,
            flash: None,
            dialog_at: now,
            busy: None,
            next_seq: 1,
            bell: true,
            picking: false,
            watch_since: now,
            rate_histories: Default::default(),
        }
    }

    /// The cursor of a view's table.
    pub fn cursor(&self, view: View) -> &TableCursor {
        self.views.cursor(view)
    }

    pub fn cursor_mut(&mut self, view: View) -> &mut TableCursor {
        self.views.cursor_mut(view)
    }

    /// The filter of a view's table ("" when none).
    pub fn filter(&self, view: View) -> &str {
        &self.cursor(view).filter
    }

    /// The age of the stock data shown, against the UI clock.
    pub fn data_age(&self) -> Option<Duration> {
        self.stock
            .feed
            .received
            .map(|at| self.now.saturating_duration_since(at))
    }

    /// True when the stock data shown is older than the stale threshold (or there is none
    /// while an activity is selected and a poll has failed).
    pub fn is_stale(&self) -> bool {
        match self.data_age() {
            Some(age) => age > self.config.stale_after(),
            None => self.stock.feed.error.is_some(),
        }
    }

    /// A new sequence number for a background request.
    pub fn seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// Shows a message in the footer.
    pub fn flash(&mut self, text: impl Into<String>, error: bool) {
        self.flash = Some(Flash {
            text: text.into(),
            error,
            at: self.now,
        });
    }

    /// The summary of the selected activity, if the list has it.
    pub fn selected_summary(&self) -> Option<&ActivitySummary> {
        let id = self.activity.as_ref()?;
        self.activities
            .data
            .as_ref()?
            .iter()
            .find(|a| a.activity.activity_id == *id)
    }
}
