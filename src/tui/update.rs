//! `App::update`: one Action in, state changed, Commands out. Never awaits and never touches
//! the network, so a key is answered in the same loop turn whatever Redis is doing.

use super::action::{Action, Command, ResolveWhich};
use super::app::{App, Busy, Confirm, Dialog, PendingWrite, PreheatRun, View};
use super::data::needs_fix;
use super::keys;
use crate::domain::ActivityId;
use crate::error::Error;
use crate::ops::compensation::ResolveReport;
use crate::ops::fix::FixReport;
use crate::ops::preheat::PreheatReport;

/// Longest filter or typed confirmation kept (a paste cannot grow the state without bound).
const MAX_INPUT: usize = 128;

impl App {
    /// Applies one Action and returns what the runtime must do.
    pub fn update(&mut self, action: Action) -> Vec<Command> {
        self.dirty = true;
        match action {
            Action::Key(key) => match keys::map(self, key) {
                Some(a) => self.update(a),
                None => Vec::new(),
            },
            Action::Resize(w, h) => {
                self.size = (w, h);
                Vec::new()
            }
            Action::Tick(now) => {
                self.now = self.now.max(now);
                if self.flash.as_ref().is_some_and(|f| {
                    self.now.saturating_duration_since(f.at) > super::app::FLASH_FOR
                }) {
                    self.flash = None;
                }
                Vec::new()
            }
            Action::InputClosed(why) => {
                self.exit_error = Some(why);
                self.should_quit = true;
                Vec::new()
            }
            Action::Quit => self.quit(),
            Action::ForceQuit => {
                self.should_quit = true;
                Vec::new()
            }
            Action::SwitchView(v) => {
                self.switch(v);
                Vec::new()
            }
            Action::NextView => self.cycle_view(1),
            Action::PrevView => self.cycle_view(View::TABBED.len() - 1),
            Action::Move(n) => {
                self.move_by(n);
                Vec::new()
            }
            Action::Top => {
                self.move_by(isize::MIN / 2);
                Vec::new()
            }
            Action::Bottom => {
                self.move_by(isize::MAX / 2);
                Vec::new()
            }
            Action::StartFilter => {
                if self.view.has_table() {
                    self.filtering = true;
                }
                Vec::new()
            }
            Action::Input(c) => {
                self.input(c);
                Vec::new()
            }
            Action::Backspace => {
                self.backspace();
                Vec::new()
            }
            Action::Enter => self.enter(),
            Action::Cancel => {
                self.cancel();
                Vec::new()
            }
            Action::Confirm => match &self.dialog {
                Some(Dialog::Confirm(c)) if c.typed.is_none() => {
                    let write = c.write.clone();
                    self.run_write(write)
                }
                _ => Vec::new(),
            },
            Action::CycleSort | Action::ReverseSort => {
                if self.view != View::Stock {
                    self.flash("sorting: press s on the Stock view (2)", false);
                } else {
                    if matches!(action, Action::CycleSort) {
                        self.sort = self.sort.next();
                    } else {
                        self.sort_descending = !self.sort_descending;
                    }
                    self.rebuild_stock_order();
                }
                Vec::new()
            }
            Action::SelectActivity(id) => {
                let cmds = self.set_activity(id);
                self.view = View::Stock;
                cmds
            }
            Action::FixProduct => self.ask_fix(false),
            Action::FixActivity => self.ask_fix(true),
            Action::ResolveSelected => self.ask_resolve(false),
            Action::ResolveAll => self.ask_resolve(true),
            Action::Preheat { force } => self.ask_preheat(force),
            Action::Activities(f) => {
                self.now = self.now.max(f.at);
                self.on_activities(f)
            }
            Action::Overview(f) => {
                self.on_overview(f);
                Vec::new()
            }
            Action::Status(id, f) => {
                self.now = self.now.max(f.at);
                self.on_status(id, f);
                Vec::new()
            }
            Action::Compensation(id, f) => {
                self.on_compensation(id, f);
                Vec::new()
            }
            Action::Audit(f) => {
                self.on_audit(f);
                Vec::new()
            }
            Action::Redis(f) => {
                self.on_redis(f);
                Vec::new()
            }
            Action::FixPreviewed { seq, result } => {
                self.fix_previewed(seq, result);
                Vec::new()
            }
            Action::FixApplied { seq, result } => self.fix_applied(seq, result),
            Action::PreheatProgress {
                seq,
                stage,
                done,
                total,
            } => {
                if let Some(run) = self.preheat_run.as_mut().filter(|r| r.seq == seq) {
                    run.stage = stage;
                    run.done = done;
                    run.total = total;
                }
                Vec::new()
            }
            Action::PreheatDone { seq, result } => self.preheat_done(seq, result),
            Action::Resolved { seq, result } => self.resolved(seq, result),
        }
    }

