//! The dry-run flow of `update`: the form (buyers, concurrency, strategy), the confirmation,
//! the start, the live figures, the stop and the results. A dry run writes shadow keys only,
//! yet it is refused in read-only mode like every write: the session promised to write
//! nothing.

use super::action::Command;
use super::app::{App, Confirm, Dialog, PendingWrite};
use super::view::View;
use super::views::dry_run::{DryRun, FormField, StrategyChoice, THROUGHPUT_POINTS};
use crate::domain::{ActivityId, Phase};
use crate::error::Error;
use crate::worker::{LiveSnapshot, RunStats, Strategy};

/// Buyers of a dry run started here. Lower than the command's 100,000,000: the invariant check
/// holds every buyer's clicks in memory (about 100 bytes each), and an operator's console must
/// not be the process that runs out of memory during a sale.
pub const MAX_BUYERS: usize = 1_000_000;
/// The bound of `dry-run --concurrency` (the command checks the same).
pub const MAX_CONCURRENCY: usize = 10_000;
/// Digits kept in a number field: enough for the largest allowed value and one more, so that
/// a too-large value is shown and refused rather than silently cut.
const MAX_DIGITS: usize = 10;

/// The failing invariant a stopped run fails by construction: it sent less than the demand.
pub fn only_incomplete(stats: &RunStats) -> bool {
    stats
        .invariants
        .iter()
        .filter(|i| !i.ok)
        .all(|i| i.name.starts_with("sold ="))
}

impl DryRun {
    /// How the strategy at `index` of the results came out: "ok", "FAILED", or "stopped" for
    /// the one the operator cut short when its only failure is having sold less than the
    /// whole demand would have (every other invariant still holds for what it did).
    pub fn verdict(&self, index: usize) -> &'static str {
        match self.results.get(index) {
            Some(s) if s.ok => "ok",
            Some(s) if self.stopped_at == Some(index) && only_incomplete(s) => "stopped",
            Some(_) => "FAILED",
            None => "-",
        }
    }
}

fn parse_number(what: &str, text: &str, max: usize) -> Result<usize, String> {
    if text.is_empty() {
        return Err(format!("{what} is empty: type a number from 1 to {max}"));
    }
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{what} '{text}' is out of range: use 1 to {max}")),
    }
}

impl App {
    /// `d` on the Dry run view: the form, unless read-only, already running or no activity.
    pub(super) fn open_dry_run_form(&mut self) {
        if self.view != View::DryRun {
            self.flash("dry run: press d on the Dry run view (9)", false);
            return;
        }
        if !self.may_dry_run() {
            return;
        }
        if self.need_activity().is_none() {
            return;
        }
        self.views.dry_run.form.error = None;
        self.views.dry_run.form.field = FormField::Buyers;
        self.dialog = Some(Dialog::DryRunForm);
    }

    /// Read-only mode refuses it; so does a dry run that still runs (one at a time: two would
    /// share the Redis and distort each other's figures). A running fix or preheat does not:
    /// the dry run touches none of their keys.
    fn may_dry_run(&mut self) -> bool {
        if self.config.read_only {
            self.flash(
                "read-only mode: dry run refused (it writes shadow keys; the console was started with --read-only)",
                true,
            );
            return false;
        }
        if self.views.dry_run.run.as_ref().is_some_and(DryRun::running) {
            self.flash("a dry run is already running: x stops it", true);
            return false;
        }
        true
    }

    pub(super) fn form_input(&mut self, c: char) {
        let f = &mut self.views.dry_run.form;
        let field = match f.field {
            FormField::Buyers => &mut f.buyers,
            FormField::Concurrency => &mut f.concurrency,
            FormField::Strategy => {
                // The first letter picks a strategy: l, h, k (lock), s, a.
                let pick = match c.to_ascii_lowercase() {
                    'l' => Some(StrategyChoice::One(Strategy::Lua)),
                    'h' => Some(StrategyChoice::One(Strategy::Hincrby)),
                    'k' => Some(StrategyChoice::One(Strategy::Lock)),
                    's' => Some(StrategyChoice::One(Strategy::Sql)),
                    'a' => Some(StrategyChoice::All),
                    _ => None,
                };
                if let Some(p) = pick {
                    f.strategy = p;
                }
                return;
            }
        };
        if c.is_ascii_digit() && field.len() < MAX_DIGITS {
            field.push(c);
            f.error = None;
        }
    }

