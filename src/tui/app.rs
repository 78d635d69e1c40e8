//! The App: every piece of state the views draw. Changed only by `update` (update.rs) and the
//! snapshot handlers (data.rs); read by the views. No I/O here.

use super::action::{Fetched, Overview, RedisInfo, ResolveWhich};
use crate::config::Config;
use crate::db::activity::ActivitySummary;
use crate::db::audit::AuditEntry;
use crate::db::compensation::Compensation;
use crate::domain::ActivityId;
use crate::domain::alerts::AlertKind;
use crate::error::Error;
use crate::ops::preheat::PreheatReport;
use crate::ops::status::StatusReport;
use crate::worker::{LiveSnapshot, RunStats, Strategy};
use chrono::{DateTime, Utc};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The screens. To add one: add a variant, list it in
/// [`View::TABBED`] with a key in [`View::key`], write `views/<name>.rs` and add its arm in
/// `views::render`; the exhaustive matches below then point at everything else to decide
/// (title, whether it has a table, its footer keys in `widgets::footer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum View {
    Activities,
    Stock,
    Alerts,
    Compensation,
    Reconcile,
    Preheat,
    Redis,
    Audit,
    DryRun,
    Help,
}

impl View {
    /// The views reachable by a key, in the footer's order.
    pub const TABBED: [View; 9] = [
        View::Activities,
        View::Stock,
        View::Alerts,
        View::Compensation,
        View::Reconcile,
        View::Preheat,
        View::Redis,
        View::Audit,
        View::DryRun,
    ];

    /// How many views there are (for per-view arrays).
    pub const COUNT: usize = 10;

    /// The position of this view in per-view arrays.
    pub fn index(self) -> usize {
        match self {
            View::Activities => 0,
            View::Stock => 1,
            View::Alerts => 2,
            View::Compensation => 3,
            View::Reconcile => 4,
            View::Preheat => 5,
            View::Redis => 6,
            View::Audit => 7,
            View::DryRun => 8,
            View::Help => 9,
        }
    }

    /// The key that shows this view.
    pub fn key(self) -> char {
        match self {
            View::Activities => '1',
            View::Stock => '2',
            View::Alerts => '3',
            View::Compensation => '4',
            View::Reconcile => '5',
            View::Preheat => '6',
            View::Redis => '7',
            View::Audit => '8',
            View::DryRun => '9',
            View::Help => '?',
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            View::Activities => "Activities",
            View::Stock => "Stock",
            View::Alerts => "Alerts",
            View::Compensation => "Compensation",
            View::Reconcile => "Reconcile",
            View::Preheat => "Preheat",
            View::Redis => "Redis",
            View::Audit => "Audit",
            View::DryRun => "Dry run",
            View::Help => "Help",
        }
    }

    /// Views whose main table can be moved through and filtered (the Dry run view's results
    /// are at most four rows, and its keys edit a form instead).
    pub fn has_table(self) -> bool {
        !matches!(self, View::Help | View::DryRun)
    }

    /// The view for a key, if any.
    pub fn for_key(c: char) -> Option<View> {
        View::TABBED.into_iter().find(|v| v.key() == c)
    }
}

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
        }
    }

    /// Data older than this is stale: two polls missed, plus a second of slack.
    pub fn stale_after(&self) -> Duration {
        self.refresh * 2 + Duration::from_secs(1)
    }
}

/// Selection, scroll position and filter of one table.
#[derive(Debug, Default)]
pub struct TableCursor {
    pub selected: usize,
    /// The first visible row. Rendering keeps the selection in view and remembers where it
    /// scrolled to (a `Cell`, so views stay functions of `&App`, like ratatui's TableState).
    pub offset: Cell<usize>,
    pub filter: String,
}

impl TableCursor {
    /// The first row to draw so that `selected` is visible in `height` rows, scrolling as
    /// little as possible from the last frame.
    pub fn window(&self, len: usize, height: usize) -> usize {
        if height == 0 || len == 0 {
            self.offset.set(0);
            return 0;
        }
        let selected = self.selected.min(len - 1);
        let mut offset = self.offset.get().min(len.saturating_sub(height));
        if selected < offset {
            offset = selected;
        } else if selected >= offset + height {
            offset = selected + 1 - height;
        }
        self.offset.set(offset);
        offset
    }
}

/// Sort columns of the stock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Product,
    Remaining,
    SoldPercent,
    Drift,
    State,
    Rate,
}

