//! What the event stream costs the deduction (issue 10, Build 8), and what the sale window costs
//! it (issue 51): `redis-benchmark` running EVALSHA of `lua/deduct.lua` (which appends each sale
//! to the product's stream and checks the window against Redis's clock), of the deduction before
//! the stream (`tests/bench/baseline/deduct_v1.lua`) and of the deduction before the window
//! (`tests/bench/baseline/deduct_v2.lua`), on one private redis-server, in the same run,
//! alternating, three runs each, every product preheated with a window as preheat writes it:
//!
//! - the success path: a product with 10^9 units, random request and user ids;
//! - the sold-out path (by far the most common in a flash sale): a product with 0 units.
//!
//! Targets: success path at least 0.9x of the old script's rate; sold-out path at its rate
//! (at least 0.95x). Run with `scripts/bench deduct`; BENCH_REQUESTS changes the request count
//! per run (default 500,000).

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::RedisServer;
use harness::fixtures::product_keys;
use std::process::{Command, Stdio};

const V1: &str = include_str!("baseline/deduct_v1.lua");
const V2: &str = include_str!("baseline/deduct_v2.lua");
const NOW: &str = include_str!("../../lua/deduct.lua");

fn rate(server: &RedisServer, requests: usize, sha: &str, keys: &[&str]) -> f64 {
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", "127.0.0.1", "-p", &server.port.to_string()]);
    cmd.args([
        "-n",
        &requests.to_string(),
        "-P",
        "16",
        "-r",
        "100000000",
        "-q",
    ]);
    cmd.args(["EVALSHA", sha, &keys.len().to_string()]);
    cmd.args(keys);
    cmd.args(["req:__rand_int__", "user:__rand_int__", "1"]);
    let out = cmd.stderr(Stdio::null()).output().expect("redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    harness::redis_benchmark::rate(&text)
        .unwrap_or_else(|| panic!("cannot read redis-benchmark output: {text}"))
}

/// Redis's own time per EVALSHA since the last `CONFIG RESETSTAT` (INFO commandstats): the
/// script's cost on the server, steadier on a shared machine than the client's rate.
fn usec_per_call(server: &RedisServer) -> f64 {
    let info = server.cli(&["INFO", "commandstats"]);
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split("usec_per_call=").nth(1))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let requests: usize = std::env::var("BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    let server = RedisServer::start();
    let k = product_keys("bench", "item");
    let v1 = server.cli(&["SCRIPT", "LOAD", V1]).trim().to_string();
    let v2 = server.cli(&["SCRIPT", "LOAD", V2]).trim().to_string();
    let now = server.cli(&["SCRIPT", "LOAD", NOW]).trim().to_string();
    let old_keys = [
        k.stock.as_str(),
        k.meta.as_str(),
        k.buyers.as_str(),
        k.ledger.as_str(),
    ];
    let new_keys = k.script_keys();
    // A fresh product of `stock` units before each run, as preheat leaves it.
    let reset = |stock: &str| {
        server.cli(&["FLUSHALL"]);
        server.cli(&["CONFIG", "RESETSTAT"]);
        server.cli(&["SET", &k.stock, stock]);
        // The window preheat writes (ms): open since 1970, closing in 2100.
        server.cli(&[
            "HSET",
            &k.meta,
            "initial",
            stock,
            "limit",
            "1000",
            "opens",
            "1",
            "closes",
            "4102444800000",
        ]);
        server.cli(&["HSET", &k.buyers, "", "0"]);
        server.cli(&["HSET", &k.ledger, "", "-"]);
        server.cli(&["XADD", &k.events, "*", "a", "0|"]);
    };
    println!(
        "deduct.lua benchmark: redis-server {} (private), redis-benchmark -P 16, {requests} requests per run, 3 runs each, alternating",
        server.addr()
    );
    let mut results = Vec::new();
    for (path, stock) in [("success", "1000000000"), ("sold out", "0")] {
        let (mut before, mut windowless, mut after) = (Vec::new(), Vec::new(), Vec::new());
        let (mut us_windowless, mut us_after) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            reset(stock);
            before.push(rate(&server, requests, &v1, &old_keys));
            reset(stock);
            windowless.push(rate(&server, requests, &v2, &new_keys));
            us_windowless.push(usec_per_call(&server));
            reset(stock);
            after.push(rate(&server, requests, &now, &new_keys));
            us_after.push(usec_per_call(&server));
        }
        let (b, w, a) = (
            median(before.clone()),
            median(windowless.clone()),
            median(after.clone()),
        );
        let runs = |v: &[f64]| v.iter().map(|r| r.round()).collect::<Vec<_>>();
        println!(
            "{path:<9} before the stream (4 keys)   {b:>10.0}/s  runs {:?}",
            runs(&before)
        );
        println!(
            "{path:<9} before the window (5 keys)   {w:>10.0}/s  runs {:?}",
            runs(&windowless)
        );
        println!(
            "{path:<9} now (5 keys, XADD, window)   {a:>10.0}/s  runs {:?}",
            runs(&after)
        );
        let (uw, ua) = (median(us_windowless.clone()), median(us_after.clone()));
        println!(
            "{path:<9} now / before the window = {:.3}; Redis per call (INFO commandstats) {ua:.2} us against {uw:.2} us (runs {us_after:?} against {us_windowless:?})",
            a / w
        );
        results.push((path, a / b));
    }
    let mut all = true;
    for (path, ratio) in results {
        let target = if path == "success" { 0.9 } else { 0.95 };
        let ok = ratio >= target;
        all &= ok;
        println!(
            "{path}: now / before the stream = {ratio:.3} (target >= {target}: {})",
            if ok { "met" } else { "MISSED" }
        );
    }
    println!(
        "summary: {}",
        if all {
            "every target met"
        } else {
            "a target was MISSED"
        }
    );
}