    fn quit(&mut self) -> Vec<Command> {
        match &self.busy {
            Some(b) => {
                let secs = self.now.saturating_duration_since(b.since).as_secs();
                self.dialog = Some(Dialog::Confirm(Confirm {
                    title: "Quit while a write runs?".into(),
                    lines: vec![
                        format!("{} has been running for {secs} s.", b.what),
                        "Quitting now may stop it half way; the audit table records what was applied."
                            .into(),
                        String::new(),
                        "y quit anyway    n stay".into(),
                    ],
                    write: PendingWrite::Quit,
                    typed: None,
                    input: String::new(),
                    mismatch: false,
                }));
            }
            None => self.should_quit = true,
        }
        Vec::new()
    }

    fn switch(&mut self, v: View) {
        if v == View::Help && self.view != View::Help {
            self.back_to = self.view;
        }
        self.view = v;
        self.filtering = false;
    }

    fn cycle_view(&mut self, step: usize) -> Vec<Command> {
        let current = if self.view == View::Help {
            self.back_to
        } else {
            self.view
        };
        let n = View::TABBED.len();
        let i = View::TABBED.iter().position(|v| *v == current).unwrap_or(0);
        self.switch(View::TABBED[(i + step) % n]);
        Vec::new()
    }

    fn move_by(&mut self, n: isize) {
        let view = self.view;
        if !view.has_table() {
            return;
        }
        let len = self.row_count(view);
        let c = self.cursor_mut(view);
        let max = len.saturating_sub(1) as isize;
        c.selected = (c.selected as isize).saturating_add(n).clamp(0, max) as usize;
    }

    fn input(&mut self, c: char) {
        if c.is_control() {
            return;
        }
        if let Some(Dialog::Confirm(d)) = &mut self.dialog {
            if d.typed.is_some() && d.input.chars().count() < MAX_INPUT {
                d.input.push(c);
                d.mismatch = false;
            }
            return;
        }
        if self.filtering {
            let view = self.view;
            let cur = self.cursor_mut(view);
            if cur.filter.chars().count() < MAX_INPUT {
                cur.filter.push(c);
                cur.selected = 0;
            }
            self.filter_changed();
        }
    }

    fn backspace(&mut self) {
        if let Some(Dialog::Confirm(d)) = &mut self.dialog {
            d.input.pop();
            d.mismatch = false;
            return;
        }
        if self.filtering {
            let view = self.view;
            self.cursor_mut(view).filter.pop();
            self.filter_changed();
        }
    }

    fn filter_changed(&mut self) {
        if self.view == View::Stock {
            self.rebuild_stock_order();
        }
        self.clamp(self.view);
    }

    fn enter(&mut self) -> Vec<Command> {
        if let Some(Dialog::Confirm(d)) = &mut self.dialog {
            if let Some(expected) = &d.typed {
                if d.input == *expected {
                    let write = d.write.clone();
                    return self.run_write(write);
                }
                d.mismatch = true;
            }
            return Vec::new();
        }
        if self.dialog.is_some() {
            return Vec::new();
        }
        if self.filtering {
            self.filtering = false;
            return Vec::new();
        }
        if self.view == View::Activities {
            let picked = self
                .activity_rows()
                .get(self.cursor(View::Activities).selected)
                .map(|a| a.activity.activity_id.clone());
            if let Some(id) = picked {
                return self.update(Action::SelectActivity(id));
            }
        }
        Vec::new()
    }

