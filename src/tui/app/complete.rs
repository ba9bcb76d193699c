//! Tab on the `:` command line: command names, and the recipe a `fix-group` or
//! `fix-category` names (the recipe is checked where it is typed, see `command`).

/// The `:` commands, for completion.
pub const COMMANDS: &[&str] = &[
    "quit",
    "help",
    "pause",
    "resume",
    "export",
    "sweep",
    "logs",
    "results",
    "3way",
    "verdict",
    "theme",
    "skip-category",
    "fix-category",
    "skip-group",
    "retry-group",
    "fix-group",
    "recipes",
    "group",
    "sort",
    "filter",
];

/// Tab on the command line: the command name, or a `fix-group`'s recipe, completed as far
/// as it is one; and the choices left when more than one fits.
pub fn complete(text: &str, recipes: &[String]) -> (String, Vec<String>) {
    match text.split_once(' ') {
        Some(("fix-group", rest)) if !rest.contains(' ') => {
            complete_in("fix-group ", rest, recipes)
        }
        Some(("fix-category", rest)) if rest.matches(' ').count() == 1 => {
            let (cat, word) = rest.split_once(' ').unwrap_or((rest, ""));
            complete_in(&format!("fix-category {cat} "), word, recipes)
        }
        Some(_) => (text.to_string(), vec![]),
        None => {
            let commands: Vec<String> = COMMANDS.iter().map(|c| c.to_string()).collect();
            complete_in("", text, &commands)
        }
    }
}

/// `word` completed among `pool` as far as it is one, after `head`.
fn complete_in(head: &str, word: &str, pool: &[String]) -> (String, Vec<String>) {
    let fits: Vec<&String> = pool.iter().filter(|c| c.starts_with(word)).collect();
    let Some(first) = fits.first() else {
        return (format!("{head}{word}"), vec![]);
    };
    // The longest prefix they share.
    let mut common = first.to_string();
    for f in &fits[1..] {
        while !f.starts_with(&common) {
            common.pop();
        }
    }
    let done = if fits.len() == 1 { " " } else { "" };
    (
        format!("{head}{common}{done}"),
        fits.iter().map(|s| s.to_string()).collect(),
    )
}
