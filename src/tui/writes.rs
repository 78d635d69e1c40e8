//! The write flows of `update`: fix (preview, then confirmation), preheat, resolving the
//! compensation queue. Each asks first, refuses in read-only mode and while another write
//! runs, then hands the write to the executor as a Command and shows its outcome.

use super::action::Command;
use super::app::{App, Busy, Confirm, Dialog, PendingWrite};
use super::topup_form;
use super::view::View;
use super::views::preheat::PreheatRun;
use crate::domain::ActivityId;
use crate::error::Error;
use crate::ops::compensation::ResolveReport;
use crate::ops::compensation::Which;
use crate::ops::fix::FixReport;
use crate::ops::pause::PauseReport;
use crate::ops::preheat::PreheatReport;
use crate::ops::topup::TopupReport;

/// A count with thousands separators.
fn grouped(n: usize) -> String {
    super::widgets::columns::grouped(i64::try_from(n).unwrap_or(i64::MAX))
}

impl App {
    /// The guards of every write: not read-only, nothing else running.
    pub(super) fn may_write(&mut self, what: &str) -> bool {
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

    pub(super) fn need_activity(&mut self) -> Option<ActivityId> {
        if self.activity.is_none() {
            self.flash("no activity selected: press 1, highlight one, Enter", true);
        }
        self.activity.clone()
    }

    /// The guards every write key passes first: pressed on a view where it works (else `hint`
    /// says where), allowed now (not read-only, no write running), an activity selected. The
    /// first that fails is flashed; the activity comes back when all hold.
    fn write_on(&mut self, views: &[View], what: &str, hint: &str) -> Option<ActivityId> {
        if !views.contains(&self.view) {
            self.flash(hint, false);
            return None;
        }
        if !self.may_write(what) {
            return None;
        }
        self.need_activity()
    }

    pub(super) fn ask_fix(&mut self, all: bool) -> Vec<Command> {
        // Read-only: the preview still shows what a fix would do (it writes nothing); only the
        // confirmation is withheld.
        const WHERE: &str = "fix: press f or F on the Stock (2) or Reconcile (5) view";
        let views = [View::Stock, View::Reconcile];
        let activity = if self.config.read_only {
            if !views.contains(&self.view) {
                self.flash(WHERE, false);
                return Vec::new();
            }
            self.need_activity()
        } else {
            self.write_on(&views, "fix", WHERE)
        };
        let Some(activity) = activity else {
            return Vec::new();
        };
        let product = if all {
            None
        } else {
            match self.selected_product() {
                None => {
                    let why = self.no_row(self.view, "product");
                    self.flash(why, true);
                    return Vec::new();
                }
                Some(p) if !p.needs_fix() => {
                    let text = format!("{} is {}: nothing to fix", p.product, p.state.as_str());
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
                confirmed: None,
            }),
        });
        vec![Command::PreviewFix {
            seq,
            activity,
            product,
        }]
    }

