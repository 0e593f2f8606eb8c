//! Named regex fragments of rule files, and where each byte of an expanded
//! pattern came from.
//!
//! A rule file may define a piece of regex once and use it in several
//! patterns (a list of secret files, the verbs of a request):
//!
//! ```toml
//! fragments.secret_file = '''\.ssh/id_\w+|\.aws/credentials|\.netrc'''
//! patterns = ['''\bread\s+(?&secret_file)''', '''(?&secret_file)\s+into\s+`\w+`''']
//! ```
//!
//! `(?&name)` (the spelling PCRE gives a call to a named group; the `regex`
//! crate rejects it, so a reference can never be mistaken for regex syntax)
//! is replaced by the fragment as a non-capturing group, `(?:…)`. Fragments
//! may use other fragments of the same file; a cycle, an unknown name or a
//! malformed reference is an error at the reference's bytes. Patterns and
//! negative patterns (`unless`) may both use them.
//!
//! An expanded pattern keeps a map back to the rule file, so that a regex
//! syntax error points at the exact bytes of the file, inside whichever
//! pattern or fragment holds them ([`Expanded::source_span`]).

use std::collections::HashMap;
use std::ops::Range;

/// Longest pattern once its fragments are expanded: a fragment used twice by
/// another, nested a few dozen times, would otherwise grow without bound.
const MAX_EXPANDED: usize = 1 << 20;

/// A problem with a fragment or a reference, at a span of the rule file.
#[derive(Debug)]
pub struct FragmentError {
    /// The bytes of the rule file it is about.
    pub span: Range<usize>,
    /// What is wrong.
    pub message: String,
    /// A short label for the span.
    pub label: &'static str,
}

/// One stretch of an expanded pattern.
#[derive(Clone, Debug)]
struct Piece {
    /// Where it begins in the expanded pattern (it runs to the next piece).
    at: usize,
    /// Where its first byte is in the rule file, when its bytes are the
    /// file's bytes one for one (a string without escapes).
    src: Option<usize>,
    /// What to point at otherwise: the string or the reference it came from.
    whole: Range<usize>,
}

/// A pattern with its fragments expanded.
#[derive(Clone, Debug)]
pub struct Expanded {
    /// The pattern as the regex engine reads it.
    pub text: String,
    pieces: Vec<Piece>,
}

impl Expanded {
    /// The bytes of the rule file that `range` of [`Expanded::text`] came
    /// from: exact inside one string written without escapes, else the whole
    /// string or fragment reference that holds its start.
    pub fn source_span(&self, range: Range<usize>) -> Range<usize> {
        let i = self
            .pieces
            .partition_point(|p| p.at <= range.start)
            .saturating_sub(1);
        let Some(p) = self.pieces.get(i) else {
            return 0..0;
        };
        let Some(src) = p.src else {
            return p.whole.clone();
        };
        let piece_end = self.pieces.get(i + 1).map_or(self.text.len(), |n| n.at);
        let start = src + (range.start - p.at);
        start..src + (range.end.clamp(range.start, piece_end) - p.at)
    }
}

impl Expanded {
    /// The first syntax error of the pattern, as the `regex` crate's parser
    /// (case-insensitive) finds it: the rule file's bytes it is at (see
    /// [`Expanded::source_span`]) and what is wrong.
    pub fn syntax_error(&self) -> Option<(Range<usize>, String)> {
        let err = regex_syntax::ParserBuilder::new()
            .case_insensitive(true)
            .build()
            .parse(&self.text)
            .err()?;
        let (span, kind) = match &err {
            regex_syntax::Error::Parse(p) => (p.span(), p.kind().to_string()),
            regex_syntax::Error::Translate(t) => (t.span(), t.kind().to_string()),
            // Not produced by this version of the parser: the whole pattern.
            _ => {
                return Some((
                    self.source_span(0..self.text.len()),
                    format!("bad regex: {err}"),
                ))
            }
        };
        Some((
            self.source_span(span.start.offset..span.end.offset),
            format!("bad regex: {kind}"),
        ))
    }
}

/// The fragments of one rule file.
pub struct Fragments<'a> {
    file: &'a str,
    /// Name to (value, span of the value's string in the file).
    defs: HashMap<&'a str, (&'a str, Range<usize>)>,
}

