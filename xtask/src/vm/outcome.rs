//! Reading the guest's console: the markers the guest script prints, each test binary's
//! result, and the summary (`target/vm/summary.txt`).
use super::*;

/// The line without terminal escape sequences (SeaBIOS clears the screen, colours).
pub(super) fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters and intermediates up to a final byte in @..~.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // Two-byte sequences (ESC c, ESC 7, …) and charset selection (ESC ( B).
            Some('(' | ')') => {
                chars.next();
            }
            _ => {}
        }
    }
    out
}

/// A guest marker line: `@@sw-vm WORD key=value…` (anywhere in the line: the kernel may have
/// printed into it).
pub(super) fn marker(line: &str) -> Option<(&str, BTreeMap<&str, &str>, &str)> {
    let rest = &line[line.find(MARK)? + MARK.len()..];
    let rest = rest.trim_start();
    let (word, args) = rest.split_once(' ').unwrap_or((rest, ""));
    let kv = args
        .split_whitespace()
        .filter_map(|a| a.split_once('='))
        .collect();
    Some((word, kv, args))
}

/// A test line's name and verdict (`ok`, `FAILED`, …), from `NAME ... VERDICT` (the line
/// after `test `). When the kernel printed into the line while the test ran
/// (`NAME ... [  470.167452] Invalid ELF header len 3`), the verdict is on the next line.
fn test_verdict<'a>(rest: &'a str, next: Option<&'a str>) -> Option<(&'a str, &'a str)> {
    let (name, verdict) = rest.split_once(" ... ")?;
    let verdict = verdict.trim();
    if is_kernel_message(verdict) {
        return Some((name, next?.trim()));
    }
    Some((name, verdict))
}