    pub(super) fn form_backspace(&mut self) {
        let f = &mut self.views.dry_run.form;
        match f.field {
            FormField::Buyers => {
                f.buyers.pop();
            }
            FormField::Concurrency => {
                f.concurrency.pop();
            }
            FormField::Strategy => {}
        }
        f.error = None;
    }

    /// Enter in the form: checks the numbers, then asks for confirmation.
    pub(super) fn submit_dry_run_form(&mut self) {
        let f = &self.views.dry_run.form;
        let strategy = f.strategy;
        let checked = parse_number("buyers", &f.buyers, MAX_BUYERS).and_then(|b| {
            parse_number("concurrency", &f.concurrency, MAX_CONCURRENCY).map(|c| (b, c))
        });
        let (buyers, concurrency) = match checked {
            Ok(v) => v,
            Err(e) => {
                self.views.dry_run.form.error = Some(e);
                return;
            }
        };
        let Some(activity) = self.need_activity() else {
            self.dialog = None;
            return;
        };
        let runs = strategy.strategies().len();
        let prefix = &self.config.key_prefix;
        let mut lines = vec![
            format!(
                "{} buyers, concurrency {concurrency}, strategy {}{}.",
                crate::render::grouped(i64::try_from(buyers).unwrap_or(i64::MAX)),
                strategy.name(),
                if runs > 1 {
                    format!(" ({runs} runs one after the other, the same demand)")
                } else {
                    String::new()
                }
            ),
            format!("Writes shadow keys only ('{prefix}-dry-<run>-<strategy>') and a temporary"),
            format!("database; never the live '{prefix}' keys nor the live orders. The shadow"),
            "keys are removed when each strategy ends.".into(),
        ];
        let live = self
            .stock
            .report()
            .is_some_and(|r| r.activity == activity.as_str() && r.phase == Phase::Live);
        if live {
            lines.push(String::new());
            lines.push(format!(
                "{activity} is LIVE: the buyers load the Redis that serves its sales."
            ));
        }
        self.dialog = Some(Dialog::Confirm(Confirm::ask(
            format!("Dry run of {activity}?   Enter start   Esc cancel"),
            lines,
            PendingWrite::DryRun {
                activity,
                buyers,
                concurrency,
                strategy,
            },
        )));
    }

    /// A confirmed dry run: its state, the Dry run view, and the Command for the executor.
    pub(super) fn start_dry_run(
        &mut self,
        activity: ActivityId,
        buyers: usize,
        concurrency: usize,
        strategy: StrategyChoice,
    ) -> Vec<Command> {
        // Checked again: the dialog may have been opened before another run started.
        if !self.may_dry_run() {
            return Vec::new();
        }
        let seq = self.seq();
        let strategies = strategy.strategies();
        self.views.dry_run.run = Some(DryRun {
            seq,
            activity: activity.clone(),
            buyers,
            concurrency,
            strategies: strategies.clone(),
            started: self.now,
            current: None,
            throughput: Vec::new(),
            elapsed_secs: 0.0,
            results: Vec::new(),
            stopped_at: None,
            finished: None,
            error: None,
        });
        self.view = View::DryRun;
        vec![Command::StartDryRun {
            seq,
            activity,
            buyers,
            concurrency,
            strategies,
        }]
    }

