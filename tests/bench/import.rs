//! Import benchmark: `seckill-console activity import` of one file of 100,000 products (the
//! real binary, a fresh SQLite file each run, under /usr/bin/time: wall seconds and peak
//! resident memory), against the same import of a file of one product in the same run (what
//! the process costs whatever the file). Three runs of each, alternating; the median and the
//! range, and the memory per product above the one-product import. `BENCH_PRODUCTS` sets the
//! number of products; `BENCH_BASELINE=<another build's binary>` runs that binary on the same
//! files after each run of this one and prints the ratios. Run with `scripts/bench import`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// An import file of `n` products, as a shop's export would write it.
fn file(n: usize) -> String {
    let mut text = String::from(
        "[activity]\nid = \"bigimport\"\nname = \"Import benchmark\"\n\
         starts_at = 2030-01-01T10:00:00Z\nends_at = 2030-01-01T20:00:00Z\n",
    );
    for i in 0..n {
        let _ = write!(
            text,
            "\n[[products]]\nid = \"p{i:06}\"\nname = \"Product {i}\"\nstock = 100\nper_user_limit = 2\n"
        );
    }
    text
}

struct Run {
    wall: f64,
    peak_mb: f64,
}

/// One import of `path` into a new SQLite file by `bin`, under /usr/bin/time.
fn import(bin: &str, dir: &Path, path: &Path, tag: &str) -> Run {
    let db = dir.join(format!("{tag}.db"));
    let _ = std::fs::remove_file(&db);
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%e %M", bin, "--db"])
        .arg(format!("sqlite://{}", db.display()))
        .args(["activity", "import"])
        .arg(path)
        .output()
        .expect("/usr/bin/time seckill-console activity import");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{bin} activity import {}: {err}",
        path.display()
    );
    let mut f = err.lines().last().unwrap_or_default().split_whitespace();
    let wall = f.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    let kb: f64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    Run {
        wall,
        peak_mb: kb / 1024.0,
    }
}

/// The median and the range of `v`.
fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn show(what: &str, runs: &[Run]) -> (f64, f64) {
    let (wall, wlo, whi) = median(runs.iter().map(|r| r.wall).collect());
    let (mb, mlo, mhi) = median(runs.iter().map(|r| r.peak_mb).collect());
    println!("  {what:<34} {wall:.2} s ({wlo:.2}-{whi:.2}), peak {mb:.1} MB ({mlo:.1}-{mhi:.1})");
    (wall, mb)
}

fn main() {
    let n: usize = std::env::var("BENCH_PRODUCTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let baseline = std::env::var("BENCH_BASELINE")
        .ok()
        .filter(|b| !b.is_empty());
    let this = env!("CARGO_BIN_EXE_seckill-console");
    let dir = tempfile::tempdir().expect("temporary directory");
    let big = dir.path().join("big.toml");
    let one = dir.path().join("one.toml");
    std::fs::write(&big, file(n)).expect("write the import file");
    std::fs::write(&one, file(1)).expect("write the one-product file");
    let size = std::fs::metadata(&big).map_or(0, |m| m.len());
    println!(
        "import benchmark: {n} products ({:.1} MB of TOML), SQLite, 3 runs each",
        size as f64 / 1e6
    );
    let (mut runs, mut ones, mut before) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        ones.push(import(this, dir.path(), &one, "one"));
        runs.push(import(this, dir.path(), &big, "big"));
        if let Some(b) = &baseline {
            before.push(import(b, dir.path(), &big, "before"));
        }
    }
    let (_, one_mb) = show("one product (the process alone)", &ones);
    let (wall, mb) = show(&format!("{n} products"), &runs);
    println!(
        "  memory per product above one product's import: {:.0} bytes",
        (mb - one_mb) * 1024.0 * 1024.0 / n as f64
    );
    if !before.is_empty() {
        let (bwall, bmb) = show(&format!("{n} products, BENCH_BASELINE"), &before);
        println!(
            "  this / baseline: wall {:.3}, peak memory {:.3}",
            wall / bwall,
            mb / bmb
        );
    }
}