    fn cancel(&mut self) {
        if let Some(d) = self.dialog.take() {
            if matches!(&d, Dialog::Confirm(c) if c.write != PendingWrite::Quit) {
                self.flash("cancelled: nothing was written", false);
            }
            return;
        }
        if self.filtering {
            self.filtering = false;
            let view = self.view;
            self.cursor_mut(view).filter.clear();
            self.filter_changed();
            return;
        }
        if self.view == View::Help {
            self.view = self.back_to;
            return;
        }
        let view = self.view;
        if !self.filter(view).is_empty() {
            self.cursor_mut(view).filter.clear();
            self.filter_changed();
        }
    }

    /// The guards of every write: not read-only, nothing else running.
    fn may_write(&mut self, what: &str) -> bool {
        if self.config.read_only {
            self.flash(
                format!(
                    "read-only mode: {what} refused (the console was started with --read-only)"
                ),
                true,
            );
            return false;
        }
        if let Some(b) = &self.busy {
            let text = format!("{} is still running; {what} waits until it ends", b.what);
            self.flash(text, true);
            return false;
        }
        true
    }

    fn need_activity(&mut self) -> Option<ActivityId> {
        if self.activity.is_none() {
            self.flash("no activity selected: press 1, highlight one, Enter", true);
        }
        self.activity.clone()
    }

    fn ask_fix(&mut self, all: bool) -> Vec<Command> {
        if !matches!(self.view, View::Stock | View::Reconcile) {
            self.flash(
                "fix: press f or F on the Stock (2) or Reconcile (5) view",
                false,
            );
            return Vec::new();
        }
        if !self.may_write("fix") {
            return Vec::new();
        }
        let Some(activity) = self.need_activity() else {
            return Vec::new();
        };
        let product = if all {
            None
        } else {
            match self.selected_product() {
                None => {
                    self.flash("no product highlighted", true);
                    return Vec::new();
                }
                Some(p) if !needs_fix(p) => {
                    let text = format!("{} is ok: nothing to fix", p.product);
                    self.flash(text, false);
                    return Vec::new();
                }
                Some(p) => Some(p.product.clone()),
            }
        };
        let seq = self.seq();
        self.dialog = Some(Dialog::Working {
            title: "Fix preview".into(),
            detail: "reading Redis and the database truth; nothing is written yet".into(),
            seq,
            since: self.now,
            then: Some(PendingWrite::Fix {
                activity: activity.clone(),
                product: product.clone(),
            }),
        });
        vec![Command::PreviewFix {
            seq,
            activity,
            product,
        }]
    }

    fn fix_previewed(&mut self, seq: u64, result: Result<FixReport, Error>) {
        let write = match &self.dialog {
            Some(Dialog::Working {
                seq: s,
                then: Some(w),
                ..
            }) if *s == seq => w.clone(),
            _ => return, // the operator closed the dialog meanwhile
        };
        let report = match result {
            Ok(r) => r,
            Err(e) => {
                self.dialog = Some(message("Fix preview failed", vec![e.message], true));
                return;
            }
        };
        if report.products.is_empty() {
            self.dialog = Some(message(
                "Nothing to fix",
                vec!["Every product matches the database truth now.".into()],
                false,
            ));
            return;
        }
        let PendingWrite::Fix { activity, product } = &write else {
            return;
        };
        let mut lines = vec![format!(
            "{:<24} {:<9} {:>10}    {:<10} orphans",
            "product", "state", "before", "after"
        )];
        for p in &report.products {
            lines.push(format!(
                "{:<24} {:<9} {:>10} -> {:<10} {}",
                p.product,
                p.state.as_str(),
                p.before.as_deref().unwrap_or("missing"),
                p.after,
                p.orphans.len()
            ));
        }
        lines.push(String::new());
        lines.push(
            "Applied with compare-and-set from the truth at that moment; every change audited."
                .into(),
        );
        let (title, typed) = match product {
            Some(p) => (format!("Fix {p} in {activity}?   y apply   n cancel"), None),
            None => (
                format!(
                    "Fix {} product(s) of {activity}? Type the activity id and Enter",
                    report.products.len()
                ),
                Some(activity.to_string()),
            ),
        };
        self.dialog = Some(Dialog::Confirm(Confirm {
            title,
            lines,
            write,
            typed,
            input: String::new(),
            mismatch: false,
        }));
    }

