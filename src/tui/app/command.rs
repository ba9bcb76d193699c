//! The `:` command line, k9s-style.

use super::*;

impl App {
    /// The group a `:…-group` command means: the id given (one group's, or a prefix of
    /// one), else the selected run's group.
    fn group_arg(&self, arg: &str) -> Result<String, String> {
        if arg.trim().is_empty() {
            return self
                .action_run()
                .and_then(|r| self.group_of(r))
                .map(|g| g.id)
                .ok_or_else(|| {
                    "the selected run has no failure group; name one (results view lists them)"
                        .into()
                });
        }
        crate::report::groups::find(&self.failure_groups(), arg).map(|g| g.id.clone())
    }

    /// `:` commands, k9s-style.
    pub(crate) fn run_command_line(&mut self, line: &str) -> Vec<Effect> {
        let mut parts = line.split_whitespace();
        let cmd = parts.next().unwrap_or("");
        let rest: Vec<&str> = parts.collect();
        let arg = rest.join(" ");
        match cmd {
            "" => {}
            "q" | "quit" => return self.on_action(Action::Quit),
            "q!" | "quit!" => return vec![Effect::Quit],
            "help" | "h" => self.ui.popup = Some(Popup::Help { scroll: 0 }),
            "pause" => return vec![Effect::Send(Command::Pause)],
            "resume" => return vec![Effect::Send(Command::Resume)],
            "export" => return vec![Effect::Export((!arg.is_empty()).then_some(arg))],
            "sweep" | "1" => self.ui.view = View::Sweep,
            "logs" | "2" => self.ui.view = View::Logs,
            "results" | "3" => self.ui.view = View::Results,
            "3way" | "threeway" | "4" => self.ui.view = View::ThreeWay,
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
                Err(e) => self.ui.toast = Some(e.to_string()),
            },
            "skip-category" => match arg.parse::<Category>() {
                Ok(c) => self.ui.popup = Some(Popup::Confirm(Confirm::SkipCategory(c))),
                Err(e) => self.ui.toast = Some(e),
            },
            "skip-group" | "retry-group" => match self.group_arg(&arg) {
                Ok(kind) => {
                    return vec![Effect::Send(if cmd == "skip-group" {
                        Command::SkipGroup { kind }
                    } else {
                        Command::RetryGroup { kind }
                    })]
                }
                Err(e) => self.ui.toast = Some(e),
            },
            "fix-category" => self.fix_category(&rest),
            "recipes" => self.ui.toast = Some(format!("fix recipes: {}", self.recipes.join(", "))),
            "fix-group" => return self.fix_group(&rest),
            "group" => match self.group_arg(&arg) {
                Ok(id) => self.ui.popup = Some(Popup::Group(id)),
                Err(e) => self.ui.toast = Some(e),
            },
            "sort" => self.sort_by(&arg),
            "filter" => self.filter(arg),
            other => self.ui.toast = Some(format!("unknown command `:{other}` (try :help)")),
        }
        vec![]
    }

    /// `:verdict [better|worse|same|weak|all]`: the 3-way view, filtered.
    fn verdict(&mut self, arg: &str) {
        self.ui.view = View::ThreeWay;
        match arg {
            "" | "all" => self.ui.verdict_filter = None,
            "better" | "worse" | "same" | "weak" => self.ui.verdict_filter = Some(arg.to_string()),
            other => {
                let words = "better, worse, same, weak (n=1 or uncalibrated) or all";
                self.ui.toast = Some(format!("verdict `{other}`: {words}"));
            }
        }
    }

    /// `:fix-category [CATEGORY [RECIPE]]`, defaulting to the selected run's category and
    /// the fix its diagnosis names; confirmed before it is sent.
    fn fix_category(&mut self, rest: &[&str]) {
        // Defaults from the selected run: its category and the fix its diagnosis names.
        let rec = self.action_run().map(|r| self.state.run(r).clone());
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
            (Err(e), _) => self.ui.toast = Some(e),
            (Ok(c), None) => {
                self.ui.toast = Some(format!("no fix is known for {c}: :fix-category {c} RECIPE"))
            }
            (Ok(_), Some(r)) if !self.recipes.contains(&r) => {
                self.ui.toast = Some(format!(
                    "no fix recipe `{r}` (recipes: {}; tab completes)",
                    self.recipes.join(", ")
                ))
            }
            (Ok(c), Some(r)) => self.ui.popup = Some(Popup::Confirm(Confirm::FixCategory(c, r))),
        }
    }

    /// `:fix-group RECIPE [GROUP]`.
    fn fix_group(&mut self, rest: &[&str]) -> Vec<Effect> {
        let (recipe, id) = (rest.first().copied(), rest.get(1).copied().unwrap_or(""));
        if let Some(r) = recipe.filter(|r| !self.recipes.iter().any(|k| k == r)) {
            self.ui.toast = Some(format!(
                "no fix recipe `{r}` (recipes: {}; tab completes)",
                self.recipes.join(", ")
            ));
            return vec![];
        }
        match (recipe, self.group_arg(id)) {
            (Some(recipe), Ok(kind)) => {
                return vec![Effect::Send(Command::FixGroup {
                    kind,
                    recipe: recipe.to_string(),
                })]
            }
            (None, _) => self.ui.toast = Some(":fix-group RECIPE [GROUP]".into()),
            (_, Err(e)) => self.ui.toast = Some(e),
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
                self.ui.results.sort_col = i;
                self.ui.view = View::Results;
            }
            None => {
                let names: Vec<&str> = RESULT_COLUMNS
                    .iter()
                    .map(|c| if *c == "Δ base" { "delta" } else { c })
                    .collect();
                self.ui.toast = Some(format!("columns: {}", names.join(", ")))
            }
        }
    }

    /// `:filter [clear|status=|category=|model=|group=|TEXT]`: the results view, filtered.
    fn filter(&mut self, arg: String) {
        self.ui.view = View::Results;
        if arg.is_empty() || arg == "clear" {
            self.ui.results = ResultsState {
                sort_col: self.ui.results.sort_col,
                reverse: self.ui.results.reverse,
                selected: self.ui.results.selected.clone(),
                ..Default::default()
            };
        } else if let Some(v) = arg.strip_prefix("status=") {
            match StatusFilter::ALL.iter().find(|s| s.label() == v) {
                Some(s) => self.ui.results.status = Some(*s),
                None => self.ui.toast = Some(format!("unknown status `{v}`")),
            }
        } else if let Some(v) = arg.strip_prefix("category=") {
            match v.parse::<Category>() {
                Ok(c) => self.ui.results.category = Some(c),
                Err(e) => self.ui.toast = Some(e),
            }
        } else if let Some(v) = arg.strip_prefix("model=") {
            self.ui.results.model = Some(v.to_string());
        } else if let Some(v) = arg.strip_prefix("group=") {
            self.ui.results.group = Some(v.to_string());
        } else {
            self.ui.results.text = Some(arg);
        }
    }
}
