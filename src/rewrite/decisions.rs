//! "One benchmark per commit, identical for every variant": the commit's invocation is
//! decided once — by the first variant whose image was probed — and every other variant of
//! the commit runs that one, on every host and after every restart. The engine owns the
//! map (seeded from the store on resume) and hands it to every attempt; the runtime that
//! decides reports it, and the store keeps it.

use super::Invocation;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Decisions(Mutex<HashMap<String, Invocation>>);

impl Decisions {
    /// Decisions already taken (a resumed sweep's, from its store).
    pub(crate) fn seeded(from: &BTreeMap<String, Invocation>) -> Decisions {
        Decisions(Mutex::new(
            from.iter().map(|(c, i)| (c.clone(), i.clone())).collect(),
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Invocation>> {
        // A panic elsewhere while holding it leaves a map that is still whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The commit's invocation, when decided.
    pub fn get(&self, commit: &str) -> Option<Invocation> {
        self.lock().get(commit).cloned()
    }

    /// `proposed` becomes the commit's invocation unless one was decided first (two
    /// variants planning at once: the first to settle wins). Returns the invocation to run
    /// and whether this call decided it (the caller then reports it, to be stored).
    pub fn settle(&self, commit: &str, proposed: Invocation) -> (Invocation, bool) {
        let mut m = self.lock();
        match m.get(commit) {
            Some(first) => (first.clone(), false),
            None => {
                m.insert(commit.to_string(), proposed.clone());
                (proposed, true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::BenchKind;

    fn inv(arg: &str) -> Invocation {
        Invocation {
            kind: BenchKind::Serving,
            env: vec![],
            program: super::super::Program::Script("benchmark_serving.py".into()),
            launcher: "python".into(),
            client_args: vec![arg.into()],
            server_args: vec![],
            model: None,
            port: 8000,
            mounts: vec![],
            hub_datasets: vec![],
            rewrites: vec![],
            warmup_requests: 0,
        }
    }

    #[test]
    fn the_first_to_settle_decides_for_every_thread() {
        let d = std::sync::Arc::new(Decisions::default());
        let got: Vec<(Invocation, bool)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let d = d.clone();
                    s.spawn(move || d.settle("c1", inv(&format!("--from-{i}"))))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(got.iter().filter(|(_, new)| *new).count(), 1);
        let first = &got.iter().find(|(_, new)| *new).unwrap().0;
        assert!(got.iter().all(|(i, _)| i == first));
        assert_eq!(d.get("c1").as_ref(), Some(first));
        assert_eq!(d.get("c2"), None);
    }

    #[test]
    fn a_seeded_decision_is_kept() {
        let d = Decisions::seeded(&BTreeMap::from([("c1".to_string(), inv("--stored"))]));
        let (i, new) = d.settle("c1", inv("--later"));
        assert!(!new);
        assert_eq!(i.client_args, vec!["--stored".to_string()]);
    }
}