    /// Starts a confirmed write.
    fn run_write(&mut self, write: PendingWrite) -> Vec<Command> {
        self.dialog = None;
        if matches!(write, PendingWrite::Quit) {
            self.should_quit = true;
            return Vec::new();
        }
        // Checked again: the dialog may have been opened before anything else started.
        if !self.may_write("this write") {
            return Vec::new();
        }
        let seq = self.seq();
        let (what, cmd) = match write {
            PendingWrite::Fix { activity, product } => (
                "the fix",
                Command::ApplyFix {
                    seq,
                    activity,
                    product,
                },
            ),
            PendingWrite::Preheat { activity, force } => {
                self.preheat_run = Some(PreheatRun {
                    seq,
                    activity: activity.clone(),
                    force,
                    stage: "starting".into(),
                    done: 0,
                    total: 1,
                });
                self.view = View::Preheat;
                (
                    "the preheat",
                    Command::RunPreheat {
                        seq,
                        activity,
                        force,
                    },
                )
            }
            PendingWrite::Resolve { activity, which } => (
                "the resolve",
                Command::ResolveCompensation {
                    seq,
                    activity,
                    which,
                },
            ),
            PendingWrite::Quit => return Vec::new(),
        };
        self.busy = Some(Busy {
            seq,
            what: what.to_string(),
            since: self.now,
        });
        if !matches!(cmd, Command::RunPreheat { .. }) {
            self.dialog = Some(Dialog::Working {
                title: format!("Running {what}"),
                detail: "Esc hides this window; the write goes on and reports when done".into(),
                seq,
                since: self.now,
                then: None,
            });
        }
        vec![cmd]
    }

    /// Ends a write: shows its outcome in its window if still open, else in the footer.
    fn finish(&mut self, seq: u64, title: String, lines: Vec<String>, error: bool) {
        if self.busy.as_ref().is_some_and(|b| b.seq == seq) {
            self.busy = None;
        }
        let open = matches!(&self.dialog, Some(Dialog::Working { seq: s, .. }) if *s == seq);
        if open {
            self.dialog = Some(message(&title, lines, error));
        } else {
            self.flash(title, error);
        }
    }

    fn fix_applied(&mut self, seq: u64, result: Result<FixReport, Error>) -> Vec<Command> {
        match result {
            Ok(r) => {
                let applied = r.products.iter().filter(|p| p.applied).count();
                let title = if r.conflicts > 0 || r.errors > 0 {
                    format!(
                        "Fix: {applied} applied, {} conflict(s), {} error(s)",
                        r.conflicts, r.errors
                    )
                } else {
                    format!("Fix applied to {applied} product(s)")
                };
                let lines = r
                    .products
                    .iter()
                    .map(|p| {
                        let outcome = if let Some(e) = &p.error {
                            format!("error: {e}")
                        } else if p.conflict {
                            format!("conflict after {} attempt(s)", p.attempts)
                        } else if p.applied {
                            "applied".to_string()
                        } else {
                            "unchanged".to_string()
                        };
                        format!(
                            "{:<24} {:>10} -> {:<10} {outcome}",
                            p.product,
                            p.before.as_deref().unwrap_or("missing"),
                            p.after
                        )
                    })
                    .collect();
                let bad = r.conflicts > 0 || r.errors > 0;
                self.finish(seq, title, lines, bad);
            }
            Err(e) => self.finish(
                seq,
                format!("Fix failed: {}", e.message),
                vec![e.message],
                true,
            ),
        }
        vec![Command::RefreshNow]
    }

