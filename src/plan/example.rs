//! The example plan (the seed commits of ISO-Bench's vLLM runs), inside the binary so
//! `nightshift demo`, the benchmarks and the tests work from anywhere.

use super::Plan;
use std::path::Path;

pub const EXAMPLE_PLAN: &str = include_str!("../../examples/iso-vllm.toml");

pub(crate) fn example_plan() -> Plan {
    Plan::from_str_at(
        "examples/iso-vllm.toml",
        EXAMPLE_PLAN.to_string(),
        Path::new("."),
        Path::new("examples/iso-vllm.toml"),
    )
    .expect("the embedded example plan is valid")
}
