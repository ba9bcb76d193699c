//! The results text kept between reads: each commit's rendered rows and its share of the
//! summary, with what they were made from. A read checks each commit's inputs (its runs as
//! stored, the judge, the build) and the noise bands its verdicts could consult, rebuilds
//! only the commits where one changed, and hands those back to be kept. The text is the
//! same as [`super::render_table`] (or `render_md`) of [`super::build`] over the same runs
//! (tested); at 10,000 runs a read with nothing changed is string concatenation.

use super::render::{md_row, render_summary, table_row, MD_HEAD};
use super::share::Share;
use super::{by_commit, commit_row, comparable, learn_from, repeat_groups, with_calibration};
use super::{Group, Options, Summary};
use crate::record::RunDoc;
use crate::stats::{band, Calibration};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use xxhash_rust::xxh3::Xxh3;

/// Which text the rows are: the terminal table or the Markdown (the default `results`
/// and the one pasted into a PR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    Table,
    Markdown,
}

impl Text {
    /// Its `--format` name, and the name it is kept under.
    pub fn name(self) -> &'static str {
        match self {
            Text::Table => "table",
            Text::Markdown => "md",
        }
    }
    fn head(self) -> &'static str {
        match self {
            Text::Table => "",
            Text::Markdown => MD_HEAD,
        }
    }
    fn row(self, row: &super::CommitRow, summary: &Summary) -> String {
        match self {
            Text::Table => table_row(row, summary),
            Text::Markdown => md_row(row, summary),
        }
    }
    fn tail(self, summary: &Summary) -> String {
        render_summary(summary, self == Text::Markdown)
    }
}

/// One commit's part of the text, as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Materialised {
    /// The fingerprint of what it was made from ([`inputs_of`]).
    pub inputs: u64,
    /// The fingerprint of the bands of its cells' size classes when it was made.
    pub bands: u64,
    pub classes: Vec<String>,
    /// What it lends to the learned bands.
    pub groups: Vec<Group>,
    pub share: Share,
    /// Its part of the text.
    pub text: String,
}

impl Materialised {
    /// As kept: the length of a JSON header, the header, then the text as is (JSON
    /// would escape every newline and make each read unescape it).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let head = Head {
            inputs: self.inputs,
            bands: self.bands,
            classes: &self.classes,
            groups: self
                .groups
                .iter()
                .map(|(m, c, v)| {
                    (
                        m.as_str(),
                        c.as_str(),
                        v.iter().map(|x| x.to_bits()).collect(),
                    )
                })
                .collect(),
            share: &self.share,
            text: xxhash_rust::xxh3::xxh3_64(self.text.as_bytes()),
        };
        let head = serde_json::to_vec(&head).unwrap_or_default();
        let mut out = Vec::with_capacity(4 + head.len() + self.text.len());
        out.extend_from_slice(&(head.len() as u32).to_be_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(self.text.as_bytes());
        out
    }

    /// None for anything not written by [`Materialised::to_bytes`] (torn, or another format).
    pub(crate) fn from_bytes(b: &[u8]) -> Option<Materialised> {
        let len = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let head: OwnedHead = serde_json::from_slice(b.get(4..4 + len)?).ok()?;
        let text = b.get(4 + len..)?;
        if xxhash_rust::xxh3::xxh3_64(text) != head.text {
            return None;
        }
        let text = std::str::from_utf8(text).ok()?.to_string();
        Some(Materialised {
            inputs: head.inputs,
            bands: head.bands,
            classes: head.classes,
            groups: head
                .groups
                .into_iter()
                .map(|(m, c, v)| (m, c, v.into_iter().map(f64::from_bits).collect()))
                .collect(),
            share: head.share,
            text,
        })
    }
}

#[derive(Serialize)]
struct Head<'a> {
    inputs: u64,
    bands: u64,
    classes: &'a [String],
    /// Values as their bits: JSON's decimal text does not read back every `f64` exactly,
    /// and the bands learned from them must be the bands the rows were made with.
    groups: Vec<(&'a str, &'a str, Vec<u64>)>,
    share: &'a Share,
    /// The digest of the text that follows.
    text: u64,
}

#[derive(Deserialize)]
struct OwnedHead {
    inputs: u64,
    bands: u64,
    classes: Vec<String>,
    groups: Vec<(String, String, Vec<u64>)>,
    share: Share,
    text: u64,
}

/// One commit to show, in order: the fingerprint of its inputs now, and what was kept.
pub struct Pending {
    pub inputs: u64,
    pub kept: Option<Materialised>,
}

