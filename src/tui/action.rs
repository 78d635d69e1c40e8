//! What flows into `App::update` (Actions: keys, ticks, snapshots, results) and what flows out
//! of it (Commands for the runtime and the executor).

use super::feed::Fetched;
use super::feed::Overview;
use super::view::View;
use crate::db::activity::ActivitySummary;
use crate::db::audit::AuditEntry;
use crate::db::compensation::Compensation;
use crate::domain::ActivityId;
use crate::error::Error;
use crate::ops::compensation::ResolveReport;
use crate::ops::compensation::Which;
use crate::ops::fix::FixReport;
use crate::ops::health::RedisInfo;
use crate::ops::pause::PauseReport;
use crate::ops::preheat::PreheatReport;
use crate::ops::status::StatusReport;
use crate::ops::topup::TopupReport;
use crate::worker::{LiveSnapshot, RunStats, Strategy};
use crossterm::event::KeyEvent;
use std::time::Instant;

/// Everything that changes the App. Keys are mapped to the other variants by the current mode
/// (normal, filter input, dialog), so tests can feed either.
#[derive(Debug)]
pub enum Action {
    /// A key the operator pressed; mapped by the current mode.
    Key(KeyEvent),
    /// The terminal now has this many columns and rows.
    Resize(u16, u16),
    /// Time passed: data ages and "stale" are recomputed against this instant.
    Tick(Instant),
    /// The terminal input ended or failed: leave, saying why.
    InputClosed(String),
    /// Leave the TUI; asks first while a write is running.
    Quit,
    /// Leave the TUI now, without asking (Ctrl-C, SIGTERM, a confirmed quit).
    ForceQuit,
    /// Show this view.
    SwitchView(View),
    /// Show the next view in the footer's order.
    NextView,
    /// Show the previous view in the footer's order.
    PrevView,
    /// Move the selection of the current table by this many rows (negative: up).
    Move(isize),
    /// Scroll the current table's columns by this many (negative: back to the left).
    ScrollColumns(isize),
    /// Select the first row of the current table.
    Top,
    /// Select the last row of the current table.
    Bottom,
    /// Open the filter input of the current table.
    StartFilter,
    /// Type a character into the open input (filter or typed confirmation).
    Input(char),
    /// A key no binding has, outside an input: said on the status line, nothing else.
    Unknown(char),
    /// Delete the last character of the open input.
    Backspace,
    /// Enter: keep the filter, confirm a typed dialog, select the highlighted activity.
    Enter,
    /// Esc: close the dialog or the filter input (clearing the filter), or leave Help.
    Cancel,
    /// `q` or space on a result: closes it, unless it opened a moment ago (a `q` typed while
    /// the write ran, meant to quit, would close the result unread).
    Dismiss,
    /// Confirm the open yes/no dialog.
    Confirm,
    /// Cycle the sort column of the stock table.
    CycleSort,
    /// Reverse the sort direction of the stock table.
    ReverseSort,
    /// How many orders each live activity wrote in the last minute: the first screen opens the
    /// busiest.
    Busiest(Result<std::collections::HashMap<String, i64>, Error>),
    /// Switch the bell on a newly raised critical alert on or off.
    ToggleBell,
    /// Enter or → on a table row: what is behind it (a product's detail, a row's whole text).
    OpenDetail,
    /// Make this activity the one every view shows.
    SelectActivity(ActivityId),
    /// Fix the highlighted product: preview first, then a yes/no dialog.
    FixProduct,
    /// Fix the whole activity: preview first, then the operator types the activity id.
    FixActivity,
    /// Pause (or resume, when paused) the highlighted product, or with `all` every product of
    /// the activity, after a dialog.
    TogglePause { all: bool },
    /// Resume every paused product of the activity, after a dialog.
    ResumeAll,
    /// Open the top-up form for the highlighted product.
    OpenTopupForm,
    /// Write the incident report of the activity to a Markdown file.
    WriteReport,
    /// Where the report went, or why it did not.
    ReportWritten { result: Result<String, Error> },
    /// Resolve the highlighted compensation entry, after a yes/no dialog.
    ResolveSelected,
    /// Resolve every pending compensation entry, after a yes/no dialog.
    ResolveAll,
    /// Run the preheat gate after a dialog; `force` overwrites conflicting keys and asks for
    /// the activity id.
    Preheat { force: bool },
    /// Open the dry-run form (buyers, concurrency, strategy) on the Dry run view.
    OpenDryRunForm,
    /// Move the focus of the dry-run form by this many fields (negative: up).
    FormField(isize),
    /// Pick the strategy this many steps away in the dry-run form (negative: to the left).
    FormChoice(isize),
    /// Stop the running dry run; it still checks what it did and removes its shadow keys.
    StopDryRun,
    /// The activities list from its poller.
    Activities(Fetched<Vec<ActivitySummary>>),
    /// Alert counts and preheat state of the other activities.
    Overview(Fetched<Vec<Overview>>),
    /// A status snapshot of an activity.
    Status(ActivityId, Fetched<StatusReport>),
    /// The status poll of an activity is settling books from scratch beside the polls: about
    /// this share read so far (the last snapshot stays on screen meanwhile).
    Settling(ActivityId, u8),
    /// The compensation queue of an activity.
    Compensation(ActivityId, Fetched<Vec<Compensation>>),
    /// The console's own recent writes.
    Audit(Fetched<Vec<AuditEntry>>),
    /// Redis nodes, roles, scripts, ops/s, memory and slowlogs.
    Redis(Fetched<RedisInfo>),
    /// The preview of a fix requested with sequence number `seq`.
    FixPreviewed {
        seq: u64,
        result: Result<FixReport, Error>,
    },
    /// The outcome of an applied fix.
    FixApplied {
        seq: u64,
        result: Result<FixReport, Error>,
    },
    /// Progress of a running preheat.
    PreheatProgress {
        seq: u64,
        stage: String,
        done: usize,
        total: usize,
    },
    /// The go / no-go report of a preheat.
    PreheatDone {
        seq: u64,
        result: Result<PreheatReport, Error>,
    },
    /// The outcome of resolving compensation entries.
    /// What a top-up did.
    TopupDone {
        seq: u64,
        result: Result<TopupReport, Error>,
    },
    /// What a pause or resume did.
    PauseDone {
        seq: u64,
        result: Result<PauseReport, Error>,
    },
    Resolved {
        seq: u64,
        result: Result<ResolveReport, Error>,
    },
    /// A product's detail, read for the row the operator opened.
    DetailRead {
        seq: u64,
        result: Result<Box<crate::ops::detail::ProductDetail>, Error>,
    },
    /// The pending entries counted for "resolve every pending entry": how many, and the newest
    /// one's id (the bound of what the operator confirms).
    PendingCounted {
        seq: u64,
        result: Result<(i64, Option<i64>), Error>,
    },
    /// The live figures of the strategy a dry run is running, about once a second.
    DryRunProgress {
        seq: u64,
        strategy: Strategy,
        /// Seconds since the dry run started (the executor's clock, so the chart's time axis
        /// does not depend on when the loop got round to the Action).
        elapsed_secs: f64,
        snapshot: LiveSnapshot,
    },
    /// One strategy of a dry run has finished: its figures and invariants.
    DryRunStrategyDone { seq: u64, stats: Box<RunStats> },
    /// A dry run has ended: every strategy ran (or it was stopped), or the error that ended it.
    DryRunDone { seq: u64, result: Result<(), Error> },
}