    /// `x`, or Esc on the Dry run view.
    pub(super) fn stop_dry_run(&mut self) -> Vec<Command> {
        match self.views.dry_run.run.as_mut().filter(|r| r.running()) {
            Some(run) if run.stopped_at.is_some() => {
                self.flash(
                    "the dry run is stopping: it checks what it did and removes its shadow keys",
                    false,
                );
                Vec::new()
            }
            Some(run) => {
                // The strategy running now is the one after the last that reported.
                run.stopped_at = Some(run.results.len());
                let seq = run.seq;
                self.flash(
                    "stopping the dry run: it checks what it did and removes its shadow keys",
                    false,
                );
                vec![Command::StopDryRun { seq }]
            }
            None => {
                self.flash("no dry run is running", false);
                Vec::new()
            }
        }
    }

    pub(super) fn dry_run_progress(
        &mut self,
        seq: u64,
        strategy: Strategy,
        elapsed_secs: f64,
        snapshot: LiveSnapshot,
    ) {
        let Some(run) = self
            .views
            .dry_run
            .run
            .as_mut()
            .filter(|r| r.seq == seq && r.running())
        else {
            return;
        };
        // A late figure of a strategy that has already reported its result.
        if run.results.iter().any(|r| r.strategy == strategy.as_str()) {
            return;
        }
        let ops = if snapshot.ops_per_sec.is_finite() {
            snapshot.ops_per_sec.max(0.0)
        } else {
            0.0
        };
        let t = if elapsed_secs.is_finite() {
            elapsed_secs.max(0.0)
        } else {
            run.elapsed_secs
        };
        run.elapsed_secs = run.elapsed_secs.max(t);
        match run.throughput.iter_mut().find(|(s, _)| *s == strategy) {
            Some((_, points)) => {
                points.push((t, ops));
                if points.len() > THROUGHPUT_POINTS {
                    points.remove(0);
                }
            }
            None => run.throughput.push((strategy, vec![(t, ops)])),
        }
        run.current = Some((strategy, snapshot));
    }

    pub(super) fn dry_run_strategy_done(&mut self, seq: u64, stats: RunStats) {
        let Some(run) = self.views.dry_run.run.as_mut().filter(|r| r.seq == seq) else {
            return;
        };
        if run
            .current
            .as_ref()
            .is_some_and(|(s, _)| s.as_str() == stats.strategy)
        {
            run.current = None;
        }
        // A strategy that ended before its first live figure (a fast one: under a second) still
        // gets its line and its name in the legend: its whole-run figure, where it ended.
        if let Some(strategy) = crate::worker::Strategy::ALL
            .into_iter()
            .find(|s| s.as_str() == stats.strategy)
            && stats.ops_per_sec.is_finite()
            && !run.throughput.iter().any(|(s, _)| *s == strategy)
        {
            let t = run.elapsed_secs;
            run.throughput
                .push((strategy, vec![(t, stats.ops_per_sec.max(0.0))]));
        }
        run.results.push(stats);
    }

    pub(super) fn dry_run_done(&mut self, seq: u64, result: Result<(), Error>) {
        let now = self.now;
        let Some(run) = self.views.dry_run.run.as_mut().filter(|r| r.seq == seq) else {
            return;
        };
        run.finished = Some(now);
        run.current = None;
        let failed: Vec<String> = (0..run.results.len())
            .filter(|&i| run.verdict(i) == "FAILED")
            .map(|i| run.results[i].strategy.clone())
            .collect();
        let (text, error) = match result {
            Err(e) => {
                let text = format!("dry run failed: {}", e.message);
                run.error = Some(e);
                (text, true)
            }
            Ok(()) if !failed.is_empty() => (
                format!("dry run: invariant FAILED in {}", failed.join(", ")),
                true,
            ),
            Ok(()) if run.stopped_at.is_some() => (
                format!(
                    "dry run stopped ({} of {} strateg{} ran); its shadow keys were removed",
                    run.results.len(),
                    run.strategies.len(),
                    if run.strategies.len() == 1 {
                        "y"
                    } else {
                        "ies"
                    }
                ),
                false,
            ),
            Ok(()) => ("dry run finished: every invariant held".to_string(), false),
        };
        self.flash(text, error);
    }
}
