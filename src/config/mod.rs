//! `mcplint.toml`: the servers a project uses, and where their approvals live.
//!
//! ```toml
//! approvals = ".mcplint/approvals"   # the default
//!
//! [servers.github]
//! source = "npm:@modelcontextprotocol/server-github@2025.4.8"
//! args = ["--read-only"]
//! env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
//! secrets = ["GITHUB_TOKEN"]
//! allow_hosts = ["api.github.com"]
//!
//! [servers.weather]
//! source = "file:captures/weather.json"
//!
//! [rules]            # kept as a raw table for the rules engine (and `rules-dirs`)
//! ```
//!
//! A source is `npm:PKG@EXACT`, `pypi:PKG==EXACT`, `file:PATH` (a manifest of
//! any input kind), a bare path (a `server.json` or a manifest), or an
//! `https://` URL. Pins must be exact: ranges, `latest` and missing versions
//! are refused, because an approval of "whatever version comes" approves
//! nothing.
//!
//! Loading is two steps, as cargo-deny does: the TOML is deserialized with
//! spans (unknown keys are errors there), then every value is validated, and
//! every problem is reported with a span into the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use crate::manifest::json::Span;
use crate::manifest::load::LoadError;

/// The default approvals folder, relative to `mcplint.toml`.
pub const DEFAULT_APPROVALS: &str = ".mcplint/approvals";

/// Where a server's manifest comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An npm package at an exact version.
    Npm {
        /// The package (may be scoped).
        package: String,
        /// The exact version.
        version: String,
    },
    /// A PyPI package at an exact version.
    Pypi {
        /// The project name.
        package: String,
        /// The exact version.
        version: String,
    },
    /// `file:PATH`: a manifest (tools/list result, capture …), resolved
    /// against the directory of `mcplint.toml`.
    File(PathBuf),
    /// A bare path: a `server.json` (to launch) or a manifest, decided by content.
    Path(PathBuf),
    /// An `https://` URL of a remote server.
    Url(String),
}

impl Source {
    /// True for sources that need the runner to produce a manifest.
    pub fn needs_runner(&self) -> bool {
        matches!(
            self,
            Source::Npm { .. } | Source::Pypi { .. } | Source::Url(_)
        )
    }
}

/// One `[servers.NAME]` table.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The name (the table key); also the approval file's name.
    pub name: String,
    /// The key's span in `mcplint.toml`.
    pub name_span: Span,
    /// The parsed source.
    pub source: Source,
    /// The source as written (the pin recorded in approvals).
    pub source_text: String,
    /// The source string's span.
    pub source_span: Span,
    /// Extra arguments for the server process.
    pub args: Vec<String>,
    /// Environment variables and their placeholder values, by name.
    pub env: BTreeMap<String, String>,
    /// Names of variables whose values are secrets: never written anywhere;
    /// when the runner fetches the server, each gets the placeholder
    /// `mcplint-placeholder-NAME`, never a real value.
    pub secrets: Vec<String>,
    /// Hosts the server may reach when the runner boots it.
    pub allow_hosts: Vec<String>,
}

/// A loaded, validated `mcplint.toml`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file.
    pub path: PathBuf,
    /// Its text, for errors that point into it.
    pub text: String,
    /// The approvals folder, resolved against the file's directory.
    pub approvals: PathBuf,
    /// The servers, sorted by name.
    pub servers: Vec<ServerConfig>,
    /// The `[rules]` table, untouched, for the rules engine.
    pub rules: Option<toml::Table>,
    /// `rules-dirs`, untouched, for the rules engine.
    pub rules_dirs: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    approvals: Option<Spanned<String>>,
    #[serde(default)]
    servers: BTreeMap<Spanned<String>, RawServer>,
    rules: Option<toml::Table>,
    #[serde(rename = "rules-dirs")]
    rules_dirs: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    source: Spanned<String>,
    #[serde(default)]
    args: Vec<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    secrets: Vec<Spanned<String>>,
    #[serde(default)]
    allow_hosts: Vec<Spanned<String>>,
}

/// Every problem found in a config file, reported together.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{path}: {} problem(s) in the configuration", errors.len())]
#[diagnostic(code(mcplint::config))]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// Each problem, with its span.
    #[related]
    pub errors: Vec<LoadError>,
}

