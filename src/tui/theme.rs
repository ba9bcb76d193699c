//! Themes: named colour slots, from `themes/*.toml` (embedded) or the config directory.
//! `NO_COLOR` turns every slot into the terminal's default colour; selection and matches
//! then use reverse video so nothing depends on colour alone.

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub mono: bool,
    pub fg: Color,
    pub dim: Color,
    pub accent: Color,
    pub border: Color,
    pub border_focus: Color,
    pub header_fg: Color,
    pub header_bg: Color,
    pub ok: Color,
    pub fail: Color,
    pub warn: Color,
    pub active: Color,
    pub queued: Color,
    pub skipped: Color,
    pub selected_fg: Color,
    pub selected_bg: Color,
    pub match_fg: Color,
    pub match_bg: Color,
    pub error_fg: Color,
    pub banner_fg: Color,
    pub banner_bg: Color,
}

#[derive(Deserialize)]
struct ThemeFile {
    name: Option<String>,
    #[serde(default)]
    colors: BTreeMap<String, String>,
}

impl Theme {
    /// Parse a theme file; slots it leaves out keep the dark theme's colours.
    pub fn from_toml(text: &str) -> anyhow::Result<Theme> {
        let f: ThemeFile = toml::from_str(text)?;
        let mut t = if f.name.as_deref() == Some("dark") {
            Theme::fallback()
        } else {
            Theme::builtin("dark").unwrap_or_else(Theme::fallback)
        };
        if let Some(n) = f.name {
            t.name = n;
        }
        for (slot, value) in &f.colors {
            let c: Color = value
                .parse()
                .map_err(|_| anyhow::anyhow!("colour `{value}` for `{slot}` is not a colour"))?;
            let field = match slot.as_str() {
                "fg" => &mut t.fg,
                "dim" => &mut t.dim,
                "accent" => &mut t.accent,
                "border" => &mut t.border,
                "border_focus" => &mut t.border_focus,
                "header_fg" => &mut t.header_fg,
                "header_bg" => &mut t.header_bg,
                "ok" => &mut t.ok,
                "fail" => &mut t.fail,
                "warn" => &mut t.warn,
                "active" => &mut t.active,
                "queued" => &mut t.queued,
                "skipped" => &mut t.skipped,
                "selected_fg" => &mut t.selected_fg,
                "selected_bg" => &mut t.selected_bg,
                "match_fg" => &mut t.match_fg,
                "match_bg" => &mut t.match_bg,
                "error_fg" => &mut t.error_fg,
                "banner_fg" => &mut t.banner_fg,
                "banner_bg" => &mut t.banner_bg,
                other => anyhow::bail!("unknown colour slot `{other}`"),
            };
            *field = c;
        }
        Ok(t)
    }

    fn fallback() -> Theme {
        Theme {
            name: "dark".into(),
            mono: false,
            fg: Color::Gray,
            dim: Color::DarkGray,
            accent: Color::LightBlue,
            border: Color::DarkGray,
            border_focus: Color::LightBlue,
            header_fg: Color::Black,
            header_bg: Color::LightBlue,
            ok: Color::Green,
            fail: Color::Red,
            warn: Color::Yellow,
            active: Color::Cyan,
            queued: Color::DarkGray,
            skipped: Color::Gray,
            selected_fg: Color::Black,
            selected_bg: Color::Magenta,
            match_fg: Color::Black,
            match_bg: Color::Yellow,
            error_fg: Color::Red,
            banner_fg: Color::Black,
            banner_bg: Color::Yellow,
        }
    }

    pub fn builtin(name: &str) -> Option<Theme> {
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, text)| Theme::from_toml(text).ok())
    }

    /// A builtin by name, else `<dir>/NAME.toml`.
    pub fn load(name: &str, dir: Option<&Path>) -> anyhow::Result<Theme> {
        if let Some(t) = Theme::builtin(name) {
            return Ok(t);
        }
        if let Some(d) = dir {
            let p = d.join(format!("{name}.toml"));
            if let Ok(text) = std::fs::read_to_string(&p) {
                return Theme::from_toml(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()));
            }
        }
        anyhow::bail!(
            "unknown theme `{name}` (builtin: {})",
            BUILTIN
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// Every colour replaced by the terminal default (`NO_COLOR`).
    pub(crate) fn monochrome(mut self) -> Theme {
        for c in [
            &mut self.fg,
            &mut self.dim,
            &mut self.accent,
            &mut self.border,
            &mut self.border_focus,
            &mut self.header_fg,
            &mut self.header_bg,
            &mut self.ok,
            &mut self.fail,
            &mut self.warn,
            &mut self.active,
            &mut self.queued,
            &mut self.skipped,
            &mut self.selected_fg,
            &mut self.selected_bg,
            &mut self.match_fg,
            &mut self.match_bg,
            &mut self.error_fg,
            &mut self.banner_fg,
            &mut self.banner_bg,
        ] {
            *c = Color::Reset;
        }
        self.mono = true;
        self
    }

    pub(crate) fn next_builtin(&self) -> Theme {
        let i = BUILTIN
            .iter()
            .position(|(n, _)| *n == self.name)
            .map(|i| (i + 1) % BUILTIN.len())
            .unwrap_or(0);
        let t = Theme::builtin(BUILTIN[i].0).unwrap_or_else(Theme::fallback);
        if self.mono {
            t.monochrome()
        } else {
            t
        }
    }

    pub fn text(&self) -> Style {
        Style::default().fg(self.fg)
    }
    pub(crate) fn dim(&self) -> Style {
        Style::default().fg(self.dim)
    }
    pub fn border(&self, focus: bool) -> Style {
        let s = Style::default().fg(if focus {
            self.border_focus
        } else {
            self.border
        });
        if focus {
            s.add_modifier(Modifier::BOLD)
        } else {
            s
        }
    }
    pub fn selected(&self) -> Style {
        let s = Style::default().fg(self.selected_fg).bg(self.selected_bg);
        if self.mono {
            s.add_modifier(Modifier::REVERSED)
        } else {
            s
        }
    }
    pub fn matched(&self) -> Style {
        let s = Style::default().fg(self.match_fg).bg(self.match_bg);
        if self.mono {
            s.add_modifier(Modifier::REVERSED | Modifier::UNDERLINED)
        } else {
            s
        }
    }
    pub fn header(&self) -> Style {
        let s = Style::default().fg(self.header_fg).bg(self.header_bg);
        if self.mono {
            s.add_modifier(Modifier::REVERSED)
        } else {
            s
        }
    }
    pub(crate) fn banner(&self) -> Style {
        let s = Style::default()
            .fg(self.banner_fg)
            .bg(self.banner_bg)
            .add_modifier(Modifier::BOLD);
        if self.mono {
            s.add_modifier(Modifier::REVERSED)
        } else {
            s
        }
    }
    pub fn error(&self) -> Style {
        let s = Style::default().fg(self.error_fg);
        if self.mono {
            s.add_modifier(Modifier::BOLD)
        } else {
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_cycles() {
        for (name, text) in BUILTIN {
            let t = Theme::from_toml(text).unwrap();
            assert_eq!(&t.name, name);
        }
        let d = Theme::builtin("dark").unwrap();
        assert_eq!(d.next_builtin().name, "light");
        assert!(Theme::from_toml("[colors]\nnope = \"red\"").is_err());
        assert_eq!(d.monochrome().ok, Color::Reset);
    }
}