impl SortKey {
    pub const ALL: [SortKey; 6] = [
        SortKey::Product,
        SortKey::Remaining,
        SortKey::SoldPercent,
        SortKey::Drift,
        SortKey::State,
        SortKey::Rate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SortKey::Product => "product",
            SortKey::Remaining => "redis",
            SortKey::SoldPercent => "sold%",
            SortKey::Drift => "drift",
            SortKey::State => "state",
            SortKey::Rate => "rate",
        }
    }

    pub fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }
}

/// A write the operator has been asked to confirm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingWrite {
    Fix {
        activity: ActivityId,
        product: Option<String>,
    },
    Preheat {
        activity: ActivityId,
        force: bool,
    },
    Resolve {
        activity: ActivityId,
        which: ResolveWhich,
    },
    /// A live top-up of one product.
    Topup {
        activity: ActivityId,
        product: String,
        add: i64,
    },
    /// Pause or resume one product, or every product (None) of the activity.
    Pause {
        activity: ActivityId,
        product: Option<String>,
        pause: bool,
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
    /// The dry-run form (its values live in [`App::dry_run_form`], so they are kept between
    /// runs): Enter goes on to the confirmation, Esc closes it.
    DryRunForm,
    /// The units to add to (or, negative, take from) the highlighted product: Enter goes on to
    /// the confirmation, Esc closes it.
    TopupForm {
        activity: ActivityId,
        product: String,
        input: String,
        error: Option<String>,
    },
    /// A result or an error to read; any of Esc, Enter, q closes it.
    Message {
        title: String,
        lines: Vec<String>,
        error: bool,
    },
}

/// A one-line message in the footer (a refusal, a result), shown for a while.
#[derive(Clone, Debug)]
pub struct Flash {
    pub text: String,
    pub error: bool,
    pub at: Instant,
}

/// How long a flash message stays.
pub const FLASH_FOR: Duration = Duration::from_secs(8);

/// A write running in the background.
#[derive(Clone, Debug)]
pub struct Busy {
    pub seq: u64,
    pub what: String,
    pub since: Instant,
}

/// A preheat in progress.
#[derive(Clone, Debug)]
pub struct PreheatRun {
    pub seq: u64,
    pub activity: ActivityId,
    pub force: bool,
    pub stage: String,
    pub done: usize,
    pub total: usize,
}

/// What a dry run compares: one strategy, or all four side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyChoice {
    One(Strategy),
    All,
}

impl StrategyChoice {
    /// The choices in the form's order.
    pub const CHOICES: [StrategyChoice; 5] = [
        StrategyChoice::One(Strategy::Lua),
        StrategyChoice::One(Strategy::Hincrby),
        StrategyChoice::One(Strategy::Lock),
        StrategyChoice::One(Strategy::Sql),
        StrategyChoice::All,
    ];

    /// The name, as `dry-run --strategy` spells it.
    pub fn name(self) -> &'static str {
        match self {
            StrategyChoice::One(s) => s.as_str(),
            StrategyChoice::All => "all",
        }
    }

    /// The strategies run, in order.
    pub fn strategies(self) -> Vec<Strategy> {
        match self {
            StrategyChoice::One(s) => vec![s],
            StrategyChoice::All => Strategy::ALL.to_vec(),
        }
    }

    /// The choice `n` steps away in [`Self::CHOICES`], wrapping around.
    pub fn step(self, n: isize) -> StrategyChoice {
        let len = Self::CHOICES.len() as isize;
        let i = Self::CHOICES.iter().position(|c| *c == self).unwrap_or(0) as isize;
        Self::CHOICES[(i + n).rem_euclid(len) as usize]
    }
}

/// A field of the dry-run form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormField {
    Buyers,
    Concurrency,
    Strategy,
}

impl FormField {
    pub const ALL: [FormField; 3] = [
        FormField::Buyers,
        FormField::Concurrency,
        FormField::Strategy,
    ];

    /// The field `n` steps away, wrapping around.
    pub fn step(self, n: isize) -> FormField {
        let len = Self::ALL.len() as isize;
        let i = Self::ALL.iter().position(|f| *f == self).unwrap_or(0) as isize;
        Self::ALL[(i + n).rem_euclid(len) as usize]
    }
}

/// The dry-run form as typed (numbers stay text until Enter, so a half-typed value is shown
/// as it is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRunForm {
    pub buyers: String,
    pub concurrency: String,
    pub strategy: StrategyChoice,
    pub field: FormField,
    /// Why the last Enter was refused.
    pub error: Option<String>,
}

impl Default for DryRunForm {
    fn default() -> Self {
        DryRunForm {
            buyers: "1000".into(),
            concurrency: "50".into(),
            strategy: StrategyChoice::One(Strategy::Lua),
            field: FormField::Buyers,
            error: None,
        }
    }
}

