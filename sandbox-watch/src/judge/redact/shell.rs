//! A shell script split into the words and commands a POSIX shell (or bash) would make of it,
//! each word knowing which bytes of the script each of its characters was written as.
//!
//! Quotes (`'…'`, `"…"`, `$'…'`) and backslashes are honoured; `;` `&` `|` `(` `)` and
//! newlines end a command; redirections (`>`, `2>&1`, `<<EOF`, …) and their targets are not
//! words of the command; `#` at the start of a word starts a comment. Command substitutions
//! (`$(…)`, backticks, also inside double quotes) are scripts of their own: their commands are
//! listed too, and the word they are part of keeps them as written. Other expansions (`$X`,
//! `${X}`, `$((…))`) are kept as written. Here-document bodies are texts, not commands.
use std::ops::Range;

use super::Word;

/// What a script holds: its commands (those of its substitutions included), and texts that
/// are no command but may hold a secret (here-documents, redirection targets).
pub struct Script<'a> {
    pub commands: Vec<Vec<Word<'a>>>,
    pub texts: Vec<Word<'a>>,
}

/// A word being built: its text and, for each character, where it was in the script.
#[derive(Default)]
struct Building {
    text: String,
    map: Vec<(usize, Range<usize>)>,
}

impl Building {
    fn push(&mut self, c: char, from: Range<usize>) {
        self.map.push((self.text.len(), from));
        self.text.push(c);
    }
}

struct Lexer<'s> {
    s: &'s str,
    at: usize,
    commands: Vec<Vec<Building>>,
    texts: Vec<Building>,
    /// Here-documents whose bodies start at the next newline: delimiter, `<<-`.
    heredocs: Vec<(String, bool)>,
}

