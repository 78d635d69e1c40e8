//! Which screen is shown: the list of views, their keys and titles.

/// The screens. To add one: add a variant, list it in [`View::TABBED`] with a key in
/// [`View::key`], write `views/<name>.rs` with its component (state, rows, keys, render) and
/// add it to `views::Views`; the exhaustive matches below and in `views/mod.rs` then point at
/// everything else to decide.
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
    Events,
    Help,
}

impl View {
    /// The views reachable by a key, in the footer's order.
    pub const TABBED: [View; 10] = [
        View::Activities,
        View::Stock,
        View::Alerts,
        View::Compensation,
        View::Reconcile,
        View::Preheat,
        View::Redis,
        View::Audit,
        View::DryRun,
        View::Events,
    ];

    /// How many views there are (for per-view arrays).
    pub const COUNT: usize = 11;

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
            View::Events => 9,
            View::Help => 10,
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
            View::Events => '0',
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
            View::Events => "Events",
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
