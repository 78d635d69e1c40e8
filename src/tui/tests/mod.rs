//! Tests of the TUI without a terminal: snapshots of every view on a fixed-size TestBackend,
//! and the update logic driven by Actions.

mod columns;
mod dry_run;
mod events;
pub(super) mod fixtures;
mod names;
mod paging;
mod smaller;
mod snapshots;
mod update;
