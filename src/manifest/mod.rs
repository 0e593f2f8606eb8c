//! The manifest model: what a server shows a model, and where each piece came from.
//!
//! A [`Loaded`] file holds its parsed [`Document`] and the [`Server`]s found in
//! it. Model types do not copy text out of the document: they hold node ids, so
//! every value keeps its exact byte range, unknown fields stay in the tree
//! verbatim (an auditor never drops data), and the fingerprint hashes exactly
//! what the server sent.
//!
//! Loaders for each input kind live in [`load`].

pub mod json;
pub mod load;

use std::path::PathBuf;
use std::sync::Arc;

pub use json::{Document, Kind, NodeId, Span};

/// The kinds of input mcplint recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    /// A `tools/list` result: `{"tools": [...], "nextCursor"?}`.
    ToolsList,
    /// A JSON-RPC response whose result is a `tools/list` result.
    JsonRpc,
    /// Several `tools/list` pages: an array of JSON-RPC responses.
    JsonRpcPages,
    /// A bare array of tools.
    ToolArray,
    /// An object with `tools` and optional prompts, resources, instructions,
    /// serverInfo (mcplint's capture files and other dumps).
    Capture,
    /// An MCPB bundle's `manifest.json`.
    Mcpb,
    /// An MCPB bundle (`.mcpb` zip file).
    McpbBundle,
    /// The official registry's `server.json`.
    ServerJson,
    /// A client config with `mcpServers` (Claude Desktop, Cursor, Claude Code,
    /// Windsurf, Gemini CLI).
    McpServers,
    /// VS Code's `mcp.json` (`servers` and `inputs`).
    Vscode,
    /// Codex's `config.toml` (`[mcp_servers.NAME]`).
    Codex,
}

impl InputKind {
    /// The kebab-case name used on the command line and in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            InputKind::ToolsList => "tools-list",
            InputKind::JsonRpc => "json-rpc",
            InputKind::JsonRpcPages => "json-rpc-pages",
            InputKind::ToolArray => "tool-array",
            InputKind::Capture => "capture",
            InputKind::Mcpb => "mcpb",
            InputKind::McpbBundle => "mcpb-bundle",
            InputKind::ServerJson => "server-json",
            InputKind::McpServers => "mcp-servers",
            InputKind::Vscode => "vscode",
            InputKind::Codex => "codex",
        }
    }

    /// True for kinds that list servers to launch rather than their tools.
    pub fn is_config(self) -> bool {
        matches!(
            self,
            InputKind::ServerJson | InputKind::McpServers | InputKind::Vscode | InputKind::Codex
        )
    }
}

/// One loaded input file.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The path as given (or `bundle.mcpb!manifest.json` for a file inside a bundle).
    pub path: PathBuf,
    /// The parsed JSON. Codex's TOML configs have an empty document and keep
    /// their spans in the launch specs (spans into [`Loaded::source`]).
    pub doc: Arc<Document>,
    /// The input text when it is not the JSON document's own (a Codex TOML
    /// config), so diagnostics can show the text a span points into. `None`
    /// when the spans point into `doc`'s text. Use [`Loaded::text`].
    pub source: Option<Arc<str>>,
    /// What kind of input this was.
    pub kind: InputKind,
    /// The servers found in it.
    pub servers: Vec<Server>,
}

impl Loaded {
    /// The path for display.
    pub fn display_path(&self) -> String {
        self.path.display().to_string()
    }

    /// The text every span of this input points into: [`Loaded::source`] if
    /// set, else the JSON document's text.
    pub fn text(&self) -> &str {
        self.source.as_deref().unwrap_or_else(|| self.doc.text())
    }
}

/// Whether a server's tool list is the whole list the server would return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Completeness {
    /// Everything `tools/list` returned (a capture or a JSON-RPC response).
    Complete,
    /// A static list that may lack schemas or tools (an MCPB manifest's `tools`).
    Partial,
    /// No tools at all: a launch spec only (client configs, `server.json`).
    LaunchOnly,
}

/// One MCP server as an input describes it.
#[derive(Debug, Clone)]
pub struct Server {
    /// Its name: the config key, `serverInfo.name`, or the file name.
    pub name: String,
    /// The node holding the server as a whole (the config entry, the capture's root).
    pub node: Option<NodeId>,
    /// `serverInfo` (legacy `initialize`) or the modern `_meta` server info.
    pub server_info: Option<NodeId>,
    /// The negotiated protocol version, if the input records it.
    pub protocol_version: Option<NodeId>,
    /// The server's `instructions` string.
    pub instructions: Option<NodeId>,
    /// The node of the `tools` array (absent for bare arrays of pages).
    pub tools_node: Option<NodeId>,
    /// Tools in the order the server listed them.
    pub tools: Vec<Tool>,
    /// Prompts.
    pub prompts: Vec<Prompt>,
    /// Resources.
    pub resources: Vec<Resource>,
    /// Resource templates.
    pub resource_templates: Vec<Resource>,
    /// How to start the server, for config entries, `server.json` and bundles.
    pub launch: Option<Launch>,
    /// Whether `tools` is everything the server returns.
    pub completeness: Completeness,
}

