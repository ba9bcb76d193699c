//! "One benchmark per commit, identical for every variant" (#23): the commit's invocation
//! is decided once, by the engine's shared decisions, and kept in the sweep's store. Two
//! variants starting at once on two hosts, and a variant run after a restart, all run the
//! first decision — never one of their own.

use nightshift::engine::{Engine, EngineOptions};
use nightshift::kind::BenchKind;
use nightshift::model::Variant;
use nightshift::plan::Plan;
use nightshift::rewrite::{Invocation, Program};
use nightshift::runtime::{RunEnd, RunJob, RunReport, RunSink, Runtime, RuntimeMsg};
use nightshift::store::resume::{self, ResumeOptions};
use nightshift::store::Store;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

/// What each attempt ran: (host, variant, invocation).
type Ran = Arc<Mutex<Vec<(usize, Variant, Invocation)>>>;

/// A stand-in for the Docker runtime's decision (`runtime/docker/invoke.rs`): each host
/// probes its own image and would plan its own invocation (here: one naming the host and
/// the variant, so any difference shows), then settles it with the engine's decisions.
/// Attempts are dealt to two hosts in turn; each host is its own runtime value, so nothing
/// a host keeps to itself could make them agree.
struct TwoHosts {
    next: std::sync::atomic::AtomicUsize,
    /// All attempts reach the decision together (started at once).
    together: Option<Arc<Barrier>>,
    ran: Ran,
}

#[async_trait::async_trait]
impl Runtime for TwoHosts {
    fn name(&self) -> &'static str {
        "two-hosts"
    }
    async fn cleanup_leftovers(&self, _sweep: &str) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }
    async fn execute(&self, job: RunJob, sink: RunSink, _cancel: CancellationToken) -> RunReport {
        let host = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 2;
        if let Some(b) = &self.together {
            b.wait().await;
        }
        let proposed = Invocation {
            kind: BenchKind::Serving,
            env: vec![],
            program: Program::Script("benchmark_serving.py".into()),
            launcher: "python".into(),
            client_args: vec![format!("--planned-by=host{host}/{}", job.variant)],
            server_args: vec![],
            model: job.model.clone(),
            port: 8000,
            mounts: vec![],
            hub_datasets: vec![],
            rewrites: vec![],
            warmup_requests: 0,
        };
        let inv = match job.decisions.get(&job.commit) {
            Some(inv) => inv,
            None => {
                let (inv, decided) = job.decisions.settle(&job.commit, proposed);
                if decided {
                    sink.send(RuntimeMsg::Decided(Box::new(inv.clone()))).await;
                }
                inv
            }
        };
        self.ran
            .lock()
            .unwrap()
            .push((host, job.variant.clone(), inv));
        RunReport::new(RunEnd::BenchExited { exit_code: 0 })
    }
}

fn plan(dir: &Path, variants: &str) -> Arc<Plan> {
    let t = format!(
        "schema_version = 1\nname = \"decide\"\n[defaults]\nvariants = [{variants}]\n[[agents]]\nid = \"a\"\n\
         [[commits]]\ncommit = \"{:040x}\"\nparent = \"{:040x}\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\n\
         perf_command = '''python benchmarks/benchmark_serving.py --model m/x'''\n",
        0xabc, 0xdef
    );
    let path = dir.join("decide.toml");
    Arc::new(Plan::from_str_at("decide.toml", t, dir, &path).unwrap())
}

/// One sweep of `plan` on the store at `store`, as the daemon runs it (resume, observe).
async fn sweep(plan: Arc<Plan>, store: &Path, together: Option<usize>, ran: Ran) {
    let s = Store::open(store, true).unwrap();
    let (obs, state, _) = resume::prepare(s, &plan, &ResumeOptions::default()).unwrap();
    let rt = Arc::new(TwoHosts {
        next: Default::default(),
        together: together.map(|n| Arc::new(Barrier::new(n))),
        ran,
    });
    let (engine, _cmds) = Engine::new(
        plan.clone(),
        rt,
        EngineOptions {
            gpus: 8,
            seed: 1,
            wait_for_operator: false,
        },
    );
    let mut engine = engine.with_time_scale(0.0).with_state(state);
    engine.observe(Box::new(obs));
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.run(CancellationToken::new()),
    )
    .await
    .expect("the sweep ends")
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn variants_at_once_on_two_hosts_and_after_a_restart_run_one_invocation() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let ran: Ran = Arc::default();

    // Night one: baseline and human start at once, one on each host.
    let p1 = plan(tmp.path(), "\"baseline\", \"human\"");
    sweep(p1, &store, Some(2), ran.clone()).await;
    {
        let r = ran.lock().unwrap();
        // The plan's default repeats: each variant more than once, in pairs at once.
        assert!(r.len() >= 2, "{r:?}");
        let hosts: std::collections::BTreeSet<usize> = r.iter().map(|(h, _, _)| *h).collect();
        assert_eq!(hosts.len(), 2, "both hosts ran an attempt: {r:?}");
        let variants: std::collections::BTreeSet<String> =
            r.iter().map(|(_, v, _)| v.to_string()).collect();
        assert_eq!(variants.len(), 2, "{r:?}");
        assert!(
            r.iter().all(|x| x.2 == r[0].2),
            "variants ran different invocations: {r:?}"
        );
    }
    let first = ran.lock().unwrap()[0].2.clone();

    // The decision is in the store, for the commit's command.
    let kept = Store::open(&store, false).unwrap().invocations();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let (cmd, inv) = kept.values().next().unwrap();
    assert!(cmd.contains("benchmark_serving.py"), "{cmd}");
    assert_eq!(inv, &first);

    // A restart (a new process: new engine, new runtimes) with the agent added: the agent
    // runs what night one decided, not what its own host would plan.
    let p2 = plan(tmp.path(), "\"baseline\", \"human\", \"agent\"");
    sweep(p2, &store, None, ran.clone()).await;
    let r = ran.lock().unwrap();
    let agent: Vec<_> = r
        .iter()
        .filter(|(_, v, _)| v.agent_id().is_some())
        .collect();
    assert!(!agent.is_empty(), "{r:?}");
    assert!(
        agent.iter().all(|a| a.2 == first),
        "the agent after the restart: {r:?}"
    );
}

/// The same plan with another command for the commit decides afresh: a stored invocation
/// belongs to the command it was decided for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_changed_command_is_decided_again() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let ran: Ran = Arc::default();
    sweep(plan(tmp.path(), "\"baseline\""), &store, None, ran.clone()).await;
    let changed = format!(
        "schema_version = 1\nname = \"decide\"\n[defaults]\nvariants = [\"baseline\"]\n\
         [[commits]]\ncommit = \"{:040x}\"\nparent = \"{:040x}\"\nmodel = \"m/x\"\ngpu_config = \"H100:1\"\n\
         perf_command = '''python benchmarks/benchmark_serving.py --model m/x --num-prompts 7'''\n",
        0xabc, 0xdef
    );
    let p = Arc::new(
        Plan::from_str_at(
            "decide.toml",
            changed,
            tmp.path(),
            &tmp.path().join("decide.toml"),
        )
        .unwrap(),
    );
    let s = Store::open(&store, true).unwrap();
    let (_obs, state, _) = resume::prepare(s, &p, &ResumeOptions::default()).unwrap();
    assert!(
        state.invocations.is_empty(),
        "a decision for another command was kept: {:?}",
        state.invocations
    );
}
