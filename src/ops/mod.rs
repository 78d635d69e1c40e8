//! The use cases, shared by the headless commands and the TUI: each takes the connections and
//! returns a result the caller renders.

pub mod cleanup;
pub mod compensation;
pub mod conform;
pub mod detail;
pub mod exporter;
pub mod feed;
pub mod fix;
pub mod glance;
pub mod guard;
pub mod health;
pub mod import;
pub mod integrity;
pub mod listing;
pub mod memory_gate;
pub mod pause;
pub mod preheat;
pub mod progress;
pub mod quiet;
pub mod repair;
pub mod report;
pub mod rows;
pub mod snapshot;
pub mod status;
pub mod topup;
pub mod tracker;
pub mod watch;
