//! The agent's pseudo-terminal, seen from the monitor: bytes read from the master go to the
//! pane, keys typed while the pane has the keyboard are written to it, and its size follows
//! the pane's. Reading and writing run on two small threads so a stalled agent never blocks
//! the TUI loop.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub(crate) struct AgentIo {
    /// Chunks of the agent's output; closed when its terminal closes.
    pub output: tokio::sync::mpsc::Receiver<Vec<u8>>,
    input: std::sync::mpsc::Sender<Vec<u8>>,
    master: OwnedFd,
    stop: Arc<AtomicBool>,
}

impl AgentIo {
    pub(crate) fn start(master: OwnedFd) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
        let mut reader = File::from(master.try_clone()?);
        let stop_reader = stop.clone();
        std::thread::Builder::new()
            .name("agent-pty-read".into())
            .spawn(move || {
                let mut buf = vec![0u8; 16 * 1024];
                while !stop_reader.load(Ordering::Relaxed) {
                    if !readable(&reader, 200) {
                        continue;
                    }
                    match reader.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if tx.blocking_send(buf[..n].to_vec()).is_err() {
                                break;
                            }
                        }
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                            ) => {}
                        // EIO: the agent's side closed.
                        Err(_) => break,
                    }
                }
            })?;
        let (itx, irx) = std::sync::mpsc::channel::<Vec<u8>>();
        let mut writer = File::from(master.try_clone()?);
        std::thread::Builder::new()
            .name("agent-pty-write".into())
            .spawn(move || {
                for bytes in irx {
                    if writer.write_all(&bytes).is_err() {
                        break;
                    }
                }
            })?;
        Ok(AgentIo {
            output: rx,
            input: itx,
            master,
            stop,
        })
    }

    /// Queues bytes for the agent's terminal, untouched.
    pub(crate) fn send(&self, bytes: Vec<u8>) {
        let _ = self.input.send(bytes);
    }

    /// Tells the agent's terminal its new size (TIOCSWINSZ; the kernel sends it SIGWINCH).
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> io::Result<()> {
        let ws = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one `winsize` through the pointer, which outlives the call;
        // the fd is owned by `self` and open.
        let r = unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
        if r == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for AgentIo {
    fn drop(&mut self) {
        // The reader stops within one poll period, so it does not keep reading the agent's
        // output after the TUI is gone; the writer ends when `input` is dropped.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Waits up to `ms` for input (or hang-up) on `f`.
fn readable(f: &File, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    r > 0
}

/// The bytes a terminal sends for a key, as the agent's program expects to read them.
/// `app_cursor`: the program asked for application cursor keys (DECCKM).
pub(crate) fn key_bytes(key: &KeyEvent, app_cursor: bool) -> Vec<u8> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    let shift = key.modifiers.contains(KeyModifiers::SHIFT);
    let param = 1 + u8::from(shift) + 2 * u8::from(alt) + 4 * u8::from(ctrl);
    let csi_letter = |letter: char| -> Vec<u8> {
        if param > 1 {
            format!("\x1b[1;{param}{letter}").into_bytes()
        } else if app_cursor {
            format!("\x1bO{letter}").into_bytes()
        } else {
            format!("\x1b[{letter}").into_bytes()
        }
    };
    let tilde = |n: u8| -> Vec<u8> {
        if param > 1 {
            format!("\x1b[{n};{param}~").into_bytes()
        } else {
            format!("\x1b[{n}~").into_bytes()
        }
    };
    let utf8 = |c: char| c.to_string().into_bytes();
    let (body, alt_prefix) = match key.code {
        KeyCode::Char(c) if ctrl => {
            let b = match c {
                'a'..='z' => Some(c as u8 - b'a' + 1),
                'A'..='Z' => Some(c as u8 - b'A' + 1),
                '@' | ' ' | '2' => Some(0),
                '[' | '3' => Some(0x1b),
                '\\' | '4' => Some(0x1c),
                ']' | '5' => Some(0x1d),
                '^' | '6' => Some(0x1e),
                '_' | '7' | '/' => Some(0x1f),
                '?' | '8' => Some(0x7f),
                _ => None,
            };
            (b.map_or_else(|| utf8(c), |b| vec![b]), true)
        }
        KeyCode::Char(c) => (utf8(c), true),
        KeyCode::Enter => (b"\r".to_vec(), true),
        KeyCode::Backspace => (vec![0x7f], true),
        KeyCode::Tab => (b"\t".to_vec(), true),
        KeyCode::BackTab => (b"\x1b[Z".to_vec(), false),
        KeyCode::Esc => (vec![0x1b], true),
        KeyCode::Up => (csi_letter('A'), false),
        KeyCode::Down => (csi_letter('B'), false),
        KeyCode::Right => (csi_letter('C'), false),
        KeyCode::Left => (csi_letter('D'), false),
        KeyCode::Home => (csi_letter('H'), false),
        KeyCode::End => (csi_letter('F'), false),
        KeyCode::Insert => (tilde(2), false),
        KeyCode::Delete => (tilde(3), false),
        KeyCode::PageUp => (tilde(5), false),
        KeyCode::PageDown => (tilde(6), false),
        KeyCode::F(n @ 1..=4) => {
            let letter = (b'P' + n - 1) as char;
            if param > 1 {
                (format!("\x1b[1;{param}{letter}").into_bytes(), false)
            } else {
                (format!("\x1bO{letter}").into_bytes(), false)
            }
        }
        KeyCode::F(n @ 5..=12) => {
            let code = [15, 17, 18, 19, 20, 21, 23, 24][usize::from(n - 5)];
            (tilde(code), false)
        }
        KeyCode::Null => (vec![0], false),
        _ => (Vec::new(), false),
    };
    if alt && alt_prefix && !body.is_empty() {
        let mut out = vec![0x1b];
        out.extend(body);
        out
    } else {
        body
    }
}