/// Throughput points kept per strategy (an hour at one a second).
pub const THROUGHPUT_POINTS: usize = 3600;

/// A dry run started from the Dry run view: running, or done with its results (kept until the
/// next one starts).
#[derive(Debug)]
pub struct DryRun {
    pub seq: u64,
    pub activity: ActivityId,
    pub buyers: usize,
    pub concurrency: usize,
    pub strategies: Vec<Strategy>,
    /// When it started (UI clock).
    pub started: Instant,
    /// The strategy running now and its latest live figures.
    pub current: Option<(Strategy, LiveSnapshot)>,
    /// Ops/s over time per strategy: (seconds since the run started, ops/s).
    pub throughput: Vec<(Strategy, Vec<(f64, f64)>)>,
    /// Seconds since the start at the latest progress report.
    pub elapsed_secs: f64,
    /// The figures of each strategy that has finished, in run order.
    pub results: Vec<RunStats>,
    /// The operator asked it to stop while the strategy at this index of `strategies` ran.
    pub stopped_at: Option<usize>,
    /// When the executor reported its end (UI clock); `None` while it runs.
    pub finished: Option<Instant>,
    /// Why it ended early, if it failed.
    pub error: Option<Error>,
}

impl DryRun {
    pub fn running(&self) -> bool {
        self.finished.is_none()
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

/// The status of the selected activity, with what the UI derives from successive snapshots.
#[derive(Debug, Default)]
pub struct StockData {
    pub feed: Feed<StatusReport>,
    /// Units per second per product, from the last two snapshots.
    pub rates: HashMap<String, f64>,
    /// The activity's units per second, oldest first, for the sparkline.
    pub rate_history: VecDeque<f64>,
    /// Sold units per product at the previous snapshot.
    pub prev_sold: Option<(DateTime<Utc>, HashMap<String, i64>)>,
    /// When each alert was first seen (the alerts carry no time of their own).
    pub alert_seen: HashMap<AlertKey, DateTime<Utc>>,
    /// Indices into the report's products in the stock table's order (filter and sort
    /// applied); kept here so a frame of 10,000 products sorts nothing.
    pub order: Vec<usize>,
}

impl StockData {
    pub fn report(&self) -> Option<&StatusReport> {
        self.feed.data.as_ref()
    }
}

/// Identifies an alert across snapshots.
pub type AlertKey = (AlertKind, Option<String>, Option<String>);

/// Points kept for the sales-rate sparkline.
pub const RATE_HISTORY: usize = 240;

/// The whole state of the UI.
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
    pub activities: Feed<Vec<ActivitySummary>>,
    /// Alert counts and preheat state of activities other than the selected one.
    pub overview: Feed<Vec<Overview>>,
    pub stock: StockData,
    pub compensation: Feed<Vec<Compensation>>,
    pub audit: Feed<Vec<AuditEntry>>,
    pub redis: Feed<RedisInfo>,

    pub cursors: [TableCursor; View::COUNT],
    pub filtering: bool,
    pub sort: SortKey,
    pub sort_descending: bool,
    pub dialog: Option<Dialog>,
    pub flash: Option<Flash>,
    pub busy: Option<Busy>,
    pub preheat_run: Option<PreheatRun>,
    pub preheat_report: Option<(ActivityId, Result<PreheatReport, Error>)>,
    /// The dry-run form's values, kept between runs.
    pub dry_run_form: DryRunForm,
    /// The running or the last dry run.
    pub dry_run: Option<DryRun>,
    pub next_seq: u64,
}

impl App {
    /// A fresh App; `activity` is shown first when given.
    pub fn new(config: AppConfig, activity: Option<ActivityId>, now: Instant) -> Self {
        let cursors = std::array::from_fn(|_| TableCursor::default());
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
            overview: Feed::default(),
            stock: StockData::default(),
            compensation: Feed::default(),
            audit: Feed::default(),
            redis: Feed::default(),
            cursors,
            filtering: false,
            sort: SortKey::Product,
            sort_descending: false,
            dialog: None,
            flash: None,
            busy: None,
            preheat_run: None,
            preheat_report: None,
            dry_run_form: DryRunForm::default(),
            dry_run: None,
            next_seq: 1,
        }
    }

    /// The cursor of a view's table.
    pub fn cursor(&self, view: View) -> &TableCursor {
        &self.cursors[view.index()]
    }

    pub fn cursor_mut(&mut self, view: View) -> &mut TableCursor {
        &mut self.cursors[view.index()]
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
