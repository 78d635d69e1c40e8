//! `exporter`: the console's truth as Prometheus metrics. The poller fills [`metrics::Metrics`]
//! once per round and publishes its text on an [`http::Board`]; the server answers scrapes
//! from the board alone.

pub mod http;
pub mod metrics;
pub mod products;
