//! Progress on the terminal for long headless work: one line on stderr, redrawn at most ten
//! times a second, only when stderr is a terminal (never in pipes or logs).

use seckill_console::ops::progress::{Progress, SettleGauge};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct TerminalProgress {
    /// What runs ("preheat", "cleanup"): the line starts with it, so an operator who glances at
    /// the terminal knows which command is working.
    label: String,
    enabled: bool,
    last: Mutex<Option<(Instant, String)>>,
}

impl TerminalProgress {
    pub fn new(label: &str) -> Self {
        TerminalProgress {
            label: label.to_string(),
            enabled: std::io::stderr().is_terminal(),
            last: Mutex::new(None),
        }
    }
}

impl Progress for TerminalProgress {
    fn update(&self, stage: &str, done: usize, total: usize) {
        if !self.enabled {
            return;
        }
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let finished = done >= total;
        let same_stage = last.as_ref().is_some_and(|(_, s)| s == stage);
        if same_stage
            && !finished
            && last
                .as_ref()
                .is_some_and(|(t, _)| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r\x1b[2K{}",
            line(&self.label, stage, done, total, pct)
        );
        if finished {
            let _ = writeln!(err);
        }
        let _ = err.flush();
        *last = Some((Instant::now(), stage.to_string()));
    }
}

impl Drop for TerminalProgress {
    fn drop(&mut self) {
        if self.enabled
            && let Ok(last) = self.last.lock()
            && last.is_some()
        {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

/// A settle from scratch's progress (status and reconcile of an activity without valid
/// checkpoints read every event and live order once): redrawn four times a second while the
/// settle runs, only when stderr is a terminal. Dropping it clears the line.
pub struct SettleLine {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl SettleLine {
    /// Starts the line for `gauge` under `label`; a no-op off a terminal.
    pub fn start(label: &str, gauge: &SettleGauge) -> Self {
        if !std::io::stderr().is_terminal() {
            return SettleLine { task: None };
        }
        let (label, gauge) = (label.to_string(), gauge.clone());
        let task = tokio::spawn(async move {
            let mut shown = false;
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let mut err = std::io::stderr();
                match gauge.percent() {
                    Some(pct) => {
                        let _ = write!(err, "\r\x1b[2K{}", settle_text(&label, pct));
                        shown = true;
                    }
                    None if shown => {
                        let _ = write!(err, "\r\x1b[2K");
                        shown = false;
                    }
                    None => continue,
                }
                let _ = err.flush();
            }
        });
        SettleLine { task: Some(task) }
    }
}

impl Drop for SettleLine {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

/// `status: settling the books from scratch (every event and live order once): 42% read`.
fn settle_text(label: &str, pct: u8) -> String {
    format!(
        "{label}: settling the books from scratch (every event and live order once): {pct}% read"
    )
}

/// The progress line: `preheat: verify: 120/500 (24%)`.
fn line(label: &str, stage: &str, done: usize, total: usize, pct: usize) -> String {
    format!("{label}: {stage}: {done}/{total} ({pct}%)")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_settle_line_names_the_command_and_the_share_read() {
        assert_eq!(
            super::settle_text("reconcile", 42),
            "reconcile: settling the books from scratch (every event and live order once): 42% read"
        );
    }

    #[test]
    fn the_line_names_the_command_and_the_stage() {
        assert_eq!(
            super::line("preheat", "verify", 120, 500, 24),
            "preheat: verify: 120/500 (24%)"
        );
    }
}
