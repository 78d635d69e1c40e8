//! Log lines while the TUI owns the terminal: writing them to stderr would scribble over the
//! screen, so they are kept (the last [`KEEP`]) and printed once the terminal is restored.
//! Outside the TUI, lines go straight to stderr. `main` installs [`writer`] for tracing.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Lines kept while capturing.
pub const KEEP: usize = 200;

static CAPTURING: AtomicBool = AtomicBool::new(false);
static KEPT: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
static DROPPED: AtomicUsize = AtomicUsize::new(0);

/// Starts or stops keeping lines instead of writing them.
pub fn capture(on: bool) {
    CAPTURING.store(on, Ordering::SeqCst);
}

/// Keeps one line (while capturing) or writes it to stderr.
pub fn keep(line: String) {
    if !CAPTURING.load(Ordering::SeqCst) {
        let _ = writeln!(io::stderr(), "{line}");
        return;
    }
    if let Ok(mut kept) = KEPT.lock() {
        if kept.len() >= KEEP {
            kept.pop_front();
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        kept.push_back(line);
    }
}

/// The kept lines (and how many older ones were dropped), emptied.
pub fn take() -> (Vec<String>, usize) {
    let lines = KEPT
        .lock()
        .map(|mut k| k.drain(..).collect())
        .unwrap_or_default();
    (lines, DROPPED.swap(0, Ordering::Relaxed))
}

/// The tracing writer: stderr, or the kept lines while the TUI runs.
pub fn writer() -> LogSink {
    LogSink
}

/// See [`writer`].
pub struct LogSink;

impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !CAPTURING.load(Ordering::SeqCst) {
            return io::stderr().write(buf);
        }
        // tracing's formatter writes one whole event per call.
        for line in String::from_utf8_lossy(buf).lines() {
            if !line.trim().is_empty() {
                keep(line.to_string());
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}
