//! The order a commit's repeats run in.

use crate::model::Variant;
use sha2::{Digest, Sha256};

/// The order a commit's runs are measured in. One repeat: the variants in order. Several:
/// randomised blocks — each block holds one repeat of every variant, in an order shuffled by
/// a generator seeded from the commit hash — so drift over the night lands on all variants
/// alike, and the same plan always gives the same schedule.
pub fn schedule(commit: &str, variants: &[Variant], repeats: u32) -> Vec<(Variant, u32)> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    if repeats <= 1 {
        return variants.iter().map(|v| (v.clone(), 0)).collect();
    }
    let seed = Sha256::digest(commit.as_bytes());
    let mut rng = rand_chacha::ChaCha8Rng::from_seed(seed.into());
    let mut out = Vec::with_capacity(variants.len() * repeats as usize);
    for r in 0..repeats {
        let mut block: Vec<&Variant> = variants.iter().collect();
        block.shuffle(&mut rng);
        out.extend(block.into_iter().map(|v| (v.clone(), r)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vs() -> Vec<Variant> {
        vec![
            Variant::Baseline,
            Variant::Human,
            Variant::Agent("a".into()),
        ]
    }

    #[test]
    fn one_repeat_keeps_the_variant_order() {
        let s = schedule("abc", &vs(), 1);
        assert_eq!(s.iter().map(|x| x.0.clone()).collect::<Vec<_>>(), vs());
    }

    #[test]
    fn blocks_hold_every_variant_once_and_are_seeded_by_the_commit() {
        let s = schedule("3a243095e5e7", &vs(), 5);
        assert_eq!(s.len(), 15);
        for (r, block) in s.chunks(3).enumerate() {
            let mut got: Vec<Variant> = block.iter().map(|x| x.0.clone()).collect();
            assert!(block.iter().all(|x| x.1 == r as u32));
            got.sort_by_key(|v| v.order());
            assert_eq!(got, vs());
        }
        // Deterministic, and not always baseline first: the order is shuffled per block.
        assert_eq!(s, schedule("3a243095e5e7", &vs(), 5));
        let firsts: std::collections::BTreeSet<String> = (0..20)
            .flat_map(|c| schedule(&format!("commit{c}"), &vs(), 3))
            .step_by(3)
            .map(|x| x.0.to_string())
            .collect();
        assert!(firsts.len() > 1, "{firsts:?}");
    }
}
