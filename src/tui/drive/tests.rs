//! The session's loop in process, on `TestBackend`, over scripted links: two clients on
//! one sweep (one pauses, the other sees it and who did it), a resync with a note, and the
//! sweep's end. The order of what arrives is the script's: the runtime is current-thread,
//! and the script lets the loops take what it sent before it goes on. Time is tokio's,
//! paused: the loops' redraw ticks pass in no wall time.

use super::*;
use crate::event::{Envelope, Event};
use crate::plan::example::example_plan;
use crate::state::SweepState;
use crate::tui::keymap::KeyMap;
use crate::tui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::sync::Arc;
use tokio::sync::mpsc::unbounded_channel;

struct TestScreen(Terminal<TestBackend>);

impl Screen for TestScreen {
    type Backend = TestBackend;
    fn terminal(&mut self) -> &mut Terminal<TestBackend> {
        &mut self.0
    }
}

impl TestScreen {
    fn text(&self) -> String {
        let buf = self.0.backend().buffer();
        let w = buf.area.width as usize;
        buf.content
            .chunks(w)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn opts() -> TuiOptions {
    TuiOptions {
        theme: Theme::builtin("dark").unwrap(),
        keymap: KeyMap::default(),
        refresh: Duration::from_millis(10),
        gpu_period: Duration::from_secs(3600),
        simulate_gpus: false,
        log_dir: None,
        initial_state: None,
        initial_activity: Vec::new(),
        calibration: Default::default(),
        window_closes_ms: None,
        run_prior_ms: None,
        bell: false,
    }
}

/// One attached client: its app and screen, and the ends of its link the script holds.
struct Client {
    app: App,
    screen: TestScreen,
    keys: UnboundedSender<std::io::Result<TermEvent>>,
    key_rx: Option<UnboundedReceiver<std::io::Result<TermEvent>>>,
    events: UnboundedSender<Incoming>,
    events_rx: UnboundedReceiver<Incoming>,
    commands_tx: UnboundedSender<Command>,
    commands: UnboundedReceiver<Command>,
    end: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
    ended: Ended,
}

impl Client {
    fn new(me: &str) -> Client {
        let plan = Arc::new(example_plan());
        let mut app = App::new(plan, 8, Theme::builtin("dark").unwrap(), KeyMap::default());
        app.me = Some(me.into());
        app.attached = true;
        let (keys, key_rx) = unbounded_channel();
        let (events, events_rx) = unbounded_channel();
        let (commands_tx, commands) = unbounded_channel();
        let (end, ended_rx) = tokio::sync::oneshot::channel();
        Client {
            app,
            screen: TestScreen(Terminal::new(TestBackend::new(120, 36)).unwrap()),
            keys,
            key_rx: Some(key_rx),
            events,
            events_rx,
            commands_tx,
            commands,
            end: Some(end),
            ended: Box::pin(async move { ended_rx.await.unwrap_or(Ok(())) }),
        }
    }

    /// The loop on this client until its screen closes.
    async fn drive(&mut self, opts: &TuiOptions) -> Drove {
        let mut rx = self.key_rx.take().unwrap();
        let mut input = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let (_gtx, gpus) = unbounded_channel();
        let wires = Wires {
            input: &mut input,
            events: &mut self.events_rx,
            commands: &self.commands_tx,
            ended: &mut self.ended,
            gpus,
            signal: Box::pin(std::future::pending()),
        };
        drive(&mut self.app, &mut self.screen, wires, opts)
            .await
            .unwrap()
    }
}

fn key(c: char) -> std::io::Result<TermEvent> {
    Ok(TermEvent::Key(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::NONE,
    )))
}

fn env(seq: u64, event: Event) -> Incoming {
    Incoming::Event(Envelope {
        seq,
        at_ms: crate::event::now_ms(),
        event,
    })
}

/// Let the loops take what was sent and draw it (current-thread, paused time: they run
/// and their redraw ticks fire before the script goes on).
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::test(start_paused = true)]
async fn two_clients_one_pauses_the_other_sees_it_and_who() {
    let opts = opts();
    let (mut a, mut b) = (Client::new("ana@tui:1"), Client::new("bo@tui:2"));
    let st = SweepState::for_plan(&example_plan());
    let (a_keys, b_keys) = (a.keys.clone(), b.keys.clone());
    let (a_events, b_events) = (a.events.clone(), b.events.clone());
    let mut a_commands = std::mem::replace(&mut a.commands, unbounded_channel().1);
    let script = async move {
        for tx in [&a_events, &b_events] {
            tx.send(Incoming::State(st.clone())).unwrap();
        }
        settle().await;
        // Ana pauses; the daemon (this script) takes her signed command and tells both.
        a_keys.send(key('p')).unwrap();
        let sent = a_commands.recv().await.unwrap();
        let Command::Signed { by, command, .. } = &sent else {
            panic!("unsigned: {sent:?}")
        };
        assert_eq!((by.as_str(), &**command), ("ana@tui:1", &Command::Pause));
        for tx in [&a_events, &b_events] {
            tx.send(env(
                1,
                Event::Paused {
                    reason: crate::state::PAUSED_BY_OPERATOR.into(),
                    by: crate::model::PauseBy::Operator,
                },
            ))
            .unwrap();
            tx.send(env(
                2,
                Event::Operator {
                    command: Command::Pause,
                    by: Some("ana@tui:1".into()),
                    outcome: Some("done".into()),
                },
            ))
            .unwrap();
        }
        settle().await;
        // Bo's `p` now resumes: his screen knows the sweep is paused.
        b_keys.send(key('p')).unwrap();
        settle().await;
        for k in [&a_keys, &b_keys] {
            k.send(key('d')).unwrap();
        }
    };
    let (da, db, ()) = tokio::join!(a.drive(&opts), b.drive(&opts), script);
    assert!(!da.stop_sweep && !db.stop_sweep && !da.sweep_done);
    let bo_sent = b.commands.try_recv().unwrap();
    let Command::Signed { by, command, .. } = &bo_sent else {
        panic!("unsigned: {bo_sent:?}")
    };
    assert_eq!((by.as_str(), &**command), ("bo@tui:2", &Command::Resume));
    assert!(b.app.night.state.paused.is_some());
    let seen_by_bo = b
        .app
        .night
        .activity
        .iter()
        .any(|e| e.source.contains("ana"));
    assert!(seen_by_bo, "{:?}", b.app.night.activity);
    let screen = b.screen.text();
    assert!(screen.contains("PAUSED"), "{screen}");
}

#[tokio::test(start_paused = true)]
async fn a_resync_and_a_note_reach_the_screen_and_the_end_is_said() {
    let opts = opts();
    let mut c = Client::new("ana@tui:1");
    let mut st = SweepState::for_plan(&example_plan());
    st.paused = Some("disk space: /store below its floor".into());
    let (events, keys, end) = (c.events.clone(), c.keys.clone(), c.end.take().unwrap());
    let script = async move {
        events.send(Incoming::State(st)).unwrap();
        events
            .send(Incoming::Note(
                "this client fell behind: 7 event(s) dropped".into(),
            ))
            .unwrap();
        settle().await;
        end.send(Err("the store's disk is full".into())).unwrap();
        settle().await;
        keys.send(key('d')).unwrap();
    };
    let (drove, ()) = tokio::join!(c.drive(&opts), script);
    assert!(drove.sweep_done);
    assert_eq!(drove.sweep_err.as_deref(), Some("the store's disk is full"));
    assert!(c.app.night.state.paused.is_some());
    assert!(c.app.night.finished);
    let screen = c.screen.text();
    assert!(
        screen.contains("sweep stopped: the store's disk is full"),
        "{screen}"
    );
}