impl<'a> Fragments<'a> {
    /// The fragments `defs` (name and value, each with its span in `file`).
    /// A name must be lower-case ASCII letters, digits and `_`, beginning
    /// with a letter.
    pub fn new(
        file: &'a str,
        defs: impl IntoIterator<Item = (&'a str, Range<usize>, &'a str, Range<usize>)>,
    ) -> Result<Fragments<'a>, FragmentError> {
        let mut map = HashMap::new();
        for (name, name_span, value, value_span) in defs {
            let well_formed = name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
                && name.bytes().all(is_name_byte);
            if !well_formed {
                return Err(FragmentError {
                    span: name_span,
                    message: "a fragment name is lower-case letters, digits and `_`, \
                              beginning with a letter"
                        .into(),
                    label: "this name",
                });
            }
            map.insert(name, (value, value_span));
        }
        Ok(Fragments { file, defs: map })
    }

    /// Checks that each fragment is a whole regex on its own (a fragment
    /// such as `a|(b` would otherwise close over the pattern around it, and
    /// its error would point at every reference instead of at it).
    pub fn check(&self) -> Result<(), FragmentError> {
        let mut names: Vec<_> = self.defs.keys().copied().collect();
        names.sort_unstable();
        for name in names {
            let (value, span) = &self.defs[name];
            let mut stack = vec![name.to_string()];
            let mut e = Expanded {
                text: String::new(),
                pieces: Vec::new(),
            };
            self.expand_into(value, span.clone(), &mut e, &mut stack)?;
            if let Some((span, message)) = e.syntax_error() {
                return Err(FragmentError {
                    span,
                    message: format!("fragment `{name}`: {message}"),
                    label: "here",
                });
            }
        }
        Ok(())
    }

    /// `value` (a pattern written at `span` of the file, quotes included)
    /// with every `(?&name)` replaced by its fragment.
    pub fn expand(&self, value: &str, span: Range<usize>) -> Result<Expanded, FragmentError> {
        let mut out = Expanded {
            text: String::with_capacity(value.len()),
            pieces: Vec::new(),
        };
        let mut stack = Vec::new();
        self.expand_into(value, span, &mut out, &mut stack)?;
        Ok(out)
    }

    fn expand_into(
        &self,
        value: &str,
        span: Range<usize>,
        out: &mut Expanded,
        stack: &mut Vec<String>,
    ) -> Result<(), FragmentError> {
        let base = value_start(self.file, &span, value);
        // The file's bytes for `r` of `value`, or the whole string.
        let at = |r: Range<usize>| base.map_or(span.clone(), |b| b + r.start..b + r.end);
        let push = |out: &mut Expanded, from: usize, to: usize| {
            if from < to {
                out.pieces.push(Piece {
                    at: out.text.len(),
                    src: base.map(|b| b + from),
                    whole: span.clone(),
                });
                out.text.push_str(&value[from..to]);
            }
        };
        let b = value.as_bytes();
        let (mut i, mut copied, mut class_depth) = (0, 0, 0usize);
        while i < b.len() {
            match b[i] {
                // An escaped byte is never a reference's start; a multi-byte
                // character's other bytes are not ASCII, so they are
                // skipped as ordinary bytes.
                b'\\' => i += 2,
                // A `]` first in a class (or after `^`) is a literal.
                b'[' => {
                    class_depth += 1;
                    i += 1;
                    if b.get(i) == Some(&b'^') {
                        i += 1;
                    }
                    if b.get(i) == Some(&b']') {
                        i += 1;
                    }
                }
                b']' if class_depth > 0 => {
                    class_depth -= 1;
                    i += 1;
                }
                b'(' if class_depth == 0 && b[i..].starts_with(b"(?&") => {
                    let name_end =
                        i + 3 + b[i + 3..].iter().take_while(|&&c| is_name_byte(c)).count();
                    if name_end == i + 3 || b.get(name_end) != Some(&b')') {
                        return Err(FragmentError {
                            span: at(i..if name_end == i + 3 {
                                name_end
                            } else {
                                (name_end + 1).min(b.len())
                            }),
                            message: "`(?&` begins a fragment reference, written `(?&name)`".into(),
                            label: "this reference",
                        });
                    }
                    let name = &value[i + 3..name_end];
                    let reference = at(i..name_end + 1);
                    let Some((fragment, fragment_span)) = self.defs.get(name) else {
                        let mut known: Vec<_> = self.defs.keys().copied().collect();
                        known.sort_unstable();
                        let known = if known.is_empty() {
                            "this file defines none".to_string()
                        } else {
                            format!("this file defines {}", known.join(", "))
                        };
                        return Err(FragmentError {
                            span: reference,
                            message: format!("no fragment named `{name}` ({known})"),
                            label: "unknown fragment",
                        });
                    };
                    if stack.iter().any(|s| s == name) {
                        return Err(FragmentError {
                            span: reference,
                            message: format!("fragment `{name}` uses itself"),
                            label: "this reference",
                        });
                    }
                    push(out, copied, i);
                    let bracket = |out: &mut Expanded, s: &str| {
                        out.pieces.push(Piece {
                            at: out.text.len(),
                            src: None,
                            whole: reference.clone(),
                        });
                        out.text.push_str(s);
                    };
                    bracket(out, "(?:");
                    stack.push(name.to_string());
                    self.expand_into(fragment, fragment_span.clone(), out, stack)?;
                    stack.pop();
                    bracket(out, ")");
                    if out.text.len() > MAX_EXPANDED {
                        return Err(FragmentError {
                            span: reference,
                            message: format!(
                                "the pattern is longer than {MAX_EXPANDED} bytes once its \
                                 fragments are expanded"
                            ),
                            label: "expanded here",
                        });
                    }
                    i = name_end + 1;
                    copied = i;
                }
                _ => i += 1,
            }
        }
        push(out, copied, b.len());
        Ok(())
    }
}

