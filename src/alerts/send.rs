//! Delivering alerts: HTTP webhooks with reqwest (generic JSON, Slack/Discord-compatible,
//! ntfy) and a command hook. Every text passes the secret filter first, so an HF token in a
//! failure's words never leaves the box. A target that fails is logged and skipped; an
//! alert never stops the sweep.

use super::{Alert, Targets};
use crate::runtime::docker::secrets::Secrets;
use std::time::Duration;

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

    /// One line naming the alert, for the daemon's log.
    pub fn describe(a: &Alert) -> String {
        let extra = if a.suppressed > 0 {
            format!(" (+{} held back by the rate limit)", a.suppressed)
        } else {
            String::new()
        };
        format!("[{}] {}: {}{extra}", a.sweep, a.title, a.text)
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
                .header("Title", format!("nightshift: {}", a.title))
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
        for cmd in &self.targets.commands {
            if let Err(e) = run_hook(cmd, &a).await {
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

async fn run_hook(cmd: &str, a: &Alert) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("NIGHTSHIFT_ALERT_KIND", a.kind.as_str())
        .env("NIGHTSHIFT_ALERT_SWEEP", &a.sweep)
        .env("NIGHTSHIFT_ALERT_TITLE", &a.title)
        .env("NIGHTSHIFT_ALERT_TEXT", &a.text)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
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
}