/// What `update` asks the runtime to do; everything that touches the network runs in a
/// background task and answers with an Action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Point the pollers of the selected activity (status, compensation) at this activity.
    Watch(ActivityId),
    /// Poll everything now (after a write).
    RefreshNow,
    /// Compute a fix without writing (`preview`), for the confirmation dialog.
    PreviewFix {
        seq: u64,
        activity: ActivityId,
        product: Option<String>,
    },
    /// Apply a fix the operator confirmed: exactly the products of the preview, each only
    /// while it still shows what the preview showed (None: what a fresh read finds).
    ApplyFix {
        seq: u64,
        activity: ActivityId,
        product: Option<String>,
        confirmed: Option<crate::ops::fix::Confirmation>,
    },
    /// Run the preheat gate the operator confirmed.
    RunPreheat {
        seq: u64,
        activity: ActivityId,
        force: bool,
    },
    /// Write the incident report of the activity to a file in the working directory.
    WriteReport { activity: ActivityId },
    /// Top up what the operator confirmed.
    RunTopup {
        seq: u64,
        activity: ActivityId,
        product: String,
        add: i64,
        /// Why, for the audit trail (empty: "from the TUI").
        reason: String,
    },
    /// Pause or resume what the operator confirmed (None: every product of the activity).
    SetPaused {
        seq: u64,
        activity: ActivityId,
        product: Option<String>,
        pause: bool,
        reason: String,
    },
    /// Count the last minute's orders of these live activities (the first screen's choice).
    CountRecentSales(Vec<ActivityId>),
    /// Ring the terminal's bell (a critical alert was raised).
    Bell,
    /// Read one product's detail (keys, events, orders, writes).
    ReadDetail {
        seq: u64,
        activity: ActivityId,
        product: String,
    },
    /// Count the pending compensation entries, for the confirmation of resolving them all.
    CountPending { seq: u64, activity: ActivityId },
    /// Resolve compensation entries the operator confirmed.
    ResolveCompensation {
        seq: u64,
        activity: ActivityId,
        which: Which,
    },
    /// Start the dry run the operator confirmed: each strategy in turn on its shadow copy.
    StartDryRun {
        seq: u64,
        activity: ActivityId,
        buyers: usize,
        concurrency: usize,
        strategies: Vec<Strategy>,
    },
    /// Set the stop flag of the dry run `seq`.
    StopDryRun { seq: u64 },
}

impl Command {
    /// True for commands that write (refused in read-only mode before they are ever emitted).
    /// A dry run counts: it writes shadow keys, even if never live ones.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Command::ApplyFix { .. }
                | Command::RunPreheat { .. }
                | Command::ResolveCompensation { .. }
                | Command::SetPaused { .. }
                | Command::RunTopup { .. }
                | Command::StartDryRun { .. }
        )
    }
}
