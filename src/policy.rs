//! TEMPORARY minimal policy (replaced by the diagnosis issue's module; same API).
use crate::category::{Action, Category};
use crate::diagnose::Diagnosis;
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct PolicyConfig {}

pub struct Policy;

#[derive(Debug, Clone)]
pub struct Decision {
    pub action: Action,
    pub recipe: Option<String>,
    pub retry_after: Option<Duration>,
    pub pause_sweep: Option<String>,
    pub reason: String,
}

impl Policy {
    pub fn new(_cfg: PolicyConfig) -> Self {
        Policy
    }
    pub fn decide(&mut self, d: &Diagnosis, attempt: u32, _fixes: &[String]) -> Decision {
        let action = match d.category {
            Category::BrokenPipe if attempt < 2 => Action::Retry,
            _ => Action::Operator,
        };
        Decision {
            action,
            recipe: None,
            retry_after: None,
            pause_sweep: None,
            reason: format!("{} — {}", d.category, action),
        }
    }
    pub fn record_success(&mut self) {}
}
