//! `nightshift gpus`: what the GPU panel sees on this machine, printed once. The same NVML
//! sampler and the same panel code as the TUI, rendered off-screen, so an operator (or a
//! check on a GPU box) can see the panel's numbers without a terminal to hold.

use crate::tui::app::App;
use crate::tui::gpu::{spawn_nvml, GpuMsg};
use crate::tui::keymap::KeyMap;
use crate::tui::theme::Theme;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::sync::Arc;
use std::time::Duration;

/// Take `samples` NVML samples `every` apart, then print a table of the last one and the
/// sweep screen (GPU panel included) at `width`×`height`. Exit 1 when NVML is not there.
pub fn main(samples: usize, every: Duration, (width, height): (u16, u16)) -> i32 {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_nvml(every, tx);
    let plan = Arc::new(crate::plan::example::example_plan());
    let theme = Theme::builtin("dark").expect("the dark theme is built in");
    let mut app: Option<App> = None;
    let mut last = None;
    for _ in 0..samples.max(1) {
        let Some(msg) = rx.blocking_recv() else { break };
        if let GpuMsg::Unavailable(why) = &msg {
            eprintln!("nightshift gpus: {why}");
            return 1;
        }
        if let GpuMsg::Samples(s) = &msg {
            let n = s.iter().map(|(g, _)| g.index + 1).max().unwrap_or(0);
            let a = app.get_or_insert_with(|| {
                let mut a = App::new(plan.clone(), n, theme.clone(), KeyMap::default());
                a.night.runtime = "docker".into();
                a
            });
            last = Some(s.clone());
            a.night.on_gpu(msg);
        }
    }
    let (Some(app), Some(last)) = (app, last) else {
        eprintln!("nightshift gpus: NVML gave no sample");
        return 1;
    };
    println!("gpu  name                          util  mem used/total MiB  temp  power  procs");
    for (s, pids) in &last {
        println!(
            "{:<4} {:<29} {:>3}%  {:>8}/{:<9} {:>4}C {:>5}W  {}",
            s.index,
            crate::sanitize::terminal(&s.name),
            s.util_pct,
            s.mem_used_mib,
            s.mem_total_mib,
            s.temp_c,
            s.power_w,
            pids.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    let mut t = match Terminal::new(TestBackend::new(width.max(20), height.max(8))) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("nightshift gpus: {e}");
            return 1;
        }
    };
    if let Err(e) = t.draw(|f| crate::tui::views::draw(f, &app)) {
        eprintln!("nightshift gpus: {e}");
        return 1;
    }
    let buf = t.backend().buffer();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        println!("{}", line.trim_end());
    }
    0
}
