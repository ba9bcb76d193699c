//! What the operator (and the recipes) decided tonight that later attempts follow: fixes
//! waiting for a run's next attempt, a commit's environment and recipes, the skip and fix
//! rules for a category, what a skip replaced (for `u`), and who last acted on a run.
//! Written by the commands (`commands.rs`, `groups.rs`) and read as runs start and end.

use crate::category::Category;
use crate::model::{RunId, RunState};
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Default)]
pub(super) struct Rules {
    /// Fixes to apply on the next attempt of a run.
    pub(super) pending_fixes: HashMap<RunId, Vec<String>>,
    /// Environment added to every variant of a commit by commit-scope recipes.
    pub(super) commit_env: HashMap<usize, BTreeMap<String, String>>,
    /// Commit-scope recipes already spread to every variant of a commit (by commit index).
    pub(super) commit_recipes: HashSet<(usize, String)>,
    /// What the operator's skips replaced (a held run's category): `u` restores it.
    pub(super) before_skip: HashMap<RunId, RunState>,
    /// `S`: categories the operator skips for the rest of the night, with how many runs
    /// each rule has skipped since.
    pub(super) skip_rules: BTreeMap<Category, usize>,
    /// The operator's "fix all of this category tonight" rules: the recipe, and the runs
    /// it has covered since.
    pub(super) fix_rules: BTreeMap<Category, (String, usize)>,
    /// Who last acted on each run (an operator command's signer), to name them when
    /// another client's command on the run is refused.
    pub(super) acted: HashMap<RunId, String>,
}
