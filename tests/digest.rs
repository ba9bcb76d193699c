//! The morning digest, end to end: a sim sweep writes it into the store when it ends,
//! `nightshift digest` renders it on demand, and a real headless browser (Debian's
//! `chromium`) draws the HTML page; the screenshot must show the 3-way table's rows.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nightshift"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn sweep(store: &Path) {
    let out = bin()
        .args([
            "run",
            "examples/iso-vllm.toml",
            "--runtime",
            "sim",
            "--headless",
        ])
        .args(["--speed", "max", "--seed", "7", "--store"])
        .arg(store)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("digest written to"), "{stdout}");
}

fn chromium() -> Option<PathBuf> {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(o) = Command::new("which").arg(c).output() {
            if o.status.success() {
                return Some(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
            }
        }
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "CI=true and chromium is not installed: the digest screenshot test cannot run"
    );
    None
}

/// A headless browser's screenshot of `html` at `size` (`W,H`), under the test target's
/// tmp dir; None (SKIP printed) without chromium, outside CI.
fn screenshot(html: &Path, name: &str, size: &str) -> Option<PathBuf> {
    let Some(chromium) = chromium() else {
        eprintln!("SKIP: chromium is not installed");
        return None;
    };
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join(name);
    let _ = std::fs::remove_file(&shot);
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--window-size={size}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(shot)
}

/// The decoded RGB(A) pixels of a PNG: (width, height, samples per pixel, rows).
fn pixels(png_path: &Path) -> (usize, usize, usize, Vec<Vec<u8>>) {
    let dec = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let rows = (0..info.height as usize)
        .map(|y| buf[y * info.line_size..(y + 1) * info.line_size].to_vec())
        .collect();
    (
        info.width as usize,
        info.height as usize,
        info.color_type.samples(),
        rows,
    )
}

/// Horizontal runs of the table border's colour at least `min` pixels long, one per pixel
/// row: with `border-collapse`, each table row boundary draws one such line.
fn border_lines(png_path: &Path, rgb: [u8; 3], min: usize) -> usize {
    let dec = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let mut lines = 0;
    for y in 0..info.height as usize {
        let row = &buf[y * info.line_size..(y + 1) * info.line_size];
        let (mut run, mut best) = (0, 0);
        for x in 0..info.width as usize {
            let p = &row[x * px..x * px + 3];
            run = if p == rgb { run + 1 } else { 0 };
            best = best.max(run);
        }
        if best >= min {
            lines += 1;
        }
    }
    lines
}

#[test]
fn the_sweep_writes_the_digest_and_a_browser_draws_its_table() {
    let store = tempfile::tempdir().unwrap();
    sweep(store.path());
    let md = std::fs::read_to_string(store.path().join("digest.md")).unwrap();
    for h in [
        "# Morning digest: iso-vllm",
        "## The 3-way table",
        "## Failures by category",
        "## GPU-hours by outcome",
        "## Waiting for a decision (0)",
    ] {
        assert!(md.contains(h), "missing {h}");
    }
    // The seed night's known failures show with their deciding lines.
    assert!(md.contains("### image_not_found"), "{md}");

    // On demand, from the store, the same page.
    let out = bin()
        .args(["digest", "--format", "html", "--store"])
        .arg(store.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains("<table id=\"threeway\">"));
    let rows = page
        .split("<table id=\"threeway\">")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap()
        .matches("<tr>")
        .count();
    assert!(rows > 40, "{rows} rows in the 3-way table");
    let bad = bin()
        .args(["digest", "--format", "pdf", "--store"])
        .arg(store.path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));

    let html = store.path().join("digest.html");
    let Some(shot) = screenshot(&html, "digest.png", "1400,2400") else {
        return;
    };
    // Straight to the terminal, past the test harness's capture: where to look.
    let _ = writeln!(std::io::stderr(), "digest screenshot: {}", shot.display());
    // The table is drawn: many long horizontal lines in its border colour.
    let lines = border_lines(&shot, [0xb8, 0xc2, 0xd6], 300);
    assert!(
        lines >= 30,
        "only {lines} table row borders in {}",
        shot.display()
    );
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

#[test]
fn results_html_draws_the_delta_chart_with_whiskers() {
    let tmp = tempfile::tempdir().unwrap();
    // Three repeats a side, so comparisons have intervals to draw.
    let plan = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/iso-vllm.toml"),
    )
    .unwrap()
    .replace("repeats = 1\n", "repeats = 3\n");
    let plan_path = tmp.path().join("plan.toml");
    std::fs::write(&plan_path, plan).unwrap();
    let store = tmp.path().join("store");
    let out = bin()
        .args(["run"])
        .arg(&plan_path)
        .args([
            "--runtime",
            "sim",
            "--headless",
            "--speed",
            "max",
            "--seed",
            "7",
            "--store",
        ])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = bin()
        .args(["results", "--format", "html", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(page.contains("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"delta\""));
    assert!(page.contains("class=\"outcomes\""));
    let html = tmp.path().join("results.html");
    std::fs::write(&html, &page).unwrap();
    let Some(shot) = screenshot(&html, "results.png", "1400,1600") else {
        return;
    };
    let _ = writeln!(std::io::stderr(), "results screenshot: {}", shot.display());
    let (w, h, px, rows) = pixels(&shot);
    let at = |x: usize, y: usize| &rows[y][x * px..x * px + 3];
    // The zero line: one column mostly of its colour (whiskers cross it here and there).
    let zero = rgb("#7048e8");
    let tallest = (0..w)
        .map(|x| (0..h).filter(|&y| at(x, y) == zero).count())
        .max()
        .unwrap_or(0);
    assert!(
        tallest >= 400,
        "zero line only {tallest} px in {}",
        shot.display()
    );
    // Whiskers: horizontal runs of a verdict colour wider than the Δ marker (8 px).
    let colours = ["#1c7c54", "#c92a2a", "#5c7cfa", "#f08c00"].map(rgb);
    let whiskers = (0..h)
        .filter(|&y| {
            colours.iter().any(|c| {
                let (mut run, mut best) = (0, 0);
                for x in 0..w {
                    run = if at(x, y) == c { run + 1 } else { 0 };
                    best = best.max(run);
                }
                best > 12
            })
        })
        .count();
    assert!(
        whiskers >= 10,
        "only {whiskers} whisker rows in {}",
        shot.display()
    );
}