pub struct Read {
    pub text: String,
    /// The entries this read rebuilt, by index into the commits: to keep for the next.
    pub rebuilt: Vec<(usize, Materialised)>,
}

/// The fingerprint of a commit's inputs: `salt` (the build that renders), the text, the
/// judge, and each run's stored bytes (their digests, in plan order).
pub(crate) fn inputs_of(
    salt: u64,
    text: Text,
    opts: &Options,
    runs: impl IntoIterator<Item = u64>,
) -> u64 {
    let mut h = Xxh3::new();
    h.update(&salt.to_le_bytes());
    h.update(text.name().as_bytes());
    for x in [
        opts.stats.alpha,
        opts.stats.min_effect_pct,
        opts.stats.uncalibrated_pct,
        opts.token_share,
    ] {
        h.update(&x.to_bits().to_le_bytes());
    }
    for s in &opts.drifts {
        h.update(s.key.as_bytes());
        h.update(&s.delta_pct.to_bits().to_le_bytes());
    }
    for d in runs {
        h.update(&d.to_le_bytes());
    }
    h.digest()
}

/// The fingerprint of the bands a row of these size classes could consult.
fn bands_of(bands: &Calibration, classes: &[String], memo: &mut HashMap<String, u64>) -> u64 {
    let mut h = Xxh3::new();
    for class in classes {
        let one = *memo.entry(class.clone()).or_insert_with(|| {
            let mut h = Xxh3::new();
            let suffix = format!("@{class}");
            for (k, b) in bands.bands.iter().filter(|(k, _)| k.ends_with(&suffix)) {
                h.update(k.as_bytes());
                h.update(&b.sigma.to_bits().to_le_bytes());
                h.update(&(b.groups as u64).to_le_bytes());
                h.update(&(b.runs as u64).to_le_bytes());
                h.update(b.source.as_bytes());
            }
            h.digest()
        });
        h.update(&one.to_le_bytes());
    }
    h.digest()
}

/// The text over `pending` commits, rebuilding what is stale; `load(i)` reads commit `i`'s
/// runs (in plan order) and is called only for those.
pub fn read<F>(text: Text, pending: Vec<Pending>, load: F, opts: &Options) -> Read
where
    F: Fn(usize) -> Vec<RunDoc> + Sync,
{
    use rayon::prelude::*;
    let inputs: Vec<u64> = pending.iter().map(|p| p.inputs).collect();
    let mut kept: Vec<Option<Materialised>> = pending
        .into_iter()
        .map(|p| p.kept.filter(|m| m.inputs == p.inputs))
        .collect();
    let mut docs: Vec<Option<Vec<RunDoc>>> = kept
        .par_iter()
        .enumerate()
        .map(|(i, k)| k.is_none().then(|| load(i)))
        .collect();
    // The bands come from every commit's repeats: kept ones lend theirs as kept.
    let stale_groups: Vec<Option<Vec<Group>>> = docs
        .par_iter()
        .map(|d| d.as_ref().map(|d| groups_in(d)))
        .collect();
    let groups = kept
        .iter()
        .zip(&stale_groups)
        .flat_map(|(k, g)| match (k, g) {
            (Some(m), _) => m.groups.iter(),
            (None, Some(g)) => g.iter(),
            (None, None) => [].iter(),
        });
    let bands = with_calibration(learn_from(groups), opts);
    // A kept row whose size classes' bands moved is stale too (a new repeat can move a
    // band under thousands of rows: their runs are read on every core).
    let mut memo = HashMap::new();
    let moved: Vec<usize> = kept
        .iter_mut()
        .enumerate()
        .filter_map(|(i, k)| {
            let stale = k
                .as_ref()
                .is_some_and(|m| m.bands != bands_of(&bands, &m.classes, &mut memo));
            stale.then(|| {
                *k = None;
                i
            })
        })
        .collect();
    let reread: Vec<(usize, Vec<RunDoc>)> = moved.into_par_iter().map(|i| (i, load(i))).collect();
    for (i, d) in reread {
        docs[i] = Some(d);
    }
    let mut summary = Summary::of(opts, kept.len());
    let level = 1.0 - opts.stats.alpha;
    // Stale rows' groups are already known; rows whose bands moved learn theirs again.
    let rebuilt: Vec<(usize, Materialised)> = docs
        .into_par_iter()
        .zip(stale_groups)
        .enumerate()
        .filter_map(|(i, (d, g))| Some((i, d?, g)))
        .map_init(comparable::CommandFacts::default, |cache, (i, d, g)| {
            let refs: Vec<&RunDoc> = d.iter().collect();
            let m = match by_commit(&refs).into_iter().next() {
                Some((commit, title, groups)) => {
                    let row = commit_row(commit, title, &groups, level, opts, &bands, cache);
                    let mut classes: Vec<String> = row
                        .cells
                        .iter()
                        .map(|c| band::size_class(c.model.as_deref()).to_string())
                        .collect();
                    classes.sort();
                    classes.dedup();
                    Materialised {
                        inputs: inputs[i],
                        bands: bands_of(&bands, &classes, &mut HashMap::new()),
                        classes,
                        groups: g.unwrap_or_else(|| repeat_groups(&groups)),
                        share: Share::of(&groups, &row),
                        text: text.row(&row, &summary),
                    }
                }
                None => Materialised {
                    inputs: inputs[i],
                    bands: 0,
                    classes: Vec::new(),
                    groups: Vec::new(),
                    share: Share::default(),
                    text: String::new(),
                },
            };
            (i, m)
        })
        .collect();
    let mut rebuilt_at: Vec<Option<&Materialised>> = vec![None; kept.len()];
    for (i, m) in &rebuilt {
        rebuilt_at[*i] = Some(m);
    }
    let rows: Vec<&Materialised> = kept
        .iter()
        .zip(&rebuilt_at)
        .filter_map(|(k, r)| k.as_ref().or(*r))
        .collect();
    for m in &rows {
        m.share.add_to(&mut summary, &bands);
    }
    let (head, tail) = (text.head(), text.tail(&summary));
    let mut out = String::with_capacity(
        head.len() + rows.iter().map(|m| m.text.len()).sum::<usize>() + tail.len(),
    );
    out.push_str(head);
    for m in &rows {
        out.push_str(&m.text);
    }
    out.push_str(&tail);
    Read { text: out, rebuilt }
}

