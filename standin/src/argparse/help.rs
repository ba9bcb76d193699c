//! argparse's help and usage layout (HelpFormatter, 78 columns, help at column 24).

use super::{Arg, Kind, Parser};
use std::fmt::Write as _;

impl Parser {
    pub fn usage(&self) -> String {
        let mut parts = vec!["[-h]".to_string()];
        parts.extend(
            self.args
                .iter()
                .filter(|a| a.kind != Kind::Pos)
                .map(Arg::usage_part),
        );
        let pos: Vec<String> = self
            .args
            .iter()
            .filter(|a| a.kind == Kind::Pos)
            .map(Arg::usage_part)
            .collect();
        let prefix = "usage: ";
        let one = format!(
            "{} {}",
            self.prog,
            [parts.clone(), pos.clone()].concat().join(" ")
        );
        let width = 78;
        if prefix.len() + one.len() <= width {
            return format!("{prefix}{one}");
        }
        // argparse's wrapping: prog then the optionals, continuation lines indented under
        // the first optional; positionals start a new line.
        let indent = " ".repeat(prefix.len() + self.prog.len() + 1);
        let lines_of = |items: Vec<String>, first_len: Option<usize>| -> Vec<String> {
            let mut lines = Vec::new();
            let mut line: Vec<String> = Vec::new();
            let mut len = first_len.unwrap_or(indent.len()) - 1;
            for p in items {
                if len + 1 + p.len() > width && !line.is_empty() {
                    lines.push(format!("{indent}{}", line.join(" ")));
                    line.clear();
                    len = indent.len() - 1;
                }
                len += p.len() + 1;
                line.push(p);
            }
            if !line.is_empty() {
                lines.push(format!("{indent}{}", line.join(" ")));
            }
            if first_len.is_some() && !lines.is_empty() {
                lines[0] = lines[0][indent.len()..].to_string();
            }
            lines
        };
        let mut items = vec![self.prog.clone()];
        items.extend(parts);
        let mut lines = lines_of(items, Some(prefix.len()));
        lines.extend(lines_of(pos, None));
        format!("{prefix}{}", lines.join("\n"))
    }

    pub fn help(&self) -> String {
        let mut out = format!("{}\n\n", self.usage());
        if !self.description.is_empty() {
            for l in wrap(&self.description, 78) {
                let _ = writeln!(out, "{l}");
            }
            out.push('\n');
        }
        let pos: Vec<&Arg> = self.args.iter().filter(|a| a.kind == Kind::Pos).collect();
        if !pos.is_empty() {
            out.push_str("positional arguments:\n");
            for a in pos {
                entry(&mut out, &a.invocation(), &a.help);
            }
            out.push('\n');
        }
        out.push_str("options:\n");
        entry(&mut out, "-h, --help", "show this help message and exit");
        for a in self.args.iter().filter(|a| a.kind != Kind::Pos) {
            entry(&mut out, &a.invocation(), &a.help);
        }
        out
    }
}

/// One help entry: the invocation padded to column 24 when it fits in 20 columns, else on
/// its own line; help text wrapped to 54 columns, continuation lines indented 24.
fn entry(out: &mut String, inv: &str, help: &str) {
    let lines = wrap(help, 54);
    if lines.is_empty() {
        let _ = writeln!(out, "  {inv}");
        return;
    }
    if inv.len() <= 20 {
        let _ = writeln!(out, "  {inv:<20}  {}", lines[0]);
    } else {
        let _ = writeln!(out, "  {inv}");
        let _ = writeln!(out, "{:24}{}", "", lines[0]);
    }
    for l in &lines[1..] {
        let _ = writeln!(out, "{:24}{l}", "");
    }
}

/// textwrap.wrap after collapsing whitespace (what HelpFormatter does).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        let mut w = w.to_string();
        while w.chars().count() > width {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            let head: String = w.chars().take(width).collect();
            w = w.chars().skip(width).collect();
            lines.push(head);
        }
        if line.is_empty() {
            line = w;
        } else if line.chars().count() + 1 + w.chars().count() <= width {
            line.push(' ');
            line.push_str(&w);
        } else {
            lines.push(std::mem::replace(&mut line, w));
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}
