//! Bytes on disk counted by layers. Images of one vLLM era share their base layers (CUDA,
//! Python, torch); a baseline made on a human image shares all of it but its own top layer.
//! So the cost of bringing an image is the bytes of its layers not already here, and
//! removing an image frees only the layers no other image on the disk still uses.
//! An image whose layers are unknown is one layer of its own (nothing shared): the
//! accounting then is the old whole-image one.

use std::collections::BTreeMap;

/// An image's layers: layer id → bytes.
pub type Manifest = BTreeMap<String, u64>;

/// The layers a set of images holds, each counted once however many images use it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Disk {
    /// Layer → (bytes, images using it).
    layers: BTreeMap<String, (u64, usize)>,
}

impl Disk {
    /// The images' layers together.
    pub fn of<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> Disk {
        let mut d = Disk::default();
        for m in manifests {
            d.add(m);
        }
        d
    }

    /// Bytes of every layer held.
    pub fn bytes(&self) -> u64 {
        self.layers.values().map(|(b, _)| b).sum()
    }

    pub fn has(&self, layer: &str) -> bool {
        self.layers.contains_key(layer)
    }

    /// Bytes of `m` not held here: what bringing that image costs.
    pub fn missing(&self, m: &Manifest) -> u64 {
        m.iter()
            .filter(|(l, _)| !self.layers.contains_key(*l))
            .map(|(_, b)| b)
            .sum()
    }

    /// Hold an image's layers; returns the bytes newly held.
    pub fn add(&mut self, m: &Manifest) -> u64 {
        let mut new = 0;
        for (l, b) in m {
            let e = self.layers.entry(l.clone()).or_insert_with(|| {
                new += b;
                (*b, 0)
            });
            e.1 += 1;
        }
        new
    }

    /// Let go of an image's layers; returns the bytes freed (layers nobody else uses).
    pub fn remove(&mut self, m: &Manifest) -> u64 {
        let mut freed = 0;
        for l in m.keys() {
            if let Some(e) = self.layers.get_mut(l) {
                e.1 -= 1;
                if e.1 == 0 {
                    freed += e.0;
                    self.layers.remove(l);
                }
            }
        }
        freed
    }

    /// Bytes removing `m` would free, without removing it.
    pub(crate) fn would_free(&self, m: &Manifest) -> u64 {
        m.keys()
            .filter_map(|l| self.layers.get(l))
            .filter(|(_, users)| *users == 1)
            .map(|(b, _)| b)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    fn m(layers: &[(&str, u64)]) -> Manifest {
        layers.iter().map(|(l, b)| (l.to_string(), b * G)).collect()
    }

    #[test]
    fn two_images_of_one_era_share_their_base_bytes() {
        let a = m(&[("cuda-0.8", 8), ("torch-0.8", 4), ("vllm-a", 6)]);
        let b = m(&[("cuda-0.8", 8), ("torch-0.8", 4), ("vllm-b", 7)]);
        let mut d = Disk::default();
        assert_eq!(d.add(&a), 18 * G);
        assert_eq!(d.missing(&b), 7 * G, "only b's own layer comes down");
        assert_eq!(d.add(&b), 7 * G);
        assert_eq!(d.bytes(), 25 * G);
    }

    #[test]
    fn evicting_one_keeps_the_layers_another_uses() {
        let a = m(&[("base", 12), ("vllm-a", 6)]);
        let baseline = m(&[("base", 12), ("vllm-a", 6), ("parent-a", 1)]);
        let mut d = Disk::of([&a, &baseline]);
        assert_eq!(d.bytes(), 19 * G);
        assert_eq!(d.would_free(&a), 0);
        assert_eq!(d.remove(&a), 0, "the baseline still uses every layer of a");
        assert_eq!(d.bytes(), 19 * G);
        assert_eq!(d.remove(&baseline), 19 * G);
        assert_eq!(d.bytes(), 0);
    }
}