/// A commit's repeat groups from its runs in any order.
fn groups_in(docs: &[RunDoc]) -> Vec<Group> {
    let refs: Vec<&RunDoc> = docs.iter().collect();
    by_commit(&refs)
        .into_iter()
        .flat_map(|(_, _, g)| repeat_groups(&g))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Variant;
    use crate::report::tests::doc_with;
    use crate::report::{build, render_md, render_table};

    /// Commits c0..c5: c0–c1 with two repeats a variant (they teach the bands), the rest
    /// single runs (judged by those bands); c5 of another model size.
    fn night(bump: impl Fn(&str, &Variant, u32) -> f64) -> Vec<RunDoc> {
        let mut docs = Vec::new();
        for c in 0..6 {
            let commit = format!("c{c}");
            let repeats = if c < 2 { 3 } else { 1 };
            for v in [
                Variant::Baseline,
                Variant::Human,
                Variant::Agent("a".into()),
            ] {
                for r in 0..repeats {
                    let base = 100.0 + f64::from(c) + f64::from(r) * 1.5;
                    let tput = base * (1.0 + bump(&commit, &v, r));
                    let mut d = doc_with(
                        &commit,
                        v.clone(),
                        r,
                        "vllm bench serve",
                        &[("output_throughput_tok_s", tput), ("mean_ttft_ms", 50.0)],
                    );
                    if c == 5 {
                        let big = Some("org/m-70B".to_string());
                        d.info.model = big.clone();
                        if let Some(i) = d.attempts[0].info.as_mut() {
                            i.model = big;
                        }
                    }
                    docs.push(d);
                }
            }
        }
        docs
    }

    fn human_gain(commit: &str, v: &Variant, _: u32) -> f64 {
        if *v == Variant::Human && commit != "c0" {
            0.08
        } else {
            0.0
        }
    }

    /// Per commit in order: its docs and the fingerprint of their bytes.
    fn commits(docs: &[RunDoc]) -> Vec<(Vec<RunDoc>, u64)> {
        let mut out: Vec<(Vec<RunDoc>, u64)> = Vec::new();
        for d in docs {
            match out.last_mut() {
                Some((ds, _)) if ds[0].info.commit == d.info.commit => ds.push(d.clone()),
                _ => out.push((vec![d.clone()], 0)),
            }
        }
        for (ds, inputs) in &mut out {
            let digests = ds
                .iter()
                .map(|d| xxhash_rust::xxh3::xxh3_64(&serde_json::to_vec(d).unwrap()));
            *inputs = inputs_of(7, Text::Table, &Options::with_threshold(2.0), digests);
        }
        out
    }

    fn read_as(text: Text, docs: &[RunDoc], kept: &[Option<Materialised>]) -> Read {
        let cs = commits(docs);
        let pending = cs
            .iter()
            .zip(kept)
            .map(|((_, inputs), k)| Pending {
                inputs: *inputs,
                kept: k.clone(),
            })
            .collect();
        read(
            text,
            pending,
            |i| cs[i].0.clone(),
            &Options::with_threshold(2.0),
        )
    }

    fn full(docs: &[RunDoc]) -> String {
        let refs: Vec<&RunDoc> = docs.iter().collect();
        render_table(&build(&refs, &Options::with_threshold(2.0)))
    }

    fn read_with(docs: &[RunDoc], kept: &[Option<Materialised>]) -> Read {
        read_as(Text::Table, docs, kept)
    }

    fn keep(t: Read, n: usize) -> Vec<Option<Materialised>> {
        let mut kept = vec![None; n];
        for (i, m) in t.rebuilt {
            kept[i] = Some(m);
        }
        kept
    }

    #[test]
    fn a_kept_table_reads_as_the_full_report_and_rebuilds_only_what_changed() {
        let docs = night(human_gain);
        let want = full(&docs);
        assert!(want.contains("noise band"), "the bands are in use:\n{want}");
        let first = read_with(&docs, &vec![None; 6]);
        assert_eq!(first.text, want);
        assert_eq!(first.rebuilt.len(), 6);
        let kept = keep(first, 6);

        // Nothing changed: nothing rebuilt, the same text.
        let again = read_with(&docs, &kept);
        assert_eq!(again.text, want);
        assert!(again.rebuilt.is_empty());

        // One single run changed: only its commit is rebuilt.
        let moved = night(|c, v, r| human_gain(c, v, r) + if c == "c3" { 0.2 } else { 0.0 });
        let t = read_with(&moved, &kept);
        assert_eq!(t.text, full(&moved));
        assert_ne!(t.text, want);
        assert_eq!(t.rebuilt.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn when_the_learned_bands_move_the_rows_that_lean_on_them_are_rebuilt() {
        let docs = night(human_gain);
        let kept = keep(read_with(&docs, &vec![None; 6]), 6);
        // c1's repeats spread wider: the small-model band widens, so every small-model
        // row's verdicts may change; the 70B commit (c5) keeps its row.
        let noisier =
            night(|c, v, r| human_gain(c, v, r) + if c == "c1" && r == 2 { 0.1 } else { 0.0 });
        let t = read_with(&noisier, &kept);
        assert_eq!(t.text, full(&noisier));
        let mut rebuilt: Vec<usize> = t.rebuilt.iter().map(|(i, _)| *i).collect();
        rebuilt.sort();
        assert_eq!(rebuilt, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_kept_row_reads_back_and_a_torn_one_does_not() {
        let t = read_with(&night(human_gain), &vec![None; 6]);
        for (_, m) in &t.rebuilt {
            let b = m.to_bytes();
            assert_eq!(Materialised::from_bytes(&b).as_ref(), Some(m));
            assert_eq!(Materialised::from_bytes(&b[..b.len() / 2 + 3]), None);
        }
        assert_eq!(Materialised::from_bytes(b"{\"inputs\": 1"), None);
        assert_eq!(Materialised::from_bytes(&[0, 0, 0, 200, b'{']), None);
    }

    #[test]
    fn a_kept_row_of_other_inputs_is_not_reused() {
        let docs = night(human_gain);
        let mut kept = keep(read_with(&docs, &vec![None; 6]), 6);
        // Another commit's row kept under c2 (say, another judge): never shown for c2.
        kept[2] = kept[4].clone();
        let t = read_with(&docs, &kept);
        assert_eq!(t.text, full(&docs));
        assert_eq!(t.rebuilt.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn the_markdown_is_kept_the_same_way() {
        let docs = night(human_gain);
        let refs: Vec<&RunDoc> = docs.iter().collect();
        let want = render_md(&build(&refs, &Options::with_threshold(2.0)));
        let first = read_as(Text::Markdown, &docs, &vec![None; 6]);
        assert_eq!(first.text, want);
        let kept = keep(first, 6);
        let again = read_as(Text::Markdown, &docs, &kept);
        assert_eq!(again.text, want);
        assert!(again.rebuilt.is_empty());
    }
}