static SEMVER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$")
        .expect("valid regex")
});
static PEP440: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([1-9]\d*!)?(0|[1-9]\d*)(\.(0|[1-9]\d*))*((a|b|rc)(0|[1-9]\d*))?(\.post(0|[1-9]\d*))?(\.dev(0|[1-9]\d*))?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")
        .expect("valid regex")
});
static NPM_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*$").expect("valid regex")
});
static PYPI_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$").expect("valid regex")
});
static SERVER_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$").expect("valid regex"));
static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$").expect("valid regex"));
static ENV_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*$").expect("valid regex"));
static HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:\d{1,5})?$")
        .expect("valid regex")
});

/// Collects validation errors for one file.
struct Check<'a> {
    path: &'a Path,
    text: &'a str,
    errors: Vec<LoadError>,
}

impl Check<'_> {
    fn err(
        &mut self,
        span: Span,
        pointer: &str,
        message: impl Into<String>,
        label: &str,
        help: Option<&str>,
    ) {
        self.errors.push(LoadError::shape(
            self.path,
            self.text,
            span,
            pointer.to_string(),
            message,
            label.to_string(),
            help.map(str::to_string),
        ));
    }

    /// The span of `sub` inside the TOML string at `span`, when the string is
    /// written without escapes (else the whole string).
    fn sub_span(&self, span: Span, value: &str, sub: std::ops::Range<usize>) -> Span {
        let raw = self.text.get(span.start..span.end).unwrap_or("");
        if raw.len() == value.len() + 2 && raw.get(1..raw.len() - 1) == Some(value) {
            Span::new(span.start + 1 + sub.start, span.start + 1 + sub.end)
        } else {
            span
        }
    }
}

fn span_of<T>(s: &Spanned<T>) -> Span {
    let r = s.span();
    Span::new(r.start, r.end)
}

