//! `App::update`: one Action in, state changed, Commands out. Never awaits and never touches
//! the network, so a key is answered in the same loop turn whatever Redis is doing.

use super::action::{Action, Command};
use super::app::{App, CONFIRM_AFTER, Confirm, Dialog, PendingWrite};
use super::keys;
use super::view::View;
use super::views::dry_run::FormField;

/// Longest filter or typed confirmation kept (a paste cannot grow the state without bound).
const MAX_INPUT: usize = 128;

impl App {
    /// Applies one Action and returns what the runtime must do.
    pub fn update(&mut self, action: Action) -> Vec<Command> {
        let before = self.dialog_title();
        let out = self.handle(action);
        // A dialog that opened (or changed) now starts its moment of ignored confirmations.
        if self.dialog_title() != before {
            self.dialog_at = self.now;
        }
        out
    }

    /// The title of the open dialog, if any: what says that another dialog opened (a
    /// confirmation, or a result replacing the write's "working" dialog).
    fn dialog_title(&self) -> Option<String> {
        match &self.dialog {
            Some(Dialog::Confirm(c)) => Some(c.title.clone()),
            Some(Dialog::Message { title, .. }) => Some(format!("message: {title}")),
            _ => None,
        }
    }

    fn handle(&mut self, action: Action) -> Vec<Command> {
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
                self.move_or_scroll(n);
                Vec::new()
            }
            Action::ScrollColumns(n) => {
                let view = self.view;
                if view.has_table() {
                    let c = self.cursor_mut(view);
                    // No further than the last frame had columns to bring into view (a wider
                    // terminal since then lowers the bound, so `h` acts at once).
                    let most = c.hscroll_max.get().unwrap_or(16).min(16) as isize;
                    c.hscroll = (c.hscroll as isize)
                        .min(most)
                        .saturating_add(n)
                        .clamp(0, most) as usize;
                }
                Vec::new()
            }
            Action::Top => {
                self.move_or_scroll(isize::MIN / 2);
                Vec::new()
            }
            Action::Bottom => {
                self.move_or_scroll(isize::MAX / 2);
                Vec::new()
            }
            Action::StartFilter => {
                if self.view.has_table() {
                    self.filtering = true;
                }
                Vec::new()
            }
            Action::Unknown(c) => {
                let text = if matches!(self.dialog, Some(Dialog::Confirm(_))) {
                    let text = format!("{c} does not confirm: Enter does, Esc cancels");
                    self.note(&text);
                    text
                } else {
                    format!("unknown key: {c} (press ? for help)")
                };
                self.flash(text, false);
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
            Action::Cancel => self.cancel(),
            Action::Dismiss => self.dismiss(),
            Action::Confirm if self.refuse_unread() => Vec::new(),
            Action::Confirm => match &self.dialog {
                // A key within a moment of the dialog opening was typed before it was read.
                Some(Dialog::Confirm(_))
                    if self.now.saturating_duration_since(self.dialog_at) < CONFIRM_AFTER =>
                {
                    let text = "too quick: read the dialog, then press Enter";
                    self.note(text);
                    self.flash(text, false);
                    Vec::new()
                }
                Some(Dialog::Confirm(c)) if c.typed.is_none() => {
                    let write = c.write();
                    self.run_write(write)
                }
                _ => Vec::new(),
            },
            Action::CycleSort | Action::ReverseSort => {
                if self.view != View::Stock {
                    self.flash("sorting: press s on the Stock view (2)", false);
                } else {
                    let reverse = matches!(action, Action::ReverseSort);
                    self.views.stock.change_sort(reverse, &self.stock);
                    self.clamp(View::Stock);
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
            Action::TogglePause { all } => self.ask_pause(all),
            Action::ResumeAll => self.ask_resume_all(),
            Action::OpenTopupForm => self.open_topup_form(),
            Action::WriteReport => match self.need_activity() {
                Some(activity) => {
                    self.flash(format!("writing the report of {activity} ..."), false);
                    vec![Command::WriteReport { activity }]
                }
                None => Vec::new(),
            },
            Action::ReportWritten { result } => {
                match result {
                    Ok(path) => self.flash(format!("report written to {path}"), false),
                    Err(e) => self.flash(format!("report failed: {}", e.message), true),
                }
                Vec::new()
            }
            Action::TopupDone { seq, result } => self.topup_done(seq, result),
            Action::PauseDone { seq, result } => self.pause_done(seq, result),
            Action::ResolveSelected => self.ask_resolve(false),
            Action::ResolveAll => self.ask_resolve(true),
            Action::Preheat { force } => self.ask_preheat(force),
            Action::OpenDryRunForm => {
                self.open_dry_run_form();
                Vec::new()
            }
            Action::FormField(n) => {
                if self.dialog == Some(Dialog::DryRunForm) {
                    let f = &mut self.views.dry_run.form;
                    f.field = f.field.step(n);
                }
                // Tab between the typed confirmation and the reason.
                if let Some(Dialog::Confirm(d)) = &mut self.dialog
                    && d.reason.is_some()
                    && d.typed.is_some()
                {
                    d.reason_focus = !d.reason_focus;
                }
                Vec::new()
            }
            Action::FormChoice(n) => {
                if self.dialog == Some(Dialog::DryRunForm) {
                    let f = &mut self.views.dry_run.form;
                    f.field = FormField::Strategy;
                    f.strategy = f.strategy.step(n);
                }
                Vec::new()
            }
            Action::StopDryRun => self.stop_dry_run(),
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
                self.stock.settling = None;
                self.on_status(id, f)
            }
            Action::Settling(id, percent) => {
                if self.activity.as_ref() == Some(&id) {
                    self.stock.settling = Some(percent);
                }
                Vec::new()
            }
            Action::Busiest(counts) => self.on_busiest(counts),
            Action::ToggleBell => {
                self.bell = !self.bell;
                let text = if self.bell {
                    "bell on: a newly raised critical alert rings the terminal"
                } else {
                    "bell off"
                };
                self.flash(text, false);
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
                if let Some(run) = self.views.preheat.run.as_mut().filter(|r| r.seq == seq) {
                    run.stage = stage;
                    run.done = done;
                    run.total = total;
                }
                Vec::new()
            }
            Action::PreheatDone { seq, result } => self.preheat_done(seq, result),
            Action::Resolved { seq, result } => self.resolved(seq, result),
            Action::OpenDetail => self.open_detail(),
            Action::DetailRead { seq, result } => {
                self.detail_read(seq, result);
                Vec::new()
            }
            Action::PendingCounted { seq, result } => {
                self.pending_counted(seq, result);
                Vec::new()
            }
            Action::DryRunProgress {
                seq,
                strategy,
                elapsed_secs,
                snapshot,
            } => {
                self.dry_run_progress(seq, strategy, elapsed_secs, snapshot);
                Vec::new()
            }
            Action::DryRunStrategyDone { seq, stats } => {
                self.dry_run_strategy_done(seq, *stats);
                Vec::new()
            }
            Action::DryRunDone { seq, result } => {
                self.dry_run_done(seq, result);
                Vec::new()
            }
        }
    }

