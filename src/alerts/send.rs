//! Delivering alerts: HTTP webhooks with reqwest (generic JSON, Slack/Discord-compatible,
//! ntfy) and a command hook. Every text passes the secret filter first, so an HF token in a
//! failure's words never leaves the box; the hook runs in a clean environment, so the
//! daemon's own tokens and passwords do not reach it either. A target that fails is logged
//! and skipped; an alert never stops the sweep.

use super::{Alert, Targets};
use crate::runtime::docker::secrets::Secrets;
use std::ffi::OsString;
use std::time::Duration;

/// What an alert command gets of the daemon's environment unasked: what a shell needs to
/// find programs, name its user and speak the locale. The daemon's environment also holds
/// HF_TOKEN and registry credentials (DOCKER_AUTH_CONFIG, …): a command gets those only by
/// name (`--alert-env`).
pub const HOOK_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL",
];

/// Sends alerts to the configured targets.
pub struct Sender {
    targets: Targets,
    http: reqwest::Client,
    secrets: Secrets,
}

impl Sender {
    pub fn new(targets: Targets, secrets: Secrets) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Sender {
            targets,
            http,
            secrets,
        }
    }

    fn clean(&self, a: &Alert) -> Alert {
        Alert {
            title: self.secrets.redact(&a.title),
            text: self.secrets.redact(&a.text),
            ..a.clone()
        }
    }

    /// One line naming the alert, for the daemon's log (and Slack's text): its words come
    /// from the plan and the logs, so their controls are shown escaped.
    pub fn describe(a: &Alert) -> String {
        let extra = if a.suppressed > 0 {
            format!(" (+{} held back by the rate limit)", a.suppressed)
        } else {
            String::new()
        };
        let line = format!("[{}] {}: {}{extra}", a.sweep, a.title, a.text);
        crate::sanitize::terminal(&line).into_owned()
    }

    /// Send to every target; Err lists the targets that failed.
    pub async fn send(&self, alert: &Alert) -> Result<(), Vec<String>> {
        let a = self.clean(alert);
        let line = Self::describe(&a);
        let mut failed = Vec::new();
        for url in &self.targets.webhooks {
            let r = self.http.post(url).json(&a).send().await;
            note(&mut failed, url, r);
        }
        for url in &self.targets.slack {
            // Slack reads `text`, Discord `content`.
            let body = serde_json::json!({ "text": line, "content": line });
            let r = self.http.post(url).json(&body).send().await;
            note(&mut failed, url, r);
        }
        for url in &self.targets.ntfy {
            let r = self
                .http
                .post(url)
                // A header may not hold controls (a title with a line break would be refused).
                .header(
                    "Title",
                    format!("nightshift: {}", crate::sanitize::terminal(&a.title)),
                )
                .header("Tags", format!("nightshift,{}", a.kind.as_str()))
                .header(
                    "Priority",
                    if a.kind == super::Kind::Finished {
                        "default"
                    } else {
                        "high"
                    },
                )
                .body(format!("[{}] {}", a.sweep, a.text))
                .send()
                .await;
            note(&mut failed, url, r);
        }
        let env = hook_env(std::env::vars_os(), &self.targets.command_env);
        for cmd in &self.targets.commands {
            if let Err(e) = run_hook(hook_command(cmd, &a, &env), &a).await {
                failed.push(format!("{cmd}: {e}"));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed)
        }
    }
}

fn note(failed: &mut Vec<String>, url: &str, r: reqwest::Result<reqwest::Response>) {
    match r {
        Ok(resp) if resp.status().is_success() => {}
        Ok(resp) => failed.push(format!("{url}: HTTP {}", resp.status())),
        Err(e) => failed.push(format!("{url}: {e}")),
    }
}

/// The variables of `parent` (the daemon's environment) an alert command gets: those of
/// [`HOOK_ENV`] and those the operator named in `named`, nothing else.
pub(crate) fn hook_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    named: &[String],
) -> Vec<(OsString, OsString)> {
    parent
        .into_iter()
        .filter(|(k, _)| {
            k.to_str()
                .is_some_and(|k| HOOK_ENV.contains(&k) || named.iter().any(|n| n == k))
        })
        .collect()
}

/// The command for one alert: `sh -c CMD` with only `env` ([`hook_env`]) and the alert's
/// NIGHTSHIFT_ALERT_* variables in its environment (nothing inherited), the alert as JSON
/// on its stdin.
pub(crate) fn hook_command(
    cmd: &str,
    a: &Alert,
    env: &[(OsString, OsString)],
) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("NIGHTSHIFT_ALERT_KIND", a.kind.as_str())
        .env("NIGHTSHIFT_ALERT_SWEEP", &a.sweep)
        .env("NIGHTSHIFT_ALERT_TITLE", &a.title)
        .env("NIGHTSHIFT_ALERT_TEXT", &a.text)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

async fn run_hook(mut cmd: tokio::process::Command, a: &Alert) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        let json = serde_json::to_vec(a).map_err(|e| e.to_string())?;
        let _ = stdin.write_all(&json).await;
    }
    match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
        Ok(Ok(s)) if s.success() => Ok(()),
        Ok(Ok(s)) => Err(format!("exited with {s}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            let _ = child.kill().await;
            Err("ran past 30 s".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_masked_before_anything_is_sent() {
        let token = "hf_SENDtokenMUSTbeMASKEDeverywhere000";
        let s = Sender::new(Targets::default(), Secrets::with_token(Some(token.into())));
        let a = Alert {
            sweep: "n".into(),
            kind: crate::alerts::Kind::Paused,
            title: format!("gated: {token}"),
            text: format!("401 for Authorization: Bearer {token}"),
            at_ms: 0,
            suppressed: 0,
        };
        let c = s.clean(&a);
        assert!(!c.title.contains(token) && !c.text.contains(token), "{c:?}");
        assert!(!Sender::describe(&c).contains(token));
    }

    /// Of the daemon's environment an alert command gets what a shell needs and what the
    /// operator named; the command's own environment is cleared, so nothing else is
    /// inherited.
    #[test]
    fn the_hook_gets_a_clean_environment() {
        let parent = [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/op"),
            ("HF_TOKEN", "hf_secret"),
            ("DOCKER_AUTH_CONFIG", "{}"),
            ("SMTP_HOST", "relay"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = hook_env(parent, &["SMTP_HOST".into()]);
        let names: Vec<&str> = env.iter().filter_map(|(k, _)| k.to_str()).collect();
        assert_eq!(names, ["PATH", "HOME", "SMTP_HOST"]);
        let a = Alert {
            sweep: "n".into(),
            kind: crate::alerts::Kind::Finished,
            title: "t".into(),
            text: "x".into(),
            at_ms: 0,
            suppressed: 0,
        };
        let c = hook_command("env", &a, &env);
        let set: Vec<String> = c
            .as_std()
            .get_envs()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(set.contains(&"PATH".to_string()), "{set:?}");
        assert!(
            set.contains(&"NIGHTSHIFT_ALERT_TITLE".to_string()),
            "{set:?}"
        );
        assert!(!set.contains(&"HF_TOKEN".to_string()), "{set:?}");
    }

    #[test]
    fn a_described_alert_is_one_inert_line() {
        let a = Alert {
            sweep: "n".into(),
            kind: crate::alerts::Kind::NewFailure,
            title: crate::sanitize::HOSTILE.into(),
            text: "x".into(),
            at_ms: 0,
            suppressed: 0,
        };
        crate::sanitize::assert_inert(&Sender::describe(&a), crate::sanitize::HOSTILE_SHOWN);
    }
}
