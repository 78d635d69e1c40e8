//! End-to-end tests against real redis-server processes (standalone and a 3-primary cluster)
//! and real databases (SQLite always; PostgreSQL and MariaDB when configured). One test binary,
//! so the suite links once.

mod harness;

mod acl;
mod activity_cli;
mod at_rest;
mod buyers;
mod chaos;
mod clients;
mod contract;
mod controls;
mod demo;
mod drills;
mod environment;
mod eviction;
mod exporter;
mod held_back;
mod integers;
mod lifecycle;
mod live_sale;
mod live_truth;
mod lua_contract;
mod malformed;
mod model;
mod one_truth;
mod operators;
mod order_sums;
mod partial_loss;
mod peers;
mod preflight;
mod preheat;
mod queue_order;
mod quiet;
mod read_only;
mod reconcile;
mod reshard;
mod security;
mod sentinel;
mod soak;
mod tui;
mod unreachable;
mod vectors;
mod watch_drill;
mod watch_pages;
mod worker;
