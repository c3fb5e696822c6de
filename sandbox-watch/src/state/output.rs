//! What each program printed: the bytes a traced process wrote to its stdout and stderr, as
//! the kernel's write probes sent them (see `sandbox-watch-ebpf/src/probes/output.rs`),
//! counted and hashed whole, with (`--capture-output` only) the first and last
//! [`TEXT_KEEP`] bytes as text, redacted as argv is.
//!
//! The capture feeds the kernel's chunks to [`Outputs`]; when a program's run ends (its exit,
//! its next exec, or the end of the capture) each of its streams becomes one `output` record,
//! which the session attaches to that run's process entry. Memory per stream is bounded: a
//! running hash, the head and the tail.
use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::kernel::decode::Output as Chunk;
use sandbox_watch_common::{
    OUTPUT_CUT, OUTPUT_IOVECS, OUTPUT_IOVECS_CUT, OUTPUT_NOT_CARRIED, OUTPUT_READ_FAILED,
    OUTPUT_STDERR, OUTPUT_VIA_COPY_FILE_RANGE, OUTPUT_VIA_PWRITEV, OUTPUT_VIA_PWRITEV2,
    OUTPUT_VIA_SENDFILE, OUTPUT_VIA_SPLICE, OUTPUT_VIA_TEE, OUTPUT_VIA_VMSPLICE, OUTPUT_VIA_WRITEV,
};

/// Bytes of text kept at each end of a stream (`--capture-output`).
pub const TEXT_KEEP: usize = 2048;

/// One stream of one program run, as the report and the `output` record have it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stream {
    /// Bytes written, as the kernel's write syscalls returned them.
    pub bytes: u64,
    /// sha256 of all of them, in order; None when some were not seen (`sha256_skipped` says
    /// why).
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256_skipped: Option<String>,
    /// `--capture-output`: the first `TEXT_KEEP` bytes (the whole stream when it is at most
    /// twice that), redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// `--capture-output`: the last `TEXT_KEEP` bytes, when the stream is longer than twice
    /// that, redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
    /// Why no text was kept although `--capture-output` asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_withheld: Option<String>,
}

impl Stream {
    /// The last non-empty line of the kept text (for a failed command's summary line).
    pub fn last_line(&self) -> Option<&str> {
        self.tail
            .as_deref()
            .or(self.head.as_deref())?
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
    }
}

/// A process entry's `output`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessOutput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<Stream>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Stream>,
}

/// The `output` record: one stream of one program run, at its end.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutputRecord {
    pub pid: u32,
    /// `stdout` or `stderr`.
    pub stream: String,
    #[serde(flatten)]
    pub output: Stream,
}

/// What a stream has seen so far.
struct Live {
    bytes: u64,
    hash: sha2::Sha256,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// The write in progress: what it returned and the next offset expected.
    write_ret: u64,
    write_next: u64,
    /// The first reason the hash is not of every byte.
    gap: Option<String>,
    /// The kernel's count of lost output records when the stream began.
    lost_at_start: u64,
}

impl Live {
    fn gap(&mut self, why: impl FnOnce() -> String) {
        if self.gap.is_none() {
            self.gap = Some(why());
        }
    }

    /// A write whose chunks stopped before its end.
    fn close_write(&mut self) {
        if self.write_next < self.write_ret {
            let missing = self.write_ret - self.write_next;
            self.gap(|| format!("{missing} bytes of a write were lost in the kernel"));
        }
        self.write_next = self.write_ret;
    }

    fn keep(&mut self, data: &[u8]) {
        let room = TEXT_KEEP.saturating_sub(self.head.len());
        self.head.extend_from_slice(&data[..room.min(data.len())]);
        let rest = &data[room.min(data.len())..];
        // The tail holds the last bytes after the head's: what is pushed out goes in one cut.
        let rest = &rest[rest.len().saturating_sub(TEXT_KEEP)..];
        let over = (self.tail.len() + rest.len()).saturating_sub(TEXT_KEEP);
        self.tail.drain(..over);
        self.tail.extend(rest);
    }
}