    fn quit(&mut self) -> Vec<Command> {
        match &self.busy {
            Some(b) => {
                let secs = self.now.saturating_duration_since(b.since).as_secs();
                self.dialog = Some(Dialog::Confirm(Confirm::ask(
                    "Quit while a write runs?",
                    vec![
                        format!("{} has been running for {secs} s.", b.what),
                        "Quitting now may stop it half way; the audit table records what was applied."
                            .into(),
                        String::new(),
                        "Enter quits anyway    n / Esc stays".into(),
                    ],
                    PendingWrite::Quit,
                )));
            }
            None if self.views.dry_run.run.as_ref().is_some_and(|r| r.running()) => {
                self.dialog = Some(Dialog::Confirm(Confirm::ask(
                    "Quit while a dry run runs?",
                    vec![
                        "Quitting stops the dry run; its shadow keys are removed before the".into(),
                        "console exits (it waits up to 10 s for that).".into(),
                        String::new(),
                        "Enter stops it and quits    n / Esc stays".into(),
                    ],
                    PendingWrite::Quit,
                )));
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

    /// Up, Down and the page keys: scroll an open dialog or the help, else move the
    /// selection of the current table.
    fn move_or_scroll(&mut self, n: isize) {
        if self.dialog.is_some() {
            self.scroll_dialog(n);
        } else if self.view == View::Help {
            self.scroll_help(n);
        } else {
            self.move_by(n);
        }
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
        // The operator chose this row: it is the one refreshes and re-sorts keep.
        let i = c.selected;
        let key = self
            .row_keys(view)
            .and_then(|k| k.get(i).map(|k| k.to_string()));
        if let Some(key) = key {
            self.cursor_mut(view).anchor_on(Some(&key));
        }
    }

    fn input(&mut self, c: char) {
        if c.is_control() {
            return;
        }
        if self.dialog == Some(Dialog::DryRunForm) {
            self.form_input(c);
            return;
        }
        if let Some(Dialog::TopupForm { product, .. }) = &self.dialog {
            let figures = self.topup_figures(&product.clone());
            if let Some(Dialog::TopupForm {
                input,
                error,
                refused,
                ..
            }) = &mut self.dialog
            {
                if refused.is_some() {
                    return;
                }
                match super::topup_form::type_key(input, c, figures.as_ref()) {
                    Ok(next) => {
                        *input = next;
                        *error = None;
                    }
                    Err(why) => {
                        *error = Some(format!("{why} (Backspace takes it back)"));
                        *refused = Some(c);
                    }
                }
            }
            return;
        }
        if let Some(Dialog::Confirm(d)) = &mut self.dialog {
            if d.types_reason() {
                // Printable text of at most what `--reason` takes.
                if let Some(r) = d.reason.as_mut().filter(|r| {
                    !c.is_control() && r.chars().count() < crate::ops::pause::MAX_REASON
                }) {
                    r.push(c);
                }
                return;
            }
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
            }
            self.filter_changed();
        }
    }

    fn backspace(&mut self) {
        if self.dialog == Some(Dialog::DryRunForm) {
            self.form_backspace();
            return;
        }
        if let Some(Dialog::TopupForm {
            input,
            error,
            refused,
            ..
        }) = &mut self.dialog
        {
            if refused.take().is_none() {
                input.pop();
            }
            *error = None;
            return;
        }
        if let Some(Dialog::Confirm(d)) = &mut self.dialog {
            if d.types_reason() {
                if let Some(r) = d.reason.as_mut() {
                    r.pop();
                }
                return;
            }
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
            self.views.stock.rebuild(&self.stock);
        }
        self.clamp(self.view);
    }

    fn enter(&mut self) -> Vec<Command> {
        if matches!(&self.dialog, Some(Dialog::Confirm(c)) if c.typed.is_some())
            && self.refuse_unread()
        {
            return Vec::new();
        }
        if let Some(Dialog::Confirm(d)) = &mut self.dialog {
            if let Some(expected) = &d.typed {
                if d.input == *expected {
                    let write = d.write();
                    return self.run_write(write);
                }
                d.mismatch = true;
            }
            return Vec::new();
        }
        if self.dialog == Some(Dialog::DryRunForm) {
            self.submit_dry_run_form();
            return Vec::new();
        }
        if matches!(self.dialog, Some(Dialog::TopupForm { .. })) {
            self.submit_topup_form();
            return Vec::new();
        }
        if self.dialog.is_some() {
            return Vec::new();
        }
        if self.filtering {
            self.filtering = false;
            return Vec::new();
        }
        if matches!(
            self.view,
            View::Stock
                | View::Reconcile
                | View::Alerts
                | View::Compensation
                | View::Audit
                | View::Events
        ) {
            return self.open_detail();
        }
        if self.view == View::Activities {
            let rows = self.views.activities.rows(self);
            let picked = self
                .cursor(View::Activities)
                .row()
                .and_then(|i| rows.get(i))
                .map(|a| a.activity.activity_id.clone());
            if let Some(id) = picked {
                return self.update(Action::SelectActivity(id));
            }
        }
        Vec::new()
    }

    /// `q` or space on a result: closes it once it has been on screen a moment.
    fn dismiss(&mut self) -> Vec<Command> {
        if self.now.saturating_duration_since(self.dialog_at) < CONFIRM_AFTER {
            let text = "too quick: read the result, then press Esc or Enter";
            self.note(text);
            self.flash(text, false);
            return Vec::new();
        }
        self.cancel()
    }

    fn cancel(&mut self) -> Vec<Command> {
        if let Some(d) = self.dialog.take() {
            let asked = match &d {
                Dialog::Confirm(c) => c.write != PendingWrite::Quit,
                Dialog::DryRunForm | Dialog::TopupForm { .. } => true,
                _ => false,
            };
            if asked {
                self.flash("cancelled: nothing was written", false);
            }
            return Vec::new();
        }
        if self.filtering {
            self.filtering = false;
            let view = self.view;
            self.cursor_mut(view).filter.clear();
            self.filter_changed();
            return Vec::new();
        }
        if self.view == View::Help {
            self.view = self.back_to;
            return Vec::new();
        }
        // Esc on the Dry run view stops a running dry run (as x does).
        if self.view == View::DryRun {
            if self.views.dry_run.run.as_ref().is_some_and(|r| r.running()) {
                return self.stop_dry_run();
            }
            return Vec::new();
        }
        let view = self.view;
        if !self.filter(view).is_empty() {
            self.cursor_mut(view).filter.clear();
            self.filter_changed();
        }
        Vec::new()
    }
}