/// Text the kernel prints on the console: `[  470.167452] …`.
fn is_kernel_message(s: &str) -> bool {
    s.strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .is_some_and(|(stamp, _)| {
            let stamp = stamp.trim();
            !stamp.is_empty() && stamp.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
}

pub(super) struct BinResult {
    pub(super) ran: bool,
    pub(super) status: Option<i32>,
    pub(super) seconds: Option<f64>,
    pub(super) passed: usize,
    pub(super) failed: Vec<String>,
    /// Filters with no `test NAME ... ok` line.
    pub(super) not_passed: Vec<&'static str>,
    pub(super) result_lines: usize,
    /// Console line numbers (1-based, as in console.log) of this binary's output.
    pub(super) section: std::ops::Range<usize>,
    pub(super) pass: bool,
}

pub(super) struct Outcome {
    pub(super) booted_kernel: Option<String>,
    pub(super) boot_seconds: Option<f64>,
    pub(super) hook: Option<String>,
    /// Console lines of the sanity run (its stderr when it failed).
    pub(super) sanity: std::ops::Range<usize>,
    pub(super) setup_failed: Option<String>,
    pub(super) done: bool,
    /// The console line where the kernel first said it hung (a soft lockup).
    pub(super) lockup: Option<usize>,
    pub(super) bins: Vec<BinResult>,
    pub(super) pass: bool,
    pub(super) problems: Vec<String>,
}

/// A test binary's `end` marker: its exit status, the host's seconds since its `begin`, and
/// the console line.
#[derive(Clone, Copy)]
pub(super) struct End {
    pub(super) status: i32,
    pub(super) seconds: f64,
    pub(super) line: usize,
}

pub(super) fn evaluate(plan: &[Planned], boot: &Boot) -> Outcome {
    let mut o = Outcome {
        booted_kernel: None,
        boot_seconds: None,
        hook: None,
        sanity: 0..0,
        setup_failed: None,
        done: false,
        lockup: None,
        bins: Vec::new(),
        pass: false,
        problems: Vec::new(),
    };
    // name → (host time at begin, first line, end)
    let mut sections: HashMap<String, (f64, usize, Option<End>)> = HashMap::new();
    for (i, (t, line)) in boot.lines.iter().enumerate() {
        let n = i + 1;
        if o.lockup.is_none() && line.contains(LOCKUP) {
            o.lockup = Some(n);
        }
        let Some((word, kv, args)) = marker(line) else {
            continue;
        };
        match word {
            "init" => o.booted_kernel = kv.get("kernel").map(|s| s.to_string()),
            "userland" => {
                o.boot_seconds = Some(*t);
                o.sanity = n + 1..n + 1;
            }
            "probe" => {
                o.hook = kv.get("file_open").map(|s| s.to_string());
                o.sanity.end = n;
            }
            "setup-failed" => o.setup_failed = Some(args.to_string()),
            "begin" => {
                let name = args.split_whitespace().next().unwrap_or("").to_string();
                sections.insert(name, (*t, n + 1, None));
            }
            "end" => {
                let name = args.split_whitespace().next().unwrap_or("");
                let status = kv.get("status").and_then(|s| s.parse().ok()).unwrap_or(-1);
                if let Some(s) = sections.get_mut(name) {
                    s.2 = Some(End {
                        status,
                        seconds: *t - s.0,
                        line: n,
                    });
                }
            }
            "done" => o.done = true,
            "lockup" => {
                o.lockup.get_or_insert(n);
            }
            _ => {}
        }
    }

    for p in plan {
        let (section, end) = match sections.get(p.name) {
            // A binary that never ended (timeout) runs to the end of the console.
            Some(&(_, first, end)) => (first..end.map_or(boot.lines.len() + 1, |e| e.line), end),
            None => (0..0, None),
        };
        let mut passed_names = HashSet::new();
        let mut failed = Vec::new();
        let mut passed = 0;
        let mut result_lines = 0;
        for n in section.clone() {
            let l = boot.lines[n - 1].1.as_str();
            if let Some(rest) = l.strip_prefix("test ")
                && let Some((name, verdict)) =
                    test_verdict(rest, boot.lines.get(n).map(|l| l.1.as_str()))
            {
                match verdict {
                    "ok" => {
                        passed_names.insert(name.to_string());
                    }
                    "FAILED" => failed.push(name.to_string()),
                    _ => {}
                }
            }
            if let Some(r) = l.strip_prefix("test result: ") {
                result_lines += 1;
                passed += r
                    .split(". ")
                    .nth(1)
                    .and_then(|c| c.split(' ').next())
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(0);
            }
        }
        let not_passed: Vec<&str> = p
            .filters
            .iter()
            .copied()
            .filter(|f| !passed_names.contains(*f))
            .collect();
        let status = end.map(|e| e.status);
        let pass = status == Some(0)
            && result_lines == 1
            && passed == p.filters.len()
            && not_passed.is_empty();
        o.bins.push(BinResult {
            ran: end.is_some(),
            status,
            seconds: end.map(|e| e.seconds),
            passed,
            failed,
            not_passed,
            result_lines,
            section,
            pass,
        });
    }

    if let Some(n) = o.lockup {
        o.problems.push(format!(
            "the guest kernel hung (a soft lockup): {} (console line {n}; the kernel's trace \
             follows as `kernel| ` lines)",
            boot.lines[n - 1].1.trim()
        ));
    }
    if boot.timed_out {
        o.problems
            .push("qemu was killed at the timeout (SW_VM_TIMEOUT)".into());
    }
    if let Some(why) = &o.setup_failed {
        o.problems
            .push(format!("the guest could not be set up: {why}"));
    }
    match boot.exit {
        Some(1) => {}
        Some(c) if c & 1 == 1 => o.problems.push(format!(
            "the guest reported status {} (qemu exit {c})",
            c >> 1
        )),
        Some(c) => o.problems.push(format!(
            "qemu exited {c} without a status from the guest (a guest panic or power-off)"
        )),
        None if boot.timed_out => {}
        None => o.problems.push("qemu was killed by a signal".into()),
    }
    match o.hook.as_deref() {
        Some(GUEST_HOOK) => {}
        Some(h) => o.problems.push(format!(
            "the sanity run in the guest gave open hook {h:?}, expected {GUEST_HOOK:?} on this \
             kernel (console.log lines {}-{})",
            o.sanity.start,
            o.sanity.end.saturating_sub(1)
        )),
        None => o
            .problems
            .push("no probe sanity line from the guest".into()),
    }
    if !o.done && o.setup_failed.is_none() {
        o.problems
            .push("the guest script did not finish (no `done` line)".into());
    }
    o.pass = o.problems.is_empty() && o.bins.iter().all(|b| b.pass);
    o
}

/// A failed test's output with what differs between runs of one failure left out: its name,
/// numbers (addresses, pids, line numbers).
pub(super) fn failure_key(test: &str, lines: &[(f64, String)]) -> String {
    let mut key = String::new();
    for (_, l) in lines {
        let l = l.replace(test, "TEST");
        let mut token = String::new();
        let flush = |token: &mut String, key: &mut String| {
            let number = token.starts_with("0x")
                || (token.chars().all(|c| c.is_ascii_hexdigit())
                    && token.chars().any(|c| c.is_ascii_digit()));
            key.push_str(if number && !token.is_empty() {
                "#"
            } else {
                token
            });
            token.clear();
        };
        for c in l.chars() {
            if c.is_ascii_alphanumeric() {
                token.push(c);
            } else {
                flush(&mut token, &mut key);
                key.push(c);
            }
        }
        flush(&mut token, &mut key);
        key.push('\n');
    }
    key
}

/// Lines `range` of the console (1-based), the first `head` and last `tail` of them.
pub(super) fn excerpt(
    w: &mut String,
    boot: &Boot,
    range: std::ops::Range<usize>,
    head: usize,
    tail: usize,
) {
    let len = range.len();
    for (k, n) in range.clone().enumerate() {
        if len > head + tail && k == head {
            let _ = writeln!(
                w,
                "    [… {} lines: console.log lines {}-{} …]",
                len - head - tail,
                n,
                range.end - tail - 1
            );
        }
        if len <= head + tail || k < head || k >= len - tail {
            let _ = writeln!(w, "{}", boot.lines[n - 1].1);
        }
    }
}

pub(super) fn summary(
    kernel: &Kernel,
    plan: &[Planned],
    boot: &Boot,
    o: &Outcome,
    setup: Duration,
    total: Duration,
    console: &Path,
) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "\n==== vm-test summary ====");
    let _ = writeln!(
        w,
        "kernel: {} booted ({}), open hook in the guest: {}",
        o.booted_kernel
            .as_deref()
            .unwrap_or("(never reached /init)"),
        kernel.package,
        o.hook.as_deref().unwrap_or("(unknown)")
    );
    match o.boot_seconds {
        Some(b) => {
            let _ = writeln!(
                w,
                "boot: {b:.1} s (qemu start to the host's userland running in the guest)"
            );
        }
        None => {
            let _ = writeln!(w, "boot: did not reach the guest script");
        }
    }
    for (p, b) in plan.iter().zip(&o.bins) {
        let verdict = if b.pass { "PASS" } else { "FAIL" };
        let mut line = format!(
            "{:<8} {verdict}  {}/{} passed",
            p.name,
            b.passed,
            p.filters.len()
        );
        if let Some(t) = b.seconds {
            let _ = write!(line, " in {t:.1} s");
        }
        if let Some(st) = b.status
            && st != 0
        {
            let _ = write!(line, ", exit status {st}");
        }
        if p.exe.is_none() {
            line.push_str(", no such test binary");
        } else if !b.ran {
            line.push_str(", did not finish");
        } else if b.result_lines != 1 {
            let _ = write!(line, ", {} `test result:` lines", b.result_lines);
        }
        let _ = writeln!(w, "{line}");
        for f in &b.failed {
            let _ = writeln!(w, "           failed:  {f}");
        }
        for m in &p.missing {
            let _ = writeln!(
                w,
                "           missing: {m} (not in this build: 0 tests ran for it)"
            );
        }
        for n in &b.not_passed {
            if !b.failed.iter().any(|f| f == n) && !p.missing.contains(n) {
                let _ = writeln!(w, "           not run: {n}");
            }
        }
    }
    let _ = writeln!(
        w,
        "time: {:.1} s total = {:.1} s setup and builds + {:.1} s qemu (boot and tests)",
        total.as_secs_f64(),
        setup.as_secs_f64(),
        boot.wall.as_secs_f64()
    );
    for p in &o.problems {
        let _ = writeln!(w, "problem: {p}");
    }

    // What a failure needs to be debugged without a rerun.
    if o.hook.as_deref() != Some(GUEST_HOOK) && !o.sanity.is_empty() {
        let _ = writeln!(
            w,
            "\n---- sanity run `sandbox-watch run -- true` in the guest (console.log lines {}-{}) ----",
            o.sanity.start,
            o.sanity.end - 1
        );
        excerpt(w, boot, o.sanity.clone(), 12, 12);
    }
    let mut shown: HashMap<String, (&str, String)> = HashMap::new();
    for (p, b) in plan.iter().zip(&o.bins) {
        if b.pass || b.section.is_empty() {
            continue;
        }
        // libtest prints each failed test's output as a `---- NAME stdout ----` block.
        let mut blocks = Vec::new();
        for n in b.section.clone() {
            let l = boot.lines[n - 1].1.as_str();
            if l.starts_with("---- ") && l.ends_with(" stdout ----") {
                blocks.push(n..b.section.end);
                if blocks.len() > 1 {
                    let k = blocks.len() - 2;
                    blocks[k].end = n;
                }
            } else if l == "failures:"
                && let Some(last) = blocks.last_mut()
                && last.end == b.section.end
            {
                last.end = n;
            }
        }
        if blocks.is_empty() {
            let _ = writeln!(
                w,
                "\n---- {} in the guest, last lines (console.log lines {}-{}) ----",
                p.name,
                b.section.start,
                b.section.end - 1
            );
            let from = b.section.end.saturating_sub(40).max(b.section.start);
            excerpt(w, boot, from..b.section.end, 40, 0);
        }
        for r in blocks {
            // The same failure in many tests (the probe cannot start) is shown once.
            let header = boot.lines[r.start - 1].1.as_str();
            let test = header
                .trim_start_matches("---- ")
                .trim_end_matches(" stdout ----");
            let key = failure_key(test, &boot.lines[r.start..r.end - 1]);
            if let Some((first_bin, first_test)) = shown.get(&key) {
                let _ = writeln!(
                    w,
                    "\n---- {}: {test}: the same output as {first_bin}: {first_test} \
                     (console.log lines {}-{}) ----",
                    p.name,
                    r.start,
                    r.end - 1
                );
                continue;
            }
            shown.insert(key, (p.name, test.to_string()));
            let _ = writeln!(
                w,
                "\n---- {} in the guest: console.log lines {}-{} ----",
                p.name,
                r.start,
                r.end - 1
            );
            excerpt(w, boot, r, 20, 12);
        }
    }
    if o.bins.iter().all(|b| b.section.is_empty()) && !boot.lines.is_empty() {
        let _ = writeln!(w, "\n---- last console lines ----");
        let n = boot.lines.len();
        excerpt(w, boot, n.saturating_sub(60) + 1..n + 1, 60, 0);
    }
    let _ = writeln!(w, "\nconsole: {}", console.display());
    let _ = writeln!(w, "RESULT: {}", if o.pass { "PASS" } else { "FAIL" });
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_read_past_a_kernel_message_printed_into_the_line() {
        let rest = "a_kernel_module_load_is_tamper_or_a_named_gap ... [  470.167452] Invalid ELF header len 3";
        assert_eq!(
            test_verdict(rest, Some("ok")),
            Some(("a_kernel_module_load_is_tamper_or_a_named_gap", "ok"))
        );
        assert_eq!(
            test_verdict(rest, Some("FAILED")).map(|v| v.1),
            Some("FAILED")
        );
        assert_eq!(test_verdict("x ... ok", None), Some(("x", "ok")));
        assert_eq!(
            test_verdict("x ... FAILED", Some("ok")),
            Some(("x", "FAILED"))
        );
        // Not a kernel stamp: the verdict stays what the line says (and is neither ok nor FAILED).
        assert_eq!(
            test_verdict("x ... [ignored]", Some("ok")),
            Some(("x", "[ignored]"))
        );
        assert_eq!(test_verdict("no verdict here", Some("ok")), None);
    }
}
