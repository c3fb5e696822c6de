//! A detached tmux session running one command, read and typed into like a person would.
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux(pub String);

impl Tmux {
    /// Starts `command` (a shell command line) in a new detached session of `cols`×`rows`;
    /// when it ends, the pane prints `SW-EXIT=<status>` and stays open.
    pub fn start(name: &str, cols: u16, rows: u16, command: &str) -> Tmux {
        crate::require_root();
        let session = format!("{name}-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                &cols.to_string(),
                "-y",
                &rows.to_string(),
            ])
            .arg(format!("{command}; echo SW-EXIT=$?; sleep 600"))
            .status()
            .expect("tmux is installed (cargo xtask setup)");
        assert!(status.success(), "tmux new-session failed");
        Tmux(session)
    }

    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Keys by tmux's names (`Enter`, `C-]`, `q`).
    pub fn keys(&self, keys: &[&str]) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.0])
            .args(keys)
            .status()
            .unwrap();
    }

    /// Text typed literally.
    pub fn type_text(&self, text: &str) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.0, "-l", text])
            .status()
            .unwrap();
    }

    pub fn try_wait_for(&self, text: &str, secs: u64) -> Result<String, String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                return Err(s);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn wait_for(&self, text: &str, secs: u64) -> String {
        self.try_wait_for(text, secs)
            .unwrap_or_else(|s| panic!("{text:?} never appeared; the screen:\n{s}"))
    }

    /// The status the command ended with (after `SW-EXIT=` appeared).
    pub fn exit_status(&self, secs: u64) -> Option<i32> {
        let s = self.try_wait_for("SW-EXIT=", secs).ok()?;
        s.lines()
            .find_map(|l| l.trim().strip_prefix("SW-EXIT="))
            .and_then(|v| v.trim().parse().ok())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}
