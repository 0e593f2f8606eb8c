//! Findings and changes: the one currency every check produces and every
//! renderer consumes.

pub mod change;

use std::fmt;

/// How bad a finding or change is.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; not a problem by itself.
    Info,
    /// A weak signal.
    Low,
    /// Needs a reviewer's attention.
    Medium,
    /// Refuse until a person has looked.
    High,
}

impl Severity {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How sure a rule is that a match is what it claims.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Often wrong.
    Low,
    /// Usually right.
    Medium,
    /// Almost always right.
    High,
}

impl Confidence {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

impl fmt::Display for Confidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A byte range in an input file, `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
pub struct ByteSpan {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl ByteSpan {
    /// A span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Self {
        ByteSpan { start, end }
    }
}

/// A secondary location that explains a finding ("the tool it shadows", "the
/// other definition").
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Related {
    /// The bytes.
    pub span: ByteSpan,
    /// Where they are (RFC 6901, inside the same file).
    pub pointer: String,
    /// What they are.
    pub label: String,
}

/// The kind of MCP object a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Subject {
    /// A tool.
    Tool,
    /// A prompt.
    Prompt,
    /// A resource or resource template.
    Resource,
    /// The server as a whole (instructions, server info, the tool list).
    Server,
    /// The file (duplicate keys outside any tool).
    File,
}

/// One problem found by one rule, at one exact place.
///
/// Every finding has a primary location: the input file, an RFC 6901 pointer
/// inside it and the exact byte range of the offending bytes in the raw file
/// (escapes included), so a reviewer sees precisely what the rule saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule's kebab-case id.
    pub rule: String,
    /// Severity after configuration.
    pub severity: Severity,
    /// The rule's confidence.
    pub confidence: Confidence,
    /// What is wrong, in one sentence.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
    /// The input file as given on the command line.
    pub path: String,
    /// The server's name, when the finding belongs to one.
    pub server: Option<String>,
    /// What the finding is about.
    pub subject: Subject,
    /// The tool, prompt or resource name (None for server- and file-level findings).
    pub name: Option<String>,
    /// Where in the file (RFC 6901).
    pub pointer: String,
    /// The exact bytes in the raw file.
    pub span: ByteSpan,
    /// 1-based line of `span.start`.
    pub line: usize,
    /// 1-based column (in characters) of `span.start`.
    pub column: usize,
    /// A short label for the primary span ("instruction to the model").
    pub label: String,
    /// Other places that explain the finding.
    pub related: Vec<Related>,
    /// Extra facts, such as the decoded text of hidden Unicode tag characters.
    pub notes: Vec<String>,
}

impl Finding {
    /// The tool name, if the finding is about a tool.
    pub fn tool(&self) -> Option<&str> {
        (self.subject == Subject::Tool)
            .then_some(self.name.as_deref())
            .flatten()
    }
    /// The prompt name, if the finding is about a prompt.
    pub fn prompt(&self) -> Option<&str> {
        (self.subject == Subject::Prompt)
            .then_some(self.name.as_deref())
            .flatten()
    }
    /// The resource name, if the finding is about a resource.
    pub fn resource(&self) -> Option<&str> {
        (self.subject == Subject::Resource)
            .then_some(self.name.as_deref())
            .flatten()
    }

    /// Sort key: file, position, rule.
    pub fn sort_key(&self) -> (&str, usize, usize, &str) {
        (&self.path, self.span.start, self.span.end, &self.rule)
    }
}

/// Counts of findings by severity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// High.
    pub high: usize,
    /// Medium.
    pub medium: usize,
    /// Low.
    pub low: usize,
    /// Info.
    pub info: usize,
}

impl Counts {
    /// Counts `findings`.
    pub fn of(findings: &[Finding]) -> Self {
        let mut c = Counts::default();
        for f in findings {
            match f.severity {
                Severity::High => c.high += 1,
                Severity::Medium => c.medium += 1,
                Severity::Low => c.low += 1,
                Severity::Info => c.info += 1,
            }
        }
        c
    }
    /// Total.
    pub fn total(&self) -> usize {
        self.high + self.medium + self.low + self.info
    }
}

/// Line starts and a character-count table of a text, for 1-based line and
/// column lookups in O(log n): the table makes columns cheap even in a
/// manifest written on one 100 MB line.
#[derive(Clone, Debug, Default)]
pub struct LineIndex {
    starts: Vec<usize>,
    /// Characters (non-continuation bytes) before each `BLOCK`-byte block.
    block_chars: Vec<usize>,
}

/// Granularity of [`LineIndex`]'s character table.
const BLOCK: usize = 1024;

impl LineIndex {
    /// Indexes `text`.
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        let mut block_chars = Vec::with_capacity(bytes.len() / BLOCK + 2);
        let mut chars = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if i % BLOCK == 0 {
                block_chars.push(chars);
            }
            if b & 0xc0 != 0x80 {
                chars += 1;
            }
            if b == b'\n' {
                starts.push(i + 1);
            }
        }
        block_chars.push(chars);
        LineIndex {
            starts,
            block_chars,
        }
    }

    /// Characters in `text[..offset]`.
    fn chars_upto(&self, text: &str, offset: usize) -> usize {
        let block = offset / BLOCK;
        let from = block * BLOCK;
        self.block_chars[block]
            + text.as_bytes()[from..offset]
                .iter()
                .filter(|&&b| b & 0xc0 != 0x80)
                .count()
    }

    /// 1-based line and column (in characters) of byte `offset` in `text`
    /// (the text this index was built from).
    pub fn line_col(&self, text: &str, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line.saturating_sub(1)];
        (
            line,
            self.chars_upto(text, offset) - self.chars_upto(text, start) + 1,
        )
    }
}
