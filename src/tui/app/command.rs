//! The `:` command line, k9s-style.

use super::*;

impl Ui {
    /// The group a `:…-group` command means: the id given (one group's, or a prefix of
    /// one), else the selected run's group.
    fn group_arg(&self, at: &Seen<'_>, arg: &str) -> Result<String, String> {
        if arg.trim().is_empty() {
            return self
                .action_run(at)
                .and_then(|r| at.group_of(r))
                .map(|g| g.id)
                .ok_or_else(|| {
                    "the selected run has no failure group; name one (results view lists them)"
                        .into()
                });
        }
        crate::report::groups::find(&at.failure_groups(), arg).map(|g| g.id.clone())
    }

    /// `:` commands, k9s-style.
    pub(crate) fn run_command_line(&mut self, at: &Seen<'_>, line: &str) -> Vec<Effect> {
        let mut parts = line.split_whitespace();
        let cmd = parts.next().unwrap_or("");
        let rest: Vec<&str> = parts.collect();
        let arg = rest.join(" ");
        match cmd {
            "" => {}
            "q" | "quit" => return self.on_action(at, Action::Quit),
            "q!" | "quit!" => return vec![Effect::Quit],
            "help" | "h" => self.popup = Some(Popup::Help { scroll: 0 }),
            "pause" => return vec![Effect::Send(Command::Pause)],
            "resume" => return vec![Effect::Send(Command::Resume)],
            "export" => return vec![Effect::Export((!arg.is_empty()).then_some(arg))],
            "sweep" | "1" => self.view = View::Sweep,
            "logs" | "2" => self.view = View::Logs,
            "results" | "3" => self.view = View::Results,
            "3way" | "threeway" | "4" => self.view = View::ThreeWay,
            "verdict" => self.verdict(&arg),
            "theme" => match Theme::load(
                &arg,
                crate::tui::config::config_dir()
                    .map(|d| d.join("themes"))
                    .as_deref(),
            ) {
                Ok(t) => {
                    self.theme = if self.theme.mono { t.monochrome() } else { t };
                }
                Err(e) => self.toast = Some(e.to_string()),
            },
            "skip-category" => match arg.parse::<Category>() {
                Ok(c) => self.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                Err(e) => self.toast = Some(e),
            },
            "skip-group" | "retry-group" => match self.group_arg(at, &arg) {
                Ok(kind) => {
                    return vec![Effect::Send(if cmd == "skip-group" {
                        Command::SkipGroup { kind }
                    } else {
                        Command::RetryGroup { kind }
                    })]
                }
                Err(e) => self.toast = Some(e),
            },
            "fix-category" => self.fix_category(at, &rest),
            "recipes" => self.toast = Some(format!("fix recipes: {}", at.night.recipes.join(", "))),
            "fix-group" => return self.fix_group(at, &rest),
            "group" => match self.group_arg(at, &arg) {
                Ok(id) => self.popup = Some(Popup::Group(id)),
                Err(e) => self.toast = Some(e),
            },
            "sort" => self.sort_by(&arg),
            "filter" => self.filter(arg),
            other => self.toast = Some(format!("unknown command `:{other}` (try :help)")),
        }
        vec![]
    }

    /// `:verdict [better|worse|same|weak|all]`: the 3-way view, filtered.
    fn verdict(&mut self, arg: &str) {
        self.view = View::ThreeWay;
        match arg {
            "" | "all" => self.verdict_filter = None,
            "better" | "worse" | "same" | "weak" => self.verdict_filter = Some(arg.to_string()),
            other => {
                let words = "better, worse, same, weak (n=1 or uncalibrated) or all";
                self.toast = Some(format!("verdict `{other}`: {words}"));
            }
        }
    }