fn not_carried(via: u32) -> &'static str {
    match via {
        OUTPUT_VIA_WRITEV => "writev",
        OUTPUT_VIA_PWRITEV => "pwritev",
        OUTPUT_VIA_PWRITEV2 => "pwritev2",
        OUTPUT_VIA_SENDFILE => "sendfile",
        OUTPUT_VIA_SPLICE => "splice",
        OUTPUT_VIA_COPY_FILE_RANGE => "copy_file_range",
        OUTPUT_VIA_TEE => "tee",
        OUTPUT_VIA_VMSPLICE => "vmsplice",
        _ => "a write the probe does not carry",
    }
}

/// Every stream of the programs running now, by (tgid, stream).
#[derive(Default)]
pub struct Outputs {
    live: BTreeMap<(u32, u32), Live>,
}

/// A stream at its end, before the capture decides about its text.
pub struct Ended {
    pub pid: u32,
    pub stream: &'static str,
    pub bytes: u64,
    pub sha256: Option<String>,
    pub sha256_skipped: Option<String>,
    /// Head (the whole stream when short) and tail bytes.
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
}

impl Outputs {
    /// One chunk from the kernel. `text`: keep the head and tail (`--capture-output`; without
    /// it only the count and the hash are made). `lost` is the kernel's count of lost output
    /// records now.
    pub fn chunk(&mut self, c: &Chunk, text: bool, lost: impl FnOnce() -> u64) {
        let s = self
            .live
            .entry((c.header.tgid, c.stream))
            .or_insert_with(|| Live {
                bytes: 0,
                hash: sha2::Sha256::new(),
                head: Vec::new(),
                tail: VecDeque::new(),
                write_ret: 0,
                write_next: 0,
                gap: None,
                lost_at_start: lost(),
            });
        if c.flags & OUTPUT_NOT_CARRIED != 0 {
            s.close_write();
            s.bytes += c.ret;
            let (n, via) = (c.ret, not_carried(c.via));
            s.gap(|| format!("{n} bytes were written with {via}, which is counted, not read"));
            return;
        }
        if c.offset == 0 || c.ret != s.write_ret {
            // A new write (one whose first chunk was lost starts past 0).
            s.close_write();
            s.bytes += c.ret;
            s.write_ret = c.ret;
            s.write_next = 0;
        }
        if c.offset != s.write_next {
            let missing = c.offset.abs_diff(s.write_next);
            s.gap(|| format!("{missing} bytes of a write were lost in the kernel"));
        }
        if c.flags & OUTPUT_READ_FAILED != 0 {
            s.gap(|| "the probe could not read a written buffer".into());
            s.write_next = c
                .ret
                .min(c.offset + sandbox_watch_common::OUTPUT_CHUNK as u64);
            return;
        }
        s.hash.update(c.data);
        if text {
            s.keep(c.data);
        }
        s.write_next = c.offset + c.data.len() as u64;
        if c.flags & OUTPUT_CUT != 0 {
            let limit = sandbox_watch_common::OUTPUT_CHUNKS * sandbox_watch_common::OUTPUT_CHUNK;
            s.gap(|| format!("a write was longer than the probe's {} KiB", limit / 1024));
        }
        if c.flags & OUTPUT_IOVECS_CUT != 0 {
            s.gap(|| {
                format!(
                    "a writev was read in part (the probe reads {OUTPUT_IOVECS} buffers of up to {} KiB)",
                    sandbox_watch_common::OUTPUT_CHUNK / 1024
                )
            });
        }
    }

    /// The streams of `tgid`, ended (at its exit or exec). `lost` as for [`Outputs::chunk`].
    pub fn end(&mut self, tgid: u32, lost: u64) -> Vec<Ended> {
        [1, OUTPUT_STDERR]
            .into_iter()
            .filter_map(|stream| {
                let s = self.live.remove(&(tgid, stream))?;
                Some(ended(tgid, stream, s, lost))
            })
            .collect()
    }

    /// Every stream still open (the end of the capture).
    pub fn end_all(&mut self, lost: u64) -> Vec<Ended> {
        std::mem::take(&mut self.live)
            .into_iter()
            .map(|((tgid, stream), s)| ended(tgid, stream, s, lost))
            .collect()
    }
}

