//! Progress of long operations, reported by stage; the CLI draws it on a terminal, the TUI as a
//! gauge.

/// Receives progress: `done` of `total` units of `stage`.
pub trait Progress: Send + Sync {
    fn update(&self, stage: &str, done: usize, total: usize);
}

impl<F: Fn(&str, usize, usize) + Send + Sync> Progress for F {
    fn update(&self, stage: &str, done: usize, total: usize) {
        self(stage, done, total)
    }
}

/// Progress that goes nowhere.
pub struct Silent;

impl Progress for Silent {
    fn update(&self, _: &str, _: usize, _: usize) {}
}
