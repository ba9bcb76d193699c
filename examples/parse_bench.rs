//! Parser benchmark until `nightshift bench parse` is wired:
//! `cargo run --release --example parse_bench -- 1024` (size in MiB).

fn main() -> anyhow::Result<()> {
    let size_mb = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    nightshift::bench::parse::run(size_mb, &mut std::io::stdout())
}