fn ended(pid: u32, stream: u32, mut s: Live, lost: u64) -> Ended {
    s.close_write();
    if lost > s.lost_at_start {
        let n = lost - s.lost_at_start;
        s.gap(|| format!("the kernel lost {n} output records while this stream was written"));
    }
    Ended {
        pid,
        stream: if stream == OUTPUT_STDERR {
            "stderr"
        } else {
            "stdout"
        },
        bytes: s.bytes,
        sha256: s.gap.is_none().then(|| hex::encode(s.hash.finalize())),
        sha256_skipped: s.gap,
        head: s.head,
        tail: s.tail.into(),
    }
}

impl Ended {
    /// The record, with text (`text` true: redacted by `redact`, which returns the text and
    /// how many secrets it replaced) unless `withheld` says why not.
    pub fn record(
        self,
        text: bool,
        withheld: Option<String>,
        redact: impl Fn(&str) -> (String, usize),
    ) -> (OutputRecord, usize) {
        let mut redactions = 0;
        let mut out = Stream {
            bytes: self.bytes,
            sha256: self.sha256,
            sha256_skipped: self.sha256_skipped,
            ..Stream::default()
        };
        if text {
            match withheld {
                Some(why) => out.text_withheld = Some(why),
                None => {
                    let mut clean = |bytes: &[u8]| {
                        let (t, n) = redact(&String::from_utf8_lossy(bytes));
                        redactions += n;
                        t
                    };
                    // Short: all of it as the head (the tail's bytes follow the head's).
                    if self.head.len() + self.tail.len() <= 2 * TEXT_KEEP
                        && self.bytes <= 2 * TEXT_KEEP as u64
                    {
                        let mut all = self.head;
                        all.extend_from_slice(&self.tail);
                        out.head = Some(clean(&all));
                    } else {
                        out.head = Some(clean(&self.head));
                        out.tail = (!self.tail.is_empty()).then(|| clean(&self.tail));
                    }
                }
            }
        }
        (
            OutputRecord {
                pid: self.pid,
                stream: self.stream.into(),
                output: out,
            },
            redactions,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::decode::Header;
    use sandbox_watch_common::{OUTPUT_CHUNK, OUTPUT_STDOUT, OUTPUT_VIA_WRITE};

    fn chunk(ret: u64, offset: u64, data: &[u8], flags: u32) -> Chunk<'_> {
        Chunk {
            header: Header {
                tgid: 7,
                pid: 7,
                ktime_ns: 0,
                start_ns: 0,
                seq: 0,
            },
            stream: OUTPUT_STDOUT,
            fd: 1,
            ret,
            offset,
            flags,
            via: OUTPUT_VIA_WRITE,
            data,
        }
    }

    fn sha(b: &[u8]) -> String {
        hex::encode(sha2::Sha256::digest(b))
    }

    /// Sends `data` as one write, in the kernel's chunks.
    fn write(o: &mut Outputs, data: &[u8]) {
        for (i, part) in data.chunks(OUTPUT_CHUNK).enumerate() {
            let c = chunk(data.len() as u64, (i * OUTPUT_CHUNK) as u64, part, 0);
            o.chunk(&c, true, || 0);
        }
    }

    #[test]
    fn chunks_of_writes_hash_as_the_bytes_written_and_keep_head_and_tail() {
        let mut o = Outputs::default();
        let big: Vec<u8> = (0..3 * OUTPUT_CHUNK + 5).map(|i| (i % 251) as u8).collect();
        write(&mut o, b"hello\n");
        write(&mut o, &big);
        let e = o.end(7, 0).pop().unwrap();
        let mut all = b"hello\n".to_vec();
        all.extend_from_slice(&big);
        assert_eq!(e.bytes, all.len() as u64);
        assert_eq!(e.sha256.as_deref(), Some(sha(&all).as_str()));
        assert_eq!(e.head, all[..TEXT_KEEP]);
        assert_eq!(e.tail, all[all.len() - TEXT_KEEP..]);
        assert!(o.end(7, 0).is_empty(), "ended streams are gone");
    }

    #[test]
    fn the_tail_is_the_last_bytes_after_many_small_writes_and_no_text_is_kept_unasked() {
        let mut o = Outputs::default();
        let mut all = Vec::new();
        for i in 0..700u32 {
            let line = format!("line {i} {}\n", "x".repeat((i % 13) as usize));
            write(&mut o, line.as_bytes());
            all.extend_from_slice(line.as_bytes());
        }
        let e = o.end(7, 0).pop().unwrap();
        assert_eq!(e.head, all[..TEXT_KEEP]);
        assert_eq!(e.tail, all[all.len() - TEXT_KEEP..]);

        let c = chunk(6, 0, b"hello\n", 0);
        o.chunk(&c, false, || 0);
        let e = o.end(7, 0).pop().unwrap();
        assert_eq!(e.sha256.as_deref(), Some(sha(b"hello\n").as_str()));
        assert!(
            e.head.is_empty() && e.tail.is_empty(),
            "no text without --capture-output"
        );
    }

    #[test]
    fn a_lost_chunk_or_a_write_not_carried_leaves_no_hash_but_the_count() {
        let mut o = Outputs::default();
        let data = vec![b'x'; 2 * OUTPUT_CHUNK];
        // The second chunk never came.
        o.chunk(
            &chunk(data.len() as u64, 0, &data[..OUTPUT_CHUNK], 0),
            true,
            || 0,
        );
        let e = o.end(7, 0).pop().unwrap();
        assert_eq!(e.bytes, data.len() as u64);
        assert_eq!(e.sha256, None);
        assert!(e.sha256_skipped.unwrap().contains("lost"));

        let mut c = chunk(10, 0, b"", OUTPUT_NOT_CARRIED);
        c.via = OUTPUT_VIA_WRITEV;
        o.chunk(&c, true, || 0);
        let e = o.end(7, 0).pop().unwrap();
        assert_eq!((e.bytes, e.sha256), (10, None));
        assert!(e.sha256_skipped.unwrap().contains("writev"));

        // Records lost in the kernel while the stream was open.
        write(&mut o, b"ok");
        let e = o.end(7, 3).pop().unwrap();
        assert_eq!(e.sha256, None);
    }

    /// A writev's chunks end at its buffers' ends; a writev with more buffers than the probe
    /// reads ends in a chunk of no bytes that says so.
    #[test]
    fn a_writev_hashes_as_its_buffers_in_order_and_a_cut_one_has_no_hash() {
        let mut o = Outputs::default();
        // writev of "hello " and "world\n": two chunks of one write of 12 bytes.
        o.chunk(&chunk(12, 0, b"hello ", 0), true, || 0);
        o.chunk(&chunk(12, 6, b"world\n", 0), true, || 0);
        write(&mut o, b"more\n");
        let e = o.end(7, 0).pop().unwrap();
        assert_eq!(e.bytes, 17);
        assert_eq!(
            e.sha256.as_deref(),
            Some(sha(b"hello world\nmore\n").as_str())
        );

        o.chunk(&chunk(20, 0, b"0123456789", 0), true, || 0);
        o.chunk(&chunk(20, 10, b"", OUTPUT_IOVECS_CUT), true, || 0);
        let e = o.end(7, 0).pop().unwrap();
        assert_eq!((e.bytes, e.sha256), (20, None));
        assert!(
            e.sha256_skipped
                .unwrap()
                .contains("writev was read in part")
        );
    }

    #[test]
    fn text_is_redacted_or_withheld_and_short_streams_are_one_head() {
        let mut o = Outputs::default();
        write(&mut o, b"line one\nlast words\n");
        let redact = |t: &str| (t.replace("one", "[REDACTED]"), 1);
        let (r, n) = o.end(7, 0).pop().unwrap().record(true, None, redact);
        assert_eq!(n, 1);
        assert_eq!(
            r.output.head.as_deref(),
            Some("line [REDACTED]\nlast words\n")
        );
        assert_eq!(r.output.tail, None);
        assert_eq!(r.output.last_line(), Some("last words"));

        write(&mut o, b"secret");
        let (r, _) =
            o.end(7, 0)
                .pop()
                .unwrap()
                .record(true, Some("read a credential".into()), redact);
        assert_eq!(
            (r.output.head, r.output.text_withheld.as_deref()),
            (None, Some("read a credential"))
        );
        assert_eq!(r.output.bytes, 6);

        write(&mut o, b"no text without the flag");
        let (r, _) = o.end(7, 0).pop().unwrap().record(false, None, redact);
        assert_eq!((r.output.head, r.output.text_withheld), (None, None));
    }
}