/// Splits `script`'s text into commands.
pub fn split<'a>(script: &'a Word<'a>) -> Script<'a> {
    let mut lx = Lexer {
        s: &script.text,
        at: 0,
        commands: Vec::new(),
        texts: Vec::new(),
        heredocs: Vec::new(),
    };
    lx.script(None);
    let word = |b: Building| Word::shell(script, b.text, b.map);
    Script {
        commands: lx
            .commands
            .into_iter()
            .map(|c| c.into_iter().map(word).collect())
            .collect(),
        texts: lx.texts.into_iter().map(word).collect(),
    }
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.s[self.at..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut it = self.s[self.at..].chars();
        it.next();
        it.next()
    }

    /// The next character and its bytes in the script.
    fn next(&mut self) -> Option<(char, Range<usize>)> {
        let c = self.peek()?;
        let start = self.at;
        self.at += c.len_utf8();
        Some((c, start..self.at))
    }

    /// Reads commands until `end` (`)` of `$(`, a backtick) or the end of the script; returns
    /// with `end` consumed.
    fn script(&mut self, end: Option<char>) {
        let mut cmd: Vec<Building> = Vec::new();
        let mut word: Option<Building> = None;
        // The next word is a redirection's target, not an argument.
        let mut target = false;
        let mut parens = 0usize;
        let finish = |word: &mut Option<Building>,
                      cmd: &mut Vec<Building>,
                      texts: &mut Vec<Building>,
                      target: &mut bool| {
            if let Some(w) = word.take() {
                if std::mem::take(target) {
                    texts.push(w);
                } else {
                    cmd.push(w);
                }
            }
        };
        while let Some(c) = self.peek() {
            if Some(c) == end && (c != ')' || parens == 0) {
                self.next();
                break;
            }
            match c {
                ' ' | '\t' => {
                    self.next();
                    finish(&mut word, &mut cmd, &mut self.texts, &mut target);
                }
                '\n' | ';' | '&' | '|' | '(' | ')' => {
                    if c == '&' && self.peek2() == Some('>') {
                        // &> and &>>: a redirection of both outputs.
                        finish(&mut word, &mut cmd, &mut self.texts, &mut target);
                        self.next();
                        self.redirection(&mut target);
                        continue;
                    }
                    self.next();
                    finish(&mut word, &mut cmd, &mut self.texts, &mut target);
                    if !cmd.is_empty() {
                        self.commands.push(std::mem::take(&mut cmd));
                    }
                    match c {
                        '(' => parens += 1,
                        ')' => parens = parens.saturating_sub(1),
                        '\n' => self.heredoc_bodies(),
                        _ => {}
                    }
                }
                '<' | '>' => {
                    // A word of digits just before is the file descriptor (2>&1).
                    if word
                        .as_ref()
                        .is_some_and(|w| w.text.bytes().all(|b| b.is_ascii_digit()))
                    {
                        word = None;
                    }
                    finish(&mut word, &mut cmd, &mut self.texts, &mut target);
                    self.redirection(&mut target);
                }
                '#' if word.is_none() => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.next();
                    }
                }
                _ => {
                    let w = word.get_or_insert_with(Building::default);
                    self.word_part(w, end);
                }
            }
        }
        finish(&mut word, &mut cmd, &mut self.texts, &mut target);
        if !cmd.is_empty() {
            self.commands.push(cmd);
        }
    }

    /// A redirection operator at `<` or `>`: consumes it (and a here-document's delimiter, or
    /// a `>&2`'s descriptor); otherwise the next word is its target.
    fn redirection(&mut self, target: &mut bool) {
        let Some((first, _)) = self.next() else {
            return;
        };
        let mut heredoc = false;
        match (first, self.peek()) {
            ('<', Some('<')) => {
                self.next();
                if self.peek() == Some('<') {
                    self.next(); // <<< here-string: its word is a target
                } else {
                    heredoc = true;
                }
            }
            ('>', Some('>' | '|')) | ('<', Some('>')) => {
                self.next();
            }
            (_, Some('&')) => {
                self.next();
                if self.peek().is_some_and(|c| c.is_ascii_digit() || c == '-') {
                    while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '-') {
                        self.next();
                    }
                    return;
                }
            }
            _ => {}
        }
        if !heredoc {
            *target = true;
            return;
        }
        let strip_tabs = self.peek() == Some('-');
        if strip_tabs {
            self.next();
        }
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.next();
        }
        let mut delim = Building::default();
        while self
            .peek()
            .is_some_and(|c| !matches!(c, ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>'))
        {
            self.word_part(&mut delim, None);
        }
        self.heredocs.push((delim.text, strip_tabs));
    }

    /// After a newline: the bodies of the here-documents started on the line before.
    fn heredoc_bodies(&mut self) {
        for (delim, strip_tabs) in std::mem::take(&mut self.heredocs) {
            let start = self.at;
            let mut end = self.s.len();
            while self.at < self.s.len() {
                let line_start = self.at;
                let line_end = self.s[line_start..]
                    .find('\n')
                    .map_or(self.s.len(), |n| line_start + n);
                self.at = (line_end + 1).min(self.s.len());
                let line = &self.s[line_start..line_end];
                let line = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line == delim {
                    end = line_start;
                    break;
                }
            }
            let mut body = Building::default();
            for (i, c) in self.s[start..end].char_indices() {
                body.push(c, start + i..start + i + c.len_utf8());
            }
            self.texts.push(body);
        }
    }

    /// One part of a word at the current place: a quoted string, an escape, an expansion or
    /// a plain character.
    fn word_part(&mut self, w: &mut Building, end: Option<char>) {
        let Some(c) = self.peek() else { return };
        match c {
            '\'' => {
                self.next();
                while let Some((c, r)) = self.next() {
                    if c == '\'' {
                        break;
                    }
                    w.push(c, r);
                }
            }
            '"' => {
                self.next();
                self.double_quoted(w);
            }
            '\\' => {
                let (_, r) = self.next().expect("peeked");
                match self.next() {
                    Some(('\n', _)) => {}
                    Some((c, r2)) => w.push(c, r.start..r2.end),
                    None => w.push('\\', r),
                }
            }
            '$' => self.dollar(w),
            '`' if end != Some('`') => self.backticks(w),
            _ => {
                let (c, r) = self.next().expect("peeked");
                w.push(c, r);
            }
        }
    }

    fn double_quoted(&mut self, w: &mut Building) {
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.next();
                    return;
                }
                '\\' => {
                    let (_, r) = self.next().expect("peeked");
                    match self.peek() {
                        Some('"' | '\\' | '$' | '`') => {
                            let (c, r2) = self.next().expect("peeked");
                            w.push(c, r.start..r2.end);
                        }
                        Some('\n') => {
                            self.next();
                        }
                        _ => w.push('\\', r),
                    }
                }
                '$' => self.dollar(w),
                '`' => self.backticks(w),
                _ => {
                    let (c, r) = self.next().expect("peeked");
                    w.push(c, r);
                }
            }
        }
    }

    /// `$(…)` (a script), `$((…))`, `${…}`, `$'…'`, or a plain `$`: kept in the word as
    /// written (but `$'…'`'s quotes).
    fn dollar(&mut self, w: &mut Building) {
        let start = self.at;
        self.next();
        match self.peek() {
            Some('(') if self.peek2() == Some('(') => self.balanced('(', ')'),
            Some('(') => {
                self.next();
                self.nested(Some(')'));
            }
            Some('{') => self.balanced('{', '}'),
            Some('\'') => {
                self.next();
                while let Some((c, r)) = self.next() {
                    match c {
                        '\'' => return,
                        '\\' => {
                            w.push(c, r);
                            if let Some((c, r)) = self.next() {
                                w.push(c, r);
                            }
                        }
                        _ => w.push(c, r),
                    }
                }
                return;
            }
            _ => {}
        }
        self.keep(w, start);
    }

    fn backticks(&mut self, w: &mut Building) {
        let start = self.at;
        self.next();
        self.nested(Some('`'));
        self.keep(w, start);
    }

    /// A command substitution's script: its commands join the list; the word being built
    /// is left as it was.
    fn nested(&mut self, end: Option<char>) {
        let heredocs = std::mem::take(&mut self.heredocs);
        self.script(end);
        self.heredocs = heredocs;
    }

    /// From an opening bracket to its matching closing one, quotes skipped.
    fn balanced(&mut self, open: char, close: char) {
        let mut depth = 0usize;
        while let Some((c, _)) = self.next() {
            match c {
                '\'' => while self.next().is_some_and(|(c, _)| c != '\'') {},
                '\\' => {
                    self.next();
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// Adds the script's characters from `start` to here to the word, as written.
    fn keep(&mut self, w: &mut Building, start: usize) {
        for (i, c) in self.s[start..self.at].char_indices() {
            w.push(c, start + i..start + i + c.len_utf8());
        }
    }
}