    /// `:fix-category [CATEGORY [RECIPE]]`, defaulting to the selected run's category and
    /// the fix its diagnosis names; confirmed before it is sent.
    fn fix_category(&mut self, at: &Seen<'_>, rest: &[&str]) {
        // Defaults from the selected run: its category and the fix its diagnosis names.
        let rec = self.action_run(at).map(|r| at.night.state.run(r).clone());
        let cat = match rest.first() {
            Some(c) => c.parse::<Category>().map_err(|e| e.to_string()),
            None => rec
                .as_ref()
                .and_then(|r| r.category())
                .ok_or_else(|| ":fix-category CATEGORY RECIPE".to_string()),
        };
        let recipe = rest.get(1).map(|r| r.to_string()).or_else(|| {
            rec.as_ref()
                .and_then(|r| r.finding.as_ref())
                .and_then(|f| f.recipe.clone())
        });
        match (cat, recipe) {
            (Err(e), _) => self.toast = Some(e),
            (Ok(c), None) => {
                self.toast = Some(format!("no fix is known for {c}: :fix-category {c} RECIPE"))
            }
            (Ok(_), Some(r)) if !at.night.recipes.contains(&r) => {
                self.toast = Some(format!(
                    "no fix recipe `{r}` (recipes: {}; tab completes)",
                    at.night.recipes.join(", ")
                ))
            }
            (Ok(c), Some(r)) => self.popup = Some(Popup::Confirm(Confirm::FixCategory(c, r))),
        }
    }

    /// `:fix-group RECIPE [GROUP]`.
    fn fix_group(&mut self, at: &Seen<'_>, rest: &[&str]) -> Vec<Effect> {
        let (recipe, id) = (rest.first().copied(), rest.get(1).copied().unwrap_or(""));
        if let Some(r) = recipe.filter(|r| !at.night.recipes.iter().any(|k| k == r)) {
            self.toast = Some(format!(
                "no fix recipe `{r}` (recipes: {}; tab completes)",
                at.night.recipes.join(", ")
            ));
            return vec![];
        }
        match (recipe, self.group_arg(at, id)) {
            (Some(recipe), Ok(kind)) => {
                return vec![Effect::Send(Command::FixGroup {
                    kind,
                    recipe: recipe.to_string(),
                })]
            }
            (None, _) => self.toast = Some(":fix-group RECIPE [GROUP]".into()),
            (_, Err(e)) => self.toast = Some(e),
        }
        vec![]
    }

    /// `:sort COLUMN` (`delta` names the `Δ base` column: a name the keyboard can type).
    fn sort_by(&mut self, arg: &str) {
        match RESULT_COLUMNS
            .iter()
            .position(|c| c.eq_ignore_ascii_case(arg) || (*c == "Δ base" && arg == "delta"))
        {
            Some(i) => {
                self.results.sort_col = i;
                self.view = View::Results;
            }
            None => {
                let names: Vec<&str> = RESULT_COLUMNS
                    .iter()
                    .map(|c| if *c == "Δ base" { "delta" } else { c })
                    .collect();
                self.toast = Some(format!("columns: {}", names.join(", ")))
            }
        }
    }

    /// `:filter [clear|status=|category=|model=|group=|TEXT]`: the results view, filtered.
    fn filter(&mut self, arg: String) {
        self.view = View::Results;
        if arg.is_empty() || arg == "clear" {
            self.results = ResultsState {
                sort_col: self.results.sort_col,
                reverse: self.results.reverse,
                selected: self.results.selected.clone(),
                ..Default::default()
            };
        } else if let Some(v) = arg.strip_prefix("status=") {
            match StatusFilter::ALL.iter().find(|s| s.label() == v) {
                Some(s) => self.results.status = Some(*s),
                None => self.toast = Some(format!("unknown status `{v}`")),
            }
        } else if let Some(v) = arg.strip_prefix("category=") {
            match v.parse::<Category>() {
                Ok(c) => self.results.category = Some(c),
                Err(e) => self.toast = Some(e),
            }
        } else if let Some(v) = arg.strip_prefix("model=") {
            self.results.model = Some(v.to_string());
        } else if let Some(v) = arg.strip_prefix("group=") {
            self.results.group = Some(v.to_string());
        } else {
            self.results.text = Some(arg);
        }
    }
}