/// Parses a source string; `Err((byte range in the value, message, help))`.
pub fn parse_source(
    s: &str,
) -> Result<Source, (std::ops::Range<usize>, String, Option<&'static str>)> {
    let range_chars = ['^', '~', '>', '<', '*', '|', ' ', '='];
    if let Some(rest) = s.strip_prefix("npm:") {
        let at = rest
            .char_indices()
            .skip(1)
            .find(|&(_, c)| c == '@')
            .map(|(i, _)| i);
        let Some(at) = at else {
            return Err((
                0..s.len(),
                "npm source without a version".into(),
                Some("pin an exact version: npm:PACKAGE@1.2.3"),
            ));
        };
        let (package, version) = (&rest[..at], &rest[at + 1..]);
        let vrange = 4 + at + 1..s.len();
        if !NPM_NAME.is_match(package) {
            return Err((
                4..4 + at,
                format!("`{package}` is not an npm package name"),
                None,
            ));
        }
        if version.is_empty() {
            return Err((
                vrange,
                "npm source without a version".into(),
                Some("pin an exact version: npm:PACKAGE@1.2.3"),
            ));
        }
        if !SEMVER.is_match(version) {
            let msg = if version.contains(range_chars)
                || version.contains(['x', 'X']) && version.contains('.')
            {
                format!("`{version}` is a version range, not a pin")
            } else {
                format!("`{version}` is a tag or not a version, not a pin")
            };
            return Err((vrange, msg, Some("pin an exact version (1.2.3); an approval of whatever version comes approves nothing")));
        }
        return Ok(Source::Npm {
            package: package.into(),
            version: version.into(),
        });
    }
    if let Some(rest) = s.strip_prefix("pypi:") {
        let Some(eq) = rest.find("==") else {
            let msg = if rest.contains(['>', '<', '~', '!', '=', '*', ',']) {
                "PyPI source with a version range, not a pin"
            } else {
                "PyPI source without a version"
            };
            return Err((
                0..s.len(),
                msg.into(),
                Some("pin an exact version: pypi:PACKAGE==1.2.3"),
            ));
        };
        let (package, version) = (&rest[..eq], &rest[eq + 2..]);
        let vrange = 5 + eq + 2..s.len();
        if !PYPI_NAME.is_match(package) {
            return Err((
                5..5 + eq,
                format!("`{package}` is not a PyPI project name"),
                None,
            ));
        }
        if version.is_empty() || !PEP440.is_match(version) {
            let msg = if version.is_empty() {
                "PyPI source without a version".to_string()
            } else if version.contains(['*', ',', '>', '<', '=', '~', '!']) {
                format!("`{version}` is a version range, not a pin")
            } else {
                format!("`{version}` is not an exact PEP 440 version")
            };
            return Err((
                vrange,
                msg,
                Some("pin an exact version: pypi:PACKAGE==1.2.3"),
            ));
        }
        return Ok(Source::Pypi {
            package: package.into(),
            version: version.into(),
        });
    }
    if let Some(p) = s.strip_prefix("file:") {
        if p.is_empty() {
            return Err((0..s.len(), "`file:` without a path".into(), None));
        }
        return Ok(Source::File(PathBuf::from(p)));
    }
    if s.starts_with("https://") {
        if s.len() <= "https://".len() {
            return Err((0..s.len(), "URL without a host".into(), None));
        }
        return Ok(Source::Url(s.into()));
    }
    if s.starts_with("http://") {
        return Err((
            0..4,
            "plain http:// is refused".into(),
            Some("use https://"),
        ));
    }
    if let Some(colon) = s.find(':') {
        let scheme = &s[..colon];
        if scheme.len() > 1
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-')
        {
            return Err((
                0..colon,
                format!("unknown source kind `{scheme}:`"),
                Some(
                    "use npm:PKG@VERSION, pypi:PKG==VERSION, file:PATH, a path, or an https:// URL",
                ),
            ));
        }
    }
    if s.is_empty() {
        return Err((0..0, "empty source".into(), None));
    }
    Ok(Source::Path(PathBuf::from(s)))
}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.display().to_string(),
            errors: vec![LoadError::io(path, &e)],
        })?;
        Self::parse(path, text)
    }

    /// Parses and validates the text of `path`.
    pub fn parse(path: &Path, text: String) -> Result<Config, ConfigError> {
        let fail = |errors| ConfigError {
            path: path.display().to_string(),
            errors,
        };
        let raw: RawConfig = match toml::from_str(&text) {
            Ok(r) => r,
            Err(e) => {
                let span = e
                    .span()
                    .map(|r| Span::new(r.start, r.end))
                    .unwrap_or(Span::new(0, 0));
                return Err(fail(vec![LoadError::syntax_at(
                    path,
                    &text,
                    span,
                    e.message().to_string(),
                )]));
            }
        };
        let mut check = Check {
            path,
            text: &text,
            errors: Vec::new(),
        };
        let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
        let approvals = match &raw.approvals {
            Some(a) if a.get_ref().trim().is_empty() => {
                check.err(
                    span_of(a),
                    "approvals",
                    "`approvals` is empty",
                    "here",
                    Some("name a folder, e.g. .mcplint/approvals"),
                );
                base.join(DEFAULT_APPROVALS)
            }
            Some(a) => base.join(a.get_ref()),
            None => base.join(DEFAULT_APPROVALS),
        };
        let mut servers = Vec::new();
        for (name, rs) in &raw.servers {
            let n = name.get_ref();
            let ptr = format!("servers.{n}");
            if !SERVER_NAME.is_match(n) {
                check.err(
                    span_of(name),
                    &ptr,
                    format!(
                        "server name `{}` cannot name an approval file",
                        crate::display::visible(n)
                    ),
                    "this name",
                    Some("use letters, digits, `.`, `_` and `-`, starting with a letter or digit"),
                );
            }
            let src = rs.source.get_ref();
            let src_span = span_of(&rs.source);
            let source = match parse_source(src) {
                Ok(s) => Some(s),
                Err((range, msg, help)) => {
                    let sp = check.sub_span(src_span, src, range);
                    check.err(sp, &format!("{ptr}.source"), msg, "this source", help);
                    None
                }
            };
            let mut env = BTreeMap::new();
            for (k, v) in &rs.env {
                if !ENV_NAME.is_match(k.get_ref()) {
                    check.err(
                        span_of(k),
                        &format!("{ptr}.env"),
                        format!(
                            "`{}` is not an environment variable name",
                            crate::display::visible(k.get_ref())
                        ),
                        "here",
                        None,
                    );
                }
                env.insert(k.get_ref().clone(), v.get_ref().clone());
            }
            for s in &rs.secrets {
                // A secret's value comes from the host at run time; one
                // written here would be committed with the file.
                if let Some((_, v)) = rs.env.iter().find(|(k, _)| k.get_ref() == s.get_ref()) {
                    if !PLACEHOLDER.is_match(v.get_ref()) {
                        check.err(
                            span_of(v),
                            &format!("{ptr}.env"),
                            format!("the secret `{}` has a value written in the configuration", crate::display::visible(s.get_ref())),
                            "this value",
                            Some("write a placeholder such as \"${NAME}\"; a server fetched by the runner gets mcplint-placeholder-NAME, never a real value"),
                        );
                    }
                }
                if !ENV_NAME.is_match(s.get_ref()) {
                    check.err(
                        span_of(s),
                        &format!("{ptr}.secrets"),
                        format!(
                            "`{}` is not an environment variable name",
                            crate::display::visible(s.get_ref())
                        ),
                        "here",
                        None,
                    );
                }
            }
            for h in &rs.allow_hosts {
                if !HOST.is_match(h.get_ref()) {
                    check.err(
                        span_of(h),
                        &format!("{ptr}.allow_hosts"),
                        format!("`{}` is not a host name", crate::display::visible(h.get_ref())),
                        "here",
                        Some("write a host (api.example.com), optionally with a port or a leading `*.`"),
                    );
                }
            }
            if let Some(source) = source {
                let source = match source {
                    Source::File(p) => Source::File(base.join(p)),
                    Source::Path(p) => Source::Path(base.join(p)),
                    s => s,
                };
                servers.push(ServerConfig {
                    name: n.clone(),
                    name_span: span_of(name),
                    source,
                    source_text: src.clone(),
                    source_span: src_span,
                    args: rs.args.iter().map(|a| a.get_ref().clone()).collect(),
                    env,
                    secrets: rs.secrets.iter().map(|s| s.get_ref().clone()).collect(),
                    allow_hosts: rs.allow_hosts.iter().map(|s| s.get_ref().clone()).collect(),
                });
            }
        }
        if !check.errors.is_empty() {
            return Err(fail(check.errors));
        }
        Ok(Config {
            path: path.to_path_buf(),
            text: text.clone(),
            approvals,
            servers,
            rules: raw.rules,
            rules_dirs: raw.rules_dirs,
        })
    }

    /// The server named `name`.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("dir/mcplint.toml"), text.to_string())
    }

    #[test]
    fn sources_parse() {
        assert_eq!(
            parse_source("npm:@scope/pkg@1.2.3").ok(),
            Some(Source::Npm {
                package: "@scope/pkg".into(),
                version: "1.2.3".into()
            })
        );
        assert!(matches!(
            parse_source("pypi:mcp-server-fetch==2025.4.7"),
            Ok(Source::Pypi { .. })
        ));
        assert!(matches!(
            parse_source("https://mcp.example.com/mcp"),
            Ok(Source::Url(_))
        ));
        assert!(matches!(parse_source("file:x.json"), Ok(Source::File(_))));
        assert!(matches!(
            parse_source("servers/server.json"),
            Ok(Source::Path(_))
        ));
        for bad in [
            "npm:pkg",
            "npm:pkg@latest",
            "npm:pkg@^1.2.3",
            "npm:pkg@1.x",
            "npm:@scope/pkg",
            "pypi:pkg",
            "pypi:pkg>=1.0",
            "pypi:pkg==1.*",
            "http://example.com",
            "git:foo",
        ] {
            assert!(parse_source(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn errors_point_into_the_file() {
        let text = "[servers.a]\nsource = \"npm:pkg@latest\"\n[servers.b]\nsource = \"pypi:x>=1\"\nbogus = 1\n";
        let e = parse(text).expect_err("refused");
        assert_eq!(e.errors.len(), 1, "unknown keys stop the first step");
        let text =
            "[servers.a]\nsource = \"npm:pkg@latest\"\n[servers.b]\nsource = \"pypi:x>=1\"\n";
        let e = parse(text).expect_err("refused");
        assert_eq!(e.errors.len(), 2);
        match &e.errors[0] {
            LoadError::Shape(e) => {
                assert_eq!((e.line, e.column), (2, 19), "{}", e.message);
                assert!(e.message.contains("latest"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn secrets_must_be_placeholders() {
        let text = "[servers.a]\nsource = \"file:a.json\"\nenv = { TOKEN = \"ghp_live_value\" }\nsecrets = [\"TOKEN\"]\n";
        let e = parse(text).expect_err("refused");
        assert!(matches!(&e.errors[0], LoadError::Shape(e) if e.message.contains("secret")));
        let text = "[servers.a]\nsource = \"file:a.json\"\nenv = { TOKEN = \"${TOKEN}\" }\nsecrets = [\"TOKEN\"]\n";
        assert!(parse(text).is_ok());
    }

    #[test]
    fn good_config_loads() {
        let text = "approvals = \"approved\"\n[servers.w]\nsource = \"file:w.json\"\nenv = { TOKEN = \"${TOKEN}\" }\nsecrets = [\"TOKEN\"]\nallow_hosts = [\"api.example.com\", \"*.example.org:443\"]\n[rules]\nignore = [\"x\"]\n";
        let c = parse(text).expect("loads");
        assert_eq!(c.approvals, Path::new("dir/approved"));
        assert_eq!(
            c.servers[0].source,
            Source::File(PathBuf::from("dir/w.json"))
        );
        assert!(c.rules.is_some());
    }
}