impl Server {
    /// An empty server named `name`.
    pub fn new(name: impl Into<String>, completeness: Completeness) -> Self {
        Server {
            name: name.into(),
            node: None,
            server_info: None,
            protocol_version: None,
            instructions: None,
            tools_node: None,
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            resource_templates: Vec::new(),
            launch: None,
            completeness,
        }
    }

    /// Number of parameters across all tools (top-level `inputSchema.properties`).
    pub fn param_count(&self, doc: &Document) -> usize {
        self.tools.iter().map(|t| t.params(doc).len()).sum()
    }
}

/// The fields of the MCP `Tool` object that mcplint knows by name.
pub const TOOL_FIELDS: &[&str] = &[
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "_meta",
    "execution",
];

/// One tool: node ids into the document, so nothing is copied or dropped.
#[derive(Debug, Clone)]
pub struct Tool {
    /// The tool object.
    pub node: NodeId,
    /// Its name, decoded.
    pub name: String,
    /// The `name` string node.
    pub name_node: NodeId,
    /// `title`.
    pub title: Option<NodeId>,
    /// `description`.
    pub description: Option<NodeId>,
    /// `inputSchema`.
    pub input_schema: Option<NodeId>,
    /// `outputSchema`.
    pub output_schema: Option<NodeId>,
    /// `annotations`.
    pub annotations: Option<NodeId>,
    /// `icons`.
    pub icons: Option<NodeId>,
    /// `_meta`.
    pub meta: Option<NodeId>,
    /// Fields the spec does not define, as `(key, value)` nodes, in source order.
    pub unknown: Vec<(NodeId, NodeId)>,
}

/// One top-level parameter of a tool's input schema.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// The property's key node (its name).
    pub key: NodeId,
    /// The property's schema node.
    pub schema: NodeId,
    /// True if `required` names it.
    pub required: bool,
}

impl Tool {
    /// The top-level parameters (`inputSchema.properties`), in source order.
    pub fn params(&self, doc: &Document) -> Vec<Param> {
        let required = self.required_node(doc);
        self.param_nodes(doc)
            .map(|(k, v)| Param {
                key: k,
                schema: v,
                required: required.is_some_and(|r| is_listed(doc, r, k)),
            })
            .collect()
    }

    /// The top-level parameters' key and schema nodes, in source order, as
    /// in [`Tool::params`] but without working out which are required (see
    /// [`Tool::is_required`]): for rules that look at every parameter and
    /// need that for few.
    pub fn param_nodes<'d>(
        &self,
        doc: &'d Document,
    ) -> impl Iterator<Item = (NodeId, NodeId)> + 'd {
        self.input_schema
            .filter(|&s| doc.kind(s) == Kind::Object)
            .and_then(|s| doc.get(s, "properties"))
            .and_then(|p| doc.members(p))
            .into_iter()
            .flatten()
    }

    /// Whether the input schema's `required` names the parameter whose key
    /// node is `key` ([`Param::required`]).
    pub fn is_required(&self, doc: &Document, key: NodeId) -> bool {
        self.required_node(doc)
            .is_some_and(|r| is_listed(doc, r, key))
    }

    /// The input schema's `required` array, when the schema is an object
    /// with one.
    fn required_node(&self, doc: &Document) -> Option<NodeId> {
        self.input_schema
            .filter(|&s| doc.kind(s) == Kind::Object)
            .and_then(|s| doc.get(s, "required"))
            .filter(|&r| doc.kind(r) == Kind::Array)
    }

    /// The decoded description, or "".
    pub fn description_text<'d>(&self, doc: &'d Document) -> std::borrow::Cow<'d, str> {
        self.description
            .and_then(|d| doc.str(d))
            .unwrap_or_default()
    }
}

/// Whether array `list` has a string equal to the text of string node `key`
/// (compared node to node: no decoded copies, no list of names).
fn is_listed(doc: &Document, list: NodeId, key: NodeId) -> bool {
    doc.children(list).any(|n| doc.same_str(n, key))
}

/// One prompt.
#[derive(Debug, Clone)]
pub struct Prompt {
    /// The prompt object.
    pub node: NodeId,
    /// Its name, decoded.
    pub name: String,
    /// `description`.
    pub description: Option<NodeId>,
    /// The `arguments` array.
    pub arguments: Option<NodeId>,
}

