//! Every labelled failure in the shared corpus (`../shared/corpus`, read by path, never
//! copied) is classified as labelled (or as one of its `alt_categories`), with evidence
//! equal to, or containing, the labelled line.

mod support;
use nightshift::diagnose::{diagnose_text, Catalog};

#[test]
fn corpus_failures_are_classified_as_labelled() {
    // One way to find the corpus (`support::corpus`: the nearest `shared/corpus`, or
    // `$NIGHTSHIFT_CORPUS`); in CI its absence is a failure, never a pass.
    let root = support::corpus();
    if !root.join("labels.json").is_file() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and the shared corpus is not at {}",
            root.display()
        );
        eprintln!("SKIP: shared corpus not found at {}", root.display());
        return;
    }
    let labels: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("labels.json")).unwrap()).unwrap();
    let catalog = Catalog::builtin();
    let mut total = 0;
    let mut categories_right = 0;
    let mut wrong = Vec::new();
    for case in labels.as_array().unwrap() {
        let file = case["file"].as_str().unwrap();
        if !file.starts_with("failures/") {
            continue;
        }
        total += 1;
        let want = case["category"].as_str().unwrap();
        let alts: Vec<&str> = case["alt_categories"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let evidence = case["evidence"].as_str().unwrap();
        let text = std::fs::read(root.join(file)).unwrap();
        let d = diagnose_text(&catalog, &text);
        let cat_ok = d.category.as_str() == want || alts.contains(&d.category.as_str());
        let ev_ok = d.evidence == evidence || d.evidence.contains(evidence);
        categories_right += usize::from(cat_ok);
        if !(cat_ok && ev_ok) {
            wrong.push(format!(
                "{file}: want {want} {alts:?} / {evidence:?}\n      got {} / {:?} (line {:?})",
                d.category, d.evidence, d.line_no
            ));
        }
    }
    eprintln!(
        "corpus: categories right {categories_right}/{total}, category and evidence right {}/{total}",
        total - wrong.len()
    );
    assert!(total >= 23, "expected the 23 failure cases, found {total}");
    assert!(
        wrong.is_empty(),
        "{}/{total} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