/// A byte of a fragment name.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

/// Where `value`'s first byte is in `file`, given the span of the TOML string
/// that holds it (quotes included), when the string is written without
/// escapes so that its bytes are the value's; `None` otherwise.
fn value_start(file: &str, span: &Range<usize>, value: &str) -> Option<usize> {
    let token = file.get(span.clone())?;
    for quote in ["'''", "\"\"\"", "'", "\""] {
        let Some(inner) = token
            .strip_prefix(quote)
            .and_then(|t| t.strip_suffix(quote))
        else {
            continue;
        };
        // A multi-line string drops a line break right after its opening quotes.
        let skip = if quote.len() == 3 {
            if inner.starts_with("\r\n") {
                2
            } else {
                usize::from(inner.starts_with('\n'))
            }
        } else {
            0
        };
        return (&inner[skip..] == value).then_some(span.start + quote.len() + skip);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule file's text with its fragments and one pattern, parsed the way
    /// `PatternSet::compile` parses it.
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(default)]
        fragments: std::collections::BTreeMap<toml::Spanned<String>, toml::Spanned<String>>,
        pattern: toml::Spanned<String>,
    }

    fn expand(file: &str) -> Result<Expanded, FragmentError> {
        let f: File = toml::from_str(file).expect("toml");
        let frags = Fragments::new(
            file,
            f.fragments.iter().map(|(k, v)| {
                (
                    k.get_ref().as_str(),
                    k.span(),
                    v.get_ref().as_str(),
                    v.span(),
                )
            }),
        )?;
        frags.expand(f.pattern.get_ref(), f.pattern.span())
    }

    #[test]
    fn references_become_groups() {
        let file = "fragments.key = '''\\.ssh|\\.env'''\nfragments.verb = 'read|(?&key)'\npattern = '''(?&verb)\\s+(?&key)'''\n";
        let e = expand(file).expect("expands");
        assert_eq!(e.text, r"(?:read|(?:\.ssh|\.env))\s+(?:\.ssh|\.env)");
        // Each byte that came from a string maps back to it.
        let text = e.text.clone();
        for (needle, want) in [("read", "read"), ("\\s+", "\\s+"), ("\\.env", "\\.env")] {
            let at = text.find(needle).expect("present");
            let span = e.source_span(at..at + needle.len());
            assert_eq!(&file[span], want);
        }
        // The brackets map to the reference they replace.
        assert_eq!(&file[e.source_span(0..3)], "(?&verb)");
    }

    #[test]
    fn escapes_and_classes_are_not_references() {
        for p in [r"'''\(?&x)'''", "'''[(?&x)]'''", "'''[]x](?&y)'''"] {
            let file = format!("fragments.y = 'a'\npattern = {p}\n");
            let e = expand(&file);
            match p {
                "'''[]x](?&y)'''" => assert_eq!(e.expect("expands").text, "[]x](?:a)"),
                _ => assert_eq!(e.expect("left alone").text, &p[3..p.len() - 3]),
            }
        }
    }

    #[test]
    fn errors_point_at_the_reference() {
        let file = "fragments.a = 'x(?&b)'\nfragments.b = '(?&a)'\npattern = 'y(?&a)'\n";
        let e = expand(file).expect_err("cycle");
        assert!(e.message.contains("uses itself"), "{}", e.message);
        assert_eq!(&file[e.span], "(?&a)");

        let file = "fragments.a = 'x'\npattern = 'y(?&nope)z'\n";
        let e = expand(file).expect_err("unknown");
        assert_eq!(&file[e.span.clone()], "(?&nope)");
        assert!(e.message.contains("defines a"), "{}", e.message);

        let file = "pattern = 'y(?&Bad)'\n";
        let e = expand(file).expect_err("malformed");
        assert_eq!(&file[e.span], "(?&");

        let file = "fragments.Bad = 'x'\npattern = 'y'\n";
        let e = expand(file).expect_err("bad name");
        assert_eq!(&file[e.span], "Bad");
    }

    #[test]
    fn escaped_strings_point_at_the_whole_string() {
        let file = "fragments.a = \"x\\\\d\"\npattern = \"(?&a)\\\\s\"\n";
        let e = expand(file).expect("expands");
        assert_eq!(e.text, r"(?:x\d)\s");
        let at = e.text.find("\\s").expect("present");
        assert_eq!(&file[e.source_span(at..at + 2)], "\"(?&a)\\\\s\"");
    }

    #[test]
    fn expansion_is_bounded() {
        // Each level doubles the one below: 2^30 bytes if unbounded.
        let mut file = String::from("fragments.f0 = 'abcdefgh'\n");
        for i in 1..30 {
            file.push_str(&format!("fragments.f{i} = '(?&f{0})(?&f{0})'\n", i - 1));
        }
        file.push_str("pattern = '(?&f29)'\n");
        let e = expand(&file).expect_err("too long");
        assert!(e.message.contains("longer than"), "{}", e.message);
    }
}
