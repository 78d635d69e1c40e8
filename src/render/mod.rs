//! Text renderings shared by the headless commands and the TUI: aligned plain-text tables and the
//! incident report as Markdown. Pure functions of the data; no I/O.

pub mod report;
pub mod table;