    fn ask_resolve(&mut self, all: bool) -> Vec<Command> {
        if self.view != View::Compensation {
            self.flash("resolve: press r or R on the Compensation view (4)", false);
            return Vec::new();
        }
        if !self.may_write("resolve") {
            return Vec::new();
        }
        let Some(activity) = self.need_activity() else {
            return Vec::new();
        };
        let (which, lines) = if all {
            let pending = self
                .compensation
                .data
                .iter()
                .flatten()
                .filter(|c| c.status == crate::db::compensation::PENDING)
                .count();
            if pending == 0 {
                self.flash("no pending compensation entries", false);
                return Vec::new();
            }
            (
                ResolveWhich::All,
                vec![format!(
                    "Resolve all {pending} pending entries of {activity}?"
                )],
            )
        } else {
            let rows = self.compensation_rows();
            let Some(c) = rows.get(self.cursor(View::Compensation).selected) else {
                self.flash("no entry highlighted", true);
                return Vec::new();
            };
            if c.status != crate::db::compensation::PENDING {
                let text = format!("{} is already {}", c.request_id, c.status);
                self.flash(text, false);
                return Vec::new();
            }
            (
                ResolveWhich::One(c.request_id.clone()),
                vec![format!(
                    "Resolve request {} ({} x{}, user {})?",
                    c.request_id, c.product_id, c.quantity, c.user_id
                )],
            )
        };
        let mut lines = lines;
        lines.push(String::new());
        lines.push("The ledger and the orders decide: applied, returned (the stock goes".into());
        lines.push("back through restore.lua) or not applied. Every resolution is audited.".into());
        self.dialog = Some(Dialog::Confirm(Confirm {
            title: "Resolve compensation?   y resolve   n cancel".into(),
            lines,
            write: PendingWrite::Resolve { activity, which },
            typed: None,
            input: String::new(),
            mismatch: false,
        }));
        Vec::new()
    }

    fn resolved(&mut self, seq: u64, result: Result<ResolveReport, Error>) -> Vec<Command> {
        match result {
            Ok(r) => {
                let title = format!("Resolved {}, {} still pending", r.resolved, r.still_pending);
                let lines = r
                    .resolutions
                    .iter()
                    .map(|x| {
                        format!(
                            "{:<24} {:<16} x{:<4} {:<12} {}",
                            x.request_id, x.product, x.quantity, x.status, x.detail
                        )
                    })
                    .collect();
                self.finish(seq, title, lines, false);
            }
            Err(e) => self.finish(
                seq,
                format!("Resolve failed: {}", e.message),
                vec![e.message],
                true,
            ),
        }
        vec![Command::RefreshNow]
    }

    fn ask_preheat(&mut self, force: bool) -> Vec<Command> {
        if self.view != View::Preheat {
            self.flash("preheat: press p on the Preheat view (6)", false);
            return Vec::new();
        }
        if !self.may_write("preheat") {
            return Vec::new();
        }
        let Some(activity) = self.need_activity() else {
            return Vec::new();
        };
        let products = self
            .selected_summary()
            .map_or_else(|| "its".to_string(), |s| s.products.to_string());
        let mut lines = vec![
            format!("Writes the keys of {products} product(s) from database truth, reads them"),
            "back and decides go / no-go. Keys that already hold the truth stay as they are."
                .into(),
        ];
        let (title, typed) = if force {
            lines.push(
                "--force: keys that hold other values are REWRITTEN (compare-and-set, audited)."
                    .into(),
            );
            (
                format!("Preheat {activity} --force? Type the activity id and Enter"),
                Some(activity.to_string()),
            )
        } else {
            lines.push(
                "Keys that hold other values make it a no-go; nothing is overwritten.".into(),
            );
            (format!("Preheat {activity}?   y run   n cancel"), None)
        };
        self.dialog = Some(Dialog::Confirm(Confirm {
            title,
            lines,
            write: PendingWrite::Preheat { activity, force },
            typed,
            input: String::new(),
            mismatch: false,
        }));
        Vec::new()
    }

    fn preheat_done(&mut self, seq: u64, result: Result<PreheatReport, Error>) -> Vec<Command> {
        let Some(run) = self.preheat_run.take_if(|r| r.seq == seq) else {
            return Vec::new();
        };
        if self.busy.as_ref().is_some_and(|b| b.seq == seq) {
            self.busy = None;
        }
        match &result {
            Ok(r) if r.decision == "go" => {
                self.flash(format!("preheat {}: GO", run.activity), false);
            }
            Ok(r) => {
                let why = r.reasons.first().cloned().unwrap_or_default();
                self.flash(format!("preheat {}: NO-GO: {why}", run.activity), true);
            }
            Err(e) => self.flash(format!("preheat failed: {}", e.message), true),
        }
        self.preheat_report = Some((run.activity, result));
        self.clamp(View::Preheat);
        vec![Command::RefreshNow]
    }
}

fn message(title: &str, lines: Vec<String>, error: bool) -> Dialog {
    Dialog::Message {
        title: title.to_string(),
        lines,
        error,
    }
}