    pub(super) fn fix_previewed(&mut self, seq: u64, result: Result<FixReport, Error>) {
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
        if report.products.is_empty() && report.left.is_empty() {
            self.dialog = Some(message(
                "Nothing to fix",
                vec!["Every product matches the database truth now.".into()],
                false,
            ));
            return;
        }
        if report.products.is_empty() {
            // Not ok, and nothing a write of Redis can change: said so, never "all matches".
            let lines = report.left.iter().map(|l| l.shown()).collect();
            self.dialog = Some(message("Nothing a fix can write", lines, true));
            return;
        }
        let PendingWrite::Fix {
            activity, product, ..
        } = &write
        else {
            return;
        };
        // What the operator is about to confirm travels with the write.
        let write = PendingWrite::Fix {
            activity: activity.clone(),
            product: product.clone(),
            confirmed: Some(report.confirmation()),
        };
        let (activity, product) = (activity.clone(), product.clone());
        let mut lines = vec![format!(
            "{:<24} {:<9} {:>10}    {:<10} {:<7} writes",
            "product", "state", "before", "after", "orphans"
        )];
        // Every product: the dialog scrolls, and an activity-wide fix counts only once its
        // list has been read to the end.
        for p in &report.products {
            lines.push(format!(
                "{:<24} {:<9} {:>10} -> {:<10} {:<7} {}",
                p.product,
                p.state.as_str(),
                p.before.as_deref().unwrap_or("missing"),
                p.after,
                p.orphans.len(),
                p.writes()
            ));
        }
        // What no write of Redis can change is said beside what the fix writes (an oversold
        // product stood unnamed behind a list of drifts).
        if !report.left.is_empty() {
            lines.push(String::new());
            lines.push("Left as they are (a fix cannot change them):".into());
            lines.extend(report.left.iter().map(|l| l.shown()));
        }
        lines.push(String::new());
        lines.push(
            "Applied with compare-and-set from the truth at that moment; every change audited."
                .into(),
        );
        if self.config.read_only {
            lines.push(String::new());
            lines.push(
                "READ-ONLY: this console applies nothing; run one without --read-only to fix."
                    .into(),
            );
            self.dialog = Some(message(
                &format!("Fix preview of {activity} (read-only)"),
                lines,
                false,
            ));
            return;
        }
        let (title, typed) = match &product {
            Some(p) => (
                format!("Fix {p} in {activity}?   Enter apply   Esc cancel"),
                None,
            ),
            None => (
                format!(
                    "Fix {} product(s) of {activity}? Type the activity id and Enter",
                    report.products.len()
                ),
                Some(activity.to_string()),
            ),
        };
        self.dialog = Some(Dialog::Confirm(Confirm::typed(title, lines, write, typed)));
    }