/// One resource or resource template.
#[derive(Debug, Clone)]
pub struct Resource {
    /// The resource object.
    pub node: NodeId,
    /// Its name (or URI when it has no name), decoded.
    pub name: String,
    /// `uri` or `uriTemplate`.
    pub uri: Option<NodeId>,
    /// `description`.
    pub description: Option<NodeId>,
}

/// A value from a config with the span it came from (configs may be TOML, so
/// launch specs own their text rather than pointing into a JSON document).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Its byte range in the input, when known.
    #[serde(skip)]
    pub span: Option<Span>,
}

impl<T> Spanned<T> {
    /// A value with a span.
    pub fn new(value: T, span: Option<Span>) -> Self {
        Spanned { value, span }
    }
}

/// How a client or registry entry starts a server.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    /// The client or format the entry comes from (`claude-desktop`, `vscode`,
    /// `server.json`, `mcpb` ...).
    pub client: String,
    /// How it is reached.
    pub transport: Transport,
    /// Environment variables: name, value (a placeholder or `${VAR}` reference
    /// as written), and whether the source marks it secret.
    pub env: Vec<EnvVar>,
    /// True if the entry is disabled in its config.
    pub disabled: bool,
    /// A pinned package, when the entry names one (`npm`/`pypi` identifier and version).
    pub package: Option<PackageRef>,
    /// True if the client is told to trust the server and skip tool-call
    /// confirmations (Gemini CLI `trust: true`).
    pub trust: bool,
    /// The only tools the client exposes, when it filters (Gemini
    /// `includeTools`, Codex `enabled_tools`); `None` means all.
    pub include_tools: Option<Vec<Spanned<String>>>,
    /// Tools the client hides (Gemini `excludeTools`, Codex `disabled_tools`).
    pub exclude_tools: Vec<Spanned<String>>,
    /// A file of environment variables the client loads (`envFile`).
    pub env_file: Option<Spanned<String>>,
    /// Per-platform replacements of the command, arguments or environment
    /// (MCPB `mcp_config.platform_overrides`): what runs on another OS may
    /// differ from what is shown for this one.
    pub platform_overrides: Vec<PlatformOverride>,
}

/// One platform's replacement launch values (MCPB `platform_overrides`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlatformOverride {
    /// The platform key as written (`win32`, `darwin`, `linux`).
    pub platform: Spanned<String>,
    /// The command on that platform, when replaced.
    pub command: Option<Spanned<String>>,
    /// The arguments on that platform, when replaced.
    pub args: Option<Vec<Spanned<String>>>,
    /// The environment on that platform, when replaced.
    pub env: Vec<EnvVar>,
}

impl Launch {
    /// A launch spec with only a client and a transport; everything else empty.
    pub fn new(client: impl Into<String>, transport: Transport) -> Self {
        Launch {
            client: client.into(),
            transport,
            env: Vec::new(),
            disabled: false,
            package: None,
            trust: false,
            include_tools: None,
            exclude_tools: Vec::new(),
            env_file: None,
            platform_overrides: Vec::new(),
        }
    }
}

/// One environment variable of a launch spec.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EnvVar {
    /// The variable's name.
    pub name: Spanned<String>,
    /// Its value as written, if any.
    pub value: Option<Spanned<String>>,
    /// True if the source marks it secret (`isSecret`, `password`, `sensitive`).
    pub secret: bool,
}

/// A server's transport.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Transport {
    /// A local process over stdio.
    Stdio {
        /// The command.
        command: Spanned<String>,
        /// Its arguments.
        args: Vec<Spanned<String>>,
        /// The working directory, if set.
        cwd: Option<Spanned<String>>,
    },
    /// A remote server over Streamable HTTP.
    Http {
        /// The endpoint.
        url: Spanned<String>,
        /// Header names and values as written.
        headers: Vec<(Spanned<String>, Spanned<String>)>,
    },
    /// A remote server over the legacy HTTP+SSE transport.
    Sse {
        /// The SSE endpoint.
        url: Spanned<String>,
        /// Header names and values as written.
        headers: Vec<(Spanned<String>, Spanned<String>)>,
    },
}

/// A package named by a launch spec or `server.json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PackageRef {
    /// `npm`, `pypi`, `oci`, `nuget`, `mcpb` ... (an open set).
    pub registry: String,
    /// The package identifier.
    pub identifier: Spanned<String>,
    /// The version, if given.
    pub version: Option<Spanned<String>>,
    /// The artifact's sha-256, when the source gives one (`fileSha256`).
    pub sha256: Option<String>,
}

/// Shared handle to a loaded file.
pub type LoadedRef = Arc<Loaded>;
