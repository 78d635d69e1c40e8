//! Progress on the terminal for long headless work: one line on stderr, redrawn at most ten
//! times a second, only when stderr is a terminal (never in pipes or logs).

use seckill_console::ops::progress::Progress;
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

/// The progress line: `preheat: verify: 120/500 (24%)`.
fn line(label: &str, stage: &str, done: usize, total: usize, pct: usize) -> String {
    format!("{label}: {stage}: {done}/{total} ({pct}%)")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_line_names_the_command_and_the_stage() {
        assert_eq!(
            super::line("preheat", "verify", 120, 500, 24),
            "preheat: verify: 120/500 (24%)"
        );
    }
}