    /// Starts a confirmed write.
    pub(super) fn run_write(&mut self, write: PendingWrite) -> Vec<Command> {
        self.dialog = None;
        let write = match write {
            PendingWrite::Quit => {
                self.should_quit = true;
                return Vec::new();
            }
            PendingWrite::DryRun {
                activity,
                buyers,
                concurrency,
                strategy,
            } => return self.start_dry_run(activity, buyers, concurrency, strategy),
            w => w,
        };
        // Checked again: the dialog may have been opened before anything else started.
        if !self.may_write("this write") {
            return Vec::new();
        }
        let seq = self.seq();
        let (what, cmd) = match write {
            PendingWrite::Fix {
                activity,
                product,
                confirmed,
            } => (
                "the fix",
                Command::ApplyFix {
                    seq,
                    activity,
                    product,
                    confirmed,
                },
            ),
            PendingWrite::Preheat { activity, force } => {
                self.views.preheat.run = Some(PreheatRun {
                    seq,
                    activity: activity.clone(),
                    force,
                    stage: "starting".into(),
                    done: 0,
                    total: 1,
                    since: self.now,
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
            PendingWrite::Topup {
                activity,
                product,
                add,
                reason,
            } => (
                "the top-up",
                Command::RunTopup {
                    seq,
                    activity,
                    product,
                    add,
                    reason,
                },
            ),
            PendingWrite::Pause {
                activity,
                product,
                pause,
                reason,
            } => (
                if pause { "the pause" } else { "the resume" },
                Command::SetPaused {
                    seq,
                    activity,
                    product,
                    pause,
                    reason,
                },
            ),
            PendingWrite::Quit | PendingWrite::DryRun { .. } => return Vec::new(),
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

    pub(super) fn fix_applied(
        &mut self,
        seq: u64,
        result: Result<FixReport, Error>,
    ) -> Vec<Command> {
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

    pub(super) fn ask_resolve(&mut self, all: bool) -> Vec<Command> {
        let Some(activity) = self.write_on(
            &[View::Compensation],
            "resolve",
            "resolve: press r or R on the Compensation view (4)",
        ) else {
            return Vec::new();
        };
        let (which, lines) = if all {
            // Counted whole by the database first: the feed is capped, the queue is not.
            let seq = self.seq();
            self.dialog = Some(Dialog::Working {
                title: "Resolve compensation".into(),
                detail: format!("counting the pending entries of {activity}; nothing is written"),
                seq,
                since: self.now,
                then: Some(PendingWrite::Resolve {
                    activity: activity.clone(),
                    which: Which::All,
                }),
            });
            return vec![Command::CountPending { seq, activity }];
        } else {
            let Some(c) = self.views.compensation.selected() else {
                let why = self.no_row(View::Compensation, "entry");
                self.flash(why, true);
                return Vec::new();
            };
            if !c.is_pending() {
                let text = format!("{} is already {}", c.request_id, c.status);
                self.flash(text, false);
                return Vec::new();
            }
            (
                Which::One(c.request_id.clone()),
                vec![format!(
                    "Resolve request {} ({} x{}, user {})?",
                    c.request_id, c.product_id, c.quantity, c.user_id
                )],
            )
        };
        self.confirm_resolve(activity, which, lines);
        Vec::new()
    }

    /// The count of "resolve every pending entry" has arrived: ask for exactly those entries.
    pub(super) fn pending_counted(&mut self, seq: u64, result: Result<(i64, Option<i64>), Error>) {
        let activity = match &self.dialog {
            Some(Dialog::Working {
                seq: s,
                then: Some(PendingWrite::Resolve { activity, .. }),
                ..
            }) if *s == seq => activity.clone(),
            _ => return, // the operator closed the dialog meanwhile
        };
        match result {
            Err(e) => {
                self.dialog = Some(message("Counting failed", vec![e.message], true));
            }
            Ok((0, _)) | Ok((_, None)) => {
                self.dialog = None;
                self.flash("no pending compensation entries", false);
            }
            Ok((count, Some(newest))) => {
                let lines = vec![
                    format!(
                        "Resolve all {} pending entries of {activity}?",
                        super::widgets::columns::grouped(count)
                    ),
                    format!(
                        "Exactly those (up to entry #{newest}): entries that arrive meanwhile are left for the next look."
                    ),
                ];
                self.confirm_resolve(activity, Which::UpTo(newest), lines);
            }
        }
    }

    fn confirm_resolve(&mut self, activity: ActivityId, which: Which, lines: Vec<String>) {
        let mut lines = lines;
        lines.push(String::new());
        lines.push("The ledger and the orders decide: applied, returned (the stock goes".into());
        lines.push("back through restore.lua) or not applied. Every resolution is audited.".into());
        self.dialog = Some(Dialog::Confirm(Confirm::ask(
            "Resolve compensation?   Enter resolve   Esc cancel",
            lines,
            PendingWrite::Resolve { activity, which },
        )));
    }

    pub(super) fn resolved(
        &mut self,
        seq: u64,
        result: Result<ResolveReport, Error>,
    ) -> Vec<Command> {
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

    /// Pause or resume: the highlighted product (resumed if paused), or with `all` the whole
    /// activity (resumed if every product is paused), after a dialog.
    pub(super) fn ask_pause(&mut self, all: bool) -> Vec<Command> {
        self.ask_pause_or_resume(all, false)
    }

    /// `U`: resume every paused product of the activity (`Z` only pauses, so that resuming
    /// many never means pausing all first).
    pub(super) fn ask_resume_all(&mut self) -> Vec<Command> {
        self.ask_pause_or_resume(true, true)
    }

    fn ask_pause_or_resume(&mut self, all: bool, resume_all: bool) -> Vec<Command> {
        let Some(activity) = self.write_on(
            &[View::Stock],
            "pause",
            "pause: press z, Z or U on the Stock view (2)",
        ) else {
            return Vec::new();
        };
        let (product, pause) = if all {
            let (paused, total) = self.stock.report().map_or((0, 0), |r| {
                (
                    r.products.iter().filter(|p| p.paused).count(),
                    r.products.len(),
                )
            });
            if resume_all && paused == 0 {
                self.flash(format!("no product of {activity} is paused"), false);
                return Vec::new();
            }
            if !resume_all && total > 0 && paused == total {
                self.flash(
                    format!("every product of {activity} is paused already: U resumes them all"),
                    false,
                );
                return Vec::new();
            }
            (None, !resume_all)
        } else {
            match self.selected_product() {
                None => {
                    let why = self.no_row(self.view, "product");
                    self.flash(why, true);
                    return Vec::new();
                }
                Some(p) => (Some(p.product.clone()), !p.paused),
            }
        };
        let verb = if pause { "Pause" } else { "Resume" };
        let lines = if pause {
            vec![
                "Every deduction then answers -5 (paused): nothing sells until it is resumed."
                    .into(),
                "Returns of earlier sales still give their units back. Audited.".into(),
            ]
        } else {
            vec!["Deductions sell again from the stock Redis holds. Audited.".into()]
        };
        let (title, typed) = match &product {
            Some(p) => (
                format!(
                    "{verb} {p} of {activity}?   Enter {}   Esc cancel",
                    verb.to_lowercase()
                ),
                None,
            ),
            None => (
                format!("{verb} every product of {activity}? Type the activity id and Enter"),
                Some(activity.to_string()),
            ),
        };
        self.dialog = Some(Dialog::Confirm(
            Confirm::typed(
                title,
                lines,
                PendingWrite::Pause {
                    activity,
                    product,
                    pause,
                    reason: String::new(),
                },
                typed,
            )
            .with_reason(),
        ));
        Vec::new()
    }

    /// The top-up form for the highlighted product of the Stock view.
    pub(super) fn open_topup_form(&mut self) -> Vec<Command> {
        let Some(activity) = self.write_on(
            &[View::Stock],
            "top up",
            "top up: press t on the Stock view (2)",
        ) else {
            return Vec::new();
        };
        let Some(product) = self.selected_product().map(|p| p.product.clone()) else {
            let why = self.no_row(self.view, "product");
            self.flash(why, true);
            return Vec::new();
        };
        self.dialog = Some(Dialog::TopupForm {
            activity,
            product,
            input: String::new(),
            error: None,
            refused: None,
        });
        Vec::new()
    }

    /// What the top-up form knows of `product`, from the last status read.
    pub fn topup_figures(&self, product: &str) -> Option<topup_form::Figures> {
        let r = self.stock.report()?;
        let p = r.products.iter().find(|p| p.product == product)?;
        Some(topup_form::Figures::of(p))
    }

    /// Enter in the top-up form: a whole number other than 0 goes on to the confirmation.
    pub(super) fn submit_topup_form(&mut self) {
        let Some(Dialog::TopupForm {
            activity,
            product,
            input,
            error,
            refused,
        }) = &mut self.dialog
        else {
            return;
        };
        if refused.is_some() {
            return;
        }
        let add = match topup_form::units(input) {
            Some(n) if n != 0 => n,
            _ => {
                *error = Some(format!(
                    "'{input}' is not a whole number of units other than 0"
                ));
                return;
            }
        };
        let (activity, product) = (activity.clone(), product.clone());
        let figures = self.topup_figures(&product);
        let mut lines = vec![
            format!(
                "The database's initial_stock and the Redis stock of {product} move by {}",
                crate::tui::widgets::columns::signed(add)
            ),
            "together while buyers deduct; a cut never goes below what is sold or in flight."
                .into(),
            "Audited with the initial stock before and after.".into(),
        ];
        if let Some(f) = &figures {
            if let Err(why) = topup_form::range(add, f) {
                if let Some(Dialog::TopupForm { error, .. }) = &mut self.dialog {
                    *error = Some(why);
                }
                return;
            }
            lines.push(String::new());
            lines.extend(topup_form::before_after(add, f));
        }
        self.dialog = Some(Dialog::Confirm(
            Confirm::ask(
                format!(
                    "Top up {product} of {activity} by {}?   Enter top up   Esc cancel",
                    crate::tui::widgets::columns::signed(add)
                ),
                lines,
                PendingWrite::Topup {
                    activity,
                    product,
                    add,
                    reason: String::new(),
                },
            )
            .with_reason(),
        ));
    }

    pub(super) fn topup_done(
        &mut self,
        seq: u64,
        result: Result<TopupReport, Error>,
    ) -> Vec<Command> {
        match result {
            Ok(r) => {
                let shown =
                    |s: Option<i64>| s.map_or_else(|| "(no key)".to_string(), |s| s.to_string());
                let mut lines = vec![
                    format!("initial stock {} -> {}", r.initial_before, r.initial_after),
                    format!(
                        "Redis stock   {} -> {}",
                        shown(r.redis_before),
                        shown(r.redis_after)
                    ),
                ];
                lines.extend(r.note.clone());
                self.finish(
                    seq,
                    format!("Top-up of {} by {:+} done", r.product, r.change),
                    lines,
                    false,
                );
            }
            Err(e) => self.finish(
                seq,
                format!("Top-up failed: {}", e.message),
                vec![e.message],
                true,
            ),
        }
        vec![Command::RefreshNow]
    }

    pub(super) fn pause_done(
        &mut self,
        seq: u64,
        result: Result<PauseReport, Error>,
    ) -> Vec<Command> {
        match result {
            Ok(r) => {
                // Each outcome counted apart: "2000 done" once counted products that were
                // already so.
                let changed = r
                    .products
                    .iter()
                    .filter(|p| p.error.is_none() && p.changed)
                    .count();
                let same = r.products.len() - changed - r.errors;
                let mut title = format!(
                    "{}: {} {}d, {} already so",
                    r.action,
                    grouped(changed),
                    r.action,
                    grouped(same)
                );
                if r.errors > 0 {
                    title.push_str(&format!(", {} could not be changed", grouped(r.errors)));
                }
                let lines = r
                    .products
                    .iter()
                    .map(|p| match &p.error {
                        Some(e) => format!("{:<24} error: {e}", p.product),
                        // What its note adds (a pause set by hand lifted) is said, as in the
                        // text output.
                        None => format!("{:<24} {}", p.product, p.result(r.action)),
                    })
                    .collect();
                self.finish(seq, title, lines, r.errors > 0);
            }
            Err(e) => self.finish(
                seq,
                format!("Pause failed: {}", e.message),
                vec![e.message],
                true,
            ),
        }
        vec![Command::RefreshNow]
    }

    pub(super) fn ask_preheat(&mut self, force: bool) -> Vec<Command> {
        let Some(activity) = self.write_on(
            &[View::Preheat],
            "preheat",
            "preheat: press p on the Preheat view (6)",
        ) else {
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
            // What it will rewrite, as the last gate of this activity found it.
            let conflicts = match &self.views.preheat.report {
                Some((id, Ok(r))) if *id == activity => Some(&r.conflicts),
                _ => None,
            };
            lines.push(String::new());
            match conflicts {
                Some(c) if !c.is_empty() => {
                    lines.push(format!(
                        "The last gate found {} product(s) whose keys it rewrites:",
                        c.len()
                    ));
                    for c in c.iter() {
                        lines.push(format!(
                            "  {}: stock {} -> {}, limit {} -> {}",
                            c.product,
                            c.redis_stock.as_deref().unwrap_or("missing"),
                            c.wanted_stock,
                            c.redis_limit.map_or_else(|| "-".into(), |l| l.to_string()),
                            c.wanted_limit
                        ));
                    }
                    lines.push("(a product that changed since is rewritten too)".into());
                }
                Some(_) => lines
                    .push("The last gate found no conflicting key: --force changes nothing more.".into()),
                None => lines.push(
                    "Which keys conflict is not known yet: p runs the gate without --force and lists them."
                        .into(),
                ),
            }
            (
                format!("Preheat {activity} --force? Type the activity id and Enter"),
                Some(activity.to_string()),
            )
        } else {
            lines.push(
                "Keys that hold other values make it a no-go; nothing is overwritten.".into(),
            );
            (
                format!("Preheat {activity}?   Enter run   Esc cancel"),
                None,
            )
        };
        self.dialog = Some(Dialog::Confirm(Confirm::typed(
            title,
            lines,
            PendingWrite::Preheat { activity, force },
            typed,
        )));
        Vec::new()
    }

    pub(super) fn preheat_done(
        &mut self,
        seq: u64,
        result: Result<PreheatReport, Error>,
    ) -> Vec<Command> {
        let Some(run) = self.views.preheat.run.take_if(|r| r.seq == seq) else {
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
        self.views.preheat.report = Some((run.activity, result));
        self.views.preheat.reported_at = Some(self.now);
        self.clamp(View::Preheat);
        vec![Command::RefreshNow]
    }
}

fn message(title: &str, lines: Vec<String>, error: bool) -> Dialog {
    Dialog::Message {
        title: title.to_string(),
        lines,
        error,
        scroll: 0,
    }
}
