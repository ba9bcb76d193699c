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

    let Some(chromium) = chromium() else {
        eprintln!("SKIP: chromium is not installed");
        return;
    };
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("digest.png");
    let _ = std::fs::remove_file(&shot);
    let html = store.path().join("digest.html");
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1400,2400",
        ])
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
