//! Pure rules and types: ids, activities, the import file, stock state, drift, alerts, the
//! preheat decision. No I/O here, so every rule is tested without Redis or a database.

pub mod activity;
pub mod alerts;
pub mod books;
pub mod breaches;
pub mod compensation;
pub mod contract_alerts;
pub mod digest;
pub mod events;
pub mod faults;
pub mod ids;
pub mod import;
pub mod meta;
pub mod migration;
pub mod order;
pub mod preheat;
pub mod rid_hash;
pub mod settle;
pub mod stock;
pub mod token;
pub mod zone;

pub use activity::{Activity, ActivityDef, Phase, Product, SaleWindow};
pub use ids::{ActivityId, ProductId};
