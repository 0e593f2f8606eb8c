//! Changes: what differs between an approved manifest and the current one.
//!
//! A [`Change`] is the diff's unit, as a finding is the rules' unit: a kind
//! (kebab-case, stable, documented), a severity on the same scale as findings,
//! the server and tool (or prompt, resource, template) it is about, a JSON
//! pointer inside that object, the values before and after, and where each
//! side sits in its file.
//!
//! # Severity table
//!
//! The principle: what lets the model send more, or tells the model something
//! new, is high; what widens what a tool may do is medium; what takes away is
//! low. "New text" means a text field whose word diff inserts at least one
//! word; text that only loses words is low, and a change of whitespace alone
//! inside a string is info.
//!
//! | kind | severity |
//! |---|---|
//! | `tool-added` | medium |
//! | `tool-removed` | low |
//! | `tool-renamed` | medium |
//! | `title-changed` | medium (new text) / low |
//! | `description-changed` | high (new text) / low |
//! | `annotation-changed` | low |
//! | `annotation-escalated` (`readOnlyHint` true→false, `destructiveHint` false→true, `openWorldHint` false→true, absent meaning the spec's default) | high |
//! | `param-added` | high |
//! | `param-removed` | low |
//! | `param-type-changed` | medium |
//! | `param-required-changed` | medium (now required) / low (now optional) |
//! | `param-enum-changed` | medium |
//! | `param-default-changed` | medium |
//! | `param-description-changed` | high (new text) / low |
//! | `param-format-changed`, `param-pattern-changed`, `param-bounds-changed` | medium |
//! | `param-additional-properties-changed` | medium |
//! | `schema-changed` (any other schema keyword: `title`, `examples`, `const`, `$ref` …) | medium (high if it adds text) |
//! | `output-schema-changed` (an `outputSchema` appears or disappears) | medium |
//! | the `param-*` kinds under `/outputSchema` | one level lower than under `/inputSchema` (the model reads outputs, it does not fill them in), except new description text, which stays high |
//! | `icons-changed`, `meta-changed` | low |
//! | `unknown-field-changed` | medium |
//! | `prompt-added` | medium |
//! | `prompt-removed` | low |
//! | `prompt-changed` | high (new text) / medium |
//! | `prompt-argument-added` | medium |
//! | `prompt-argument-removed` | low |
//! | `prompt-argument-changed` | high (new text) / medium |
//! | `resource-added`, `resource-template-added` | medium |
//! | `resource-removed`, `resource-template-removed` | low |
//! | `resource-changed`, `resource-template-changed` | high (new text) / medium |
//! | `instructions-changed` | high (new text) / low |
//! | `server-info-changed` | info |
//! | `server-added` | medium |
//! | `server-removed` | low |
//! | `server-unapproved` (in `mcplint.toml`, no approval) | high |
//! | `pin-changed` (the source pin moved without a new approval) | high |
//! | `approval-stale` (an approval for a server no longer in `mcplint.toml`) | low |
//!
//! Whatever the table says, a change whose new text trips a rule (a finding of
//! medium or high severity inside the new value) is high and names the rule
//! (see `approval::diff` and `approval::rules_hook`).

use std::fmt;

use serde::Serialize;

use super::Severity;
use crate::manifest::json::Span;

/// What kind of change. Names are kebab-case and stable: they appear in every
/// output format and in configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// A tool appeared.
    ToolAdded,
    /// A tool disappeared.
    ToolRemoved,
    /// A removed and an added tool are alike: reported as one renamed tool.
    ToolRenamed,
    /// `title` changed.
    TitleChanged,
    /// `description` changed.
    DescriptionChanged,
    /// An annotation changed in a way that does not widen what the tool does.
    AnnotationChanged,
    /// An annotation now claims the tool does more (writes, destroys, reaches out).
    AnnotationEscalated,
    /// A parameter (or nested property) appeared.
    ParamAdded,
    /// A parameter (or nested property) disappeared.
    ParamRemoved,
    /// `type` changed, or the alternatives of `anyOf`/`oneOf`/`allOf`.
    ParamTypeChanged,
    /// A parameter became required or optional.
    ParamRequiredChanged,
    /// `enum` changed.
    ParamEnumChanged,
    /// `default` changed.
    ParamDefaultChanged,
    /// A parameter's `description` changed.
    ParamDescriptionChanged,
    /// `format` changed.
    ParamFormatChanged,
    /// `pattern` changed.
    ParamPatternChanged,
    /// `minimum`, `maxLength` and the other bounds changed.
    ParamBoundsChanged,
    /// `additionalProperties` changed (other than by its nested properties).
    ParamAdditionalPropertiesChanged,
    /// Another schema keyword changed (`title`, `examples`, `const`, `$ref` …).
    SchemaChanged,
    /// `outputSchema` appeared or disappeared.
    OutputSchemaChanged,
    /// `icons` changed.
    IconsChanged,
    /// `_meta` changed.
    MetaChanged,
    /// A field the MCP spec does not define changed.
    UnknownFieldChanged,
    /// A prompt appeared.
    PromptAdded,
    /// A prompt disappeared.
    PromptRemoved,
    /// A prompt's description or another field changed.
    PromptChanged,
    /// A prompt argument appeared.
    PromptArgumentAdded,
    /// A prompt argument disappeared.
    PromptArgumentRemoved,
    /// A prompt argument changed.
    PromptArgumentChanged,
    /// A resource appeared.
    ResourceAdded,
    /// A resource disappeared.
    ResourceRemoved,
    /// A resource changed.
    ResourceChanged,
    /// A resource template appeared.
    ResourceTemplateAdded,
    /// A resource template disappeared.
    ResourceTemplateRemoved,
    /// A resource template changed.
    ResourceTemplateChanged,
    /// The server's `instructions` changed.
    InstructionsChanged,
    /// `serverInfo` changed (name, version …).
    ServerInfoChanged,
    /// A server appeared (diffing files with several servers).
    ServerAdded,
    /// A server disappeared (diffing files with several servers).
    ServerRemoved,
    /// A server in `mcplint.toml` has no approval.
    ServerUnapproved,
    /// The source pin in `mcplint.toml` differs from the approved one.
    PinChanged,
    /// An approval names a server that `mcplint.toml` no longer lists.
    ApprovalStale,
}

impl Change {
    /// A change about a whole server (no tool, no path, no locations), at
    /// its kind's base severity.
    pub fn server_level(server: &str, kind: ChangeKind, message: String) -> Change {
        Change {
            kind,
            severity: kind.base_severity(),
            server: server.to_string(),
            subject: Subject::Server,
            tool: None,
            path: String::new(),
            before: None,
            after: None,
            before_location: None,
            after_location: None,
            rules: Vec::new(),
            message,
        }
    }
}

impl ChangeKind {
    /// Every kind, in documentation order.
    pub const ALL: &'static [ChangeKind] = &[
        ChangeKind::ToolAdded,
        ChangeKind::ToolRemoved,
        ChangeKind::ToolRenamed,
        ChangeKind::TitleChanged,
        ChangeKind::DescriptionChanged,
        ChangeKind::AnnotationChanged,
        ChangeKind::AnnotationEscalated,
        ChangeKind::ParamAdded,
        ChangeKind::ParamRemoved,
        ChangeKind::ParamTypeChanged,
        ChangeKind::ParamRequiredChanged,
        ChangeKind::ParamEnumChanged,
        ChangeKind::ParamDefaultChanged,
        ChangeKind::ParamDescriptionChanged,
        ChangeKind::ParamFormatChanged,
        ChangeKind::ParamPatternChanged,
        ChangeKind::ParamBoundsChanged,
        ChangeKind::ParamAdditionalPropertiesChanged,
        ChangeKind::SchemaChanged,
        ChangeKind::OutputSchemaChanged,
        ChangeKind::IconsChanged,
        ChangeKind::MetaChanged,
        ChangeKind::UnknownFieldChanged,
        ChangeKind::PromptAdded,
        ChangeKind::PromptRemoved,
        ChangeKind::PromptChanged,
        ChangeKind::PromptArgumentAdded,
        ChangeKind::PromptArgumentRemoved,
        ChangeKind::PromptArgumentChanged,
        ChangeKind::ResourceAdded,
        ChangeKind::ResourceRemoved,
        ChangeKind::ResourceChanged,
        ChangeKind::ResourceTemplateAdded,
        ChangeKind::ResourceTemplateRemoved,
        ChangeKind::ResourceTemplateChanged,
        ChangeKind::InstructionsChanged,
        ChangeKind::ServerInfoChanged,
        ChangeKind::ServerAdded,
        ChangeKind::ServerRemoved,
        ChangeKind::ServerUnapproved,
        ChangeKind::PinChanged,
        ChangeKind::ApprovalStale,
    ];

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::ToolAdded => "tool-added",
            ChangeKind::ToolRemoved => "tool-removed",
            ChangeKind::ToolRenamed => "tool-renamed",
            ChangeKind::TitleChanged => "title-changed",
            ChangeKind::DescriptionChanged => "description-changed",
            ChangeKind::AnnotationChanged => "annotation-changed",
            ChangeKind::AnnotationEscalated => "annotation-escalated",
            ChangeKind::ParamAdded => "param-added",
            ChangeKind::ParamRemoved => "param-removed",
            ChangeKind::ParamTypeChanged => "param-type-changed",
            ChangeKind::ParamRequiredChanged => "param-required-changed",
            ChangeKind::ParamEnumChanged => "param-enum-changed",
            ChangeKind::ParamDefaultChanged => "param-default-changed",
            ChangeKind::ParamDescriptionChanged => "param-description-changed",
            ChangeKind::ParamFormatChanged => "param-format-changed",
            ChangeKind::ParamPatternChanged => "param-pattern-changed",
            ChangeKind::ParamBoundsChanged => "param-bounds-changed",
            ChangeKind::ParamAdditionalPropertiesChanged => "param-additional-properties-changed",
            ChangeKind::SchemaChanged => "schema-changed",
            ChangeKind::OutputSchemaChanged => "output-schema-changed",
            ChangeKind::IconsChanged => "icons-changed",
            ChangeKind::MetaChanged => "meta-changed",
            ChangeKind::UnknownFieldChanged => "unknown-field-changed",
            ChangeKind::PromptAdded => "prompt-added",
            ChangeKind::PromptRemoved => "prompt-removed",
            ChangeKind::PromptChanged => "prompt-changed",
            ChangeKind::PromptArgumentAdded => "prompt-argument-added",
            ChangeKind::PromptArgumentRemoved => "prompt-argument-removed",
            ChangeKind::PromptArgumentChanged => "prompt-argument-changed",
            ChangeKind::ResourceAdded => "resource-added",
            ChangeKind::ResourceRemoved => "resource-removed",
            ChangeKind::ResourceChanged => "resource-changed",
            ChangeKind::ResourceTemplateAdded => "resource-template-added",
            ChangeKind::ResourceTemplateRemoved => "resource-template-removed",
            ChangeKind::ResourceTemplateChanged => "resource-template-changed",
            ChangeKind::InstructionsChanged => "instructions-changed",
            ChangeKind::ServerInfoChanged => "server-info-changed",
            ChangeKind::ServerAdded => "server-added",
            ChangeKind::ServerRemoved => "server-removed",
            ChangeKind::ServerUnapproved => "server-unapproved",
            ChangeKind::PinChanged => "pin-changed",
            ChangeKind::ApprovalStale => "approval-stale",
        }
    }

    /// The severity from the table in the module docs, before the
    /// refinements that depend on the values (new text, direction of a
    /// required change, rules tripped, output side).
    pub fn base_severity(self) -> Severity {
        use ChangeKind as K;
        match self {
            K::ParamAdded
            | K::DescriptionChanged
            | K::ParamDescriptionChanged
            | K::AnnotationEscalated
            | K::InstructionsChanged
            | K::ServerUnapproved
            | K::PinChanged => Severity::High,
            K::ToolAdded
            | K::ToolRenamed
            | K::TitleChanged
            | K::ParamTypeChanged
            | K::ParamRequiredChanged
            | K::ParamEnumChanged
            | K::ParamDefaultChanged
            | K::ParamFormatChanged
            | K::ParamPatternChanged
            | K::ParamBoundsChanged
            | K::ParamAdditionalPropertiesChanged
            | K::SchemaChanged
            | K::OutputSchemaChanged
            | K::UnknownFieldChanged
            | K::PromptAdded
            | K::PromptChanged
            | K::PromptArgumentAdded
            | K::PromptArgumentChanged
            | K::ResourceAdded
            | K::ResourceChanged
            | K::ResourceTemplateAdded
            | K::ResourceTemplateChanged
            | K::ServerAdded => Severity::Medium,
            K::ToolRemoved
            | K::AnnotationChanged
            | K::ParamRemoved
            | K::IconsChanged
            | K::MetaChanged
            | K::PromptRemoved
            | K::PromptArgumentRemoved
            | K::ResourceRemoved
            | K::ResourceTemplateRemoved
            | K::ServerRemoved
            | K::ApprovalStale => Severity::Low,
            K::ServerInfoChanged => Severity::Info,
        }
    }

    /// One line saying what the kind means (SARIF rule descriptions, docs).
    pub fn describe(self) -> &'static str {
        use ChangeKind as K;
        match self {
            K::ToolAdded => "A tool was added",
            K::ToolRemoved => "A tool was removed",
            K::ToolRenamed => "A tool was renamed (a removed and an added tool are alike)",
            K::TitleChanged => "A tool's title changed",
            K::DescriptionChanged => "A tool's description changed",
            K::AnnotationChanged => "A tool annotation changed",
            K::AnnotationEscalated => {
                "A tool annotation now claims the tool writes, destroys or reaches out"
            }
            K::ParamAdded => "A parameter was added",
            K::ParamRemoved => "A parameter was removed",
            K::ParamTypeChanged => "A parameter's type changed",
            K::ParamRequiredChanged => "A parameter became required or optional",
            K::ParamEnumChanged => "A parameter's allowed values changed",
            K::ParamDefaultChanged => "A parameter's default changed",
            K::ParamDescriptionChanged => "A parameter's description changed",
            K::ParamFormatChanged => "A parameter's format changed",
            K::ParamPatternChanged => "A parameter's pattern changed",
            K::ParamBoundsChanged => "A parameter's bounds changed",
            K::ParamAdditionalPropertiesChanged => "additionalProperties changed",
            K::SchemaChanged => "Another schema keyword changed",
            K::OutputSchemaChanged => "The output schema appeared or disappeared",
            K::IconsChanged => "A tool's icons changed",
            K::MetaChanged => "A tool's _meta changed",
            K::UnknownFieldChanged => "A field the MCP spec does not define changed",
            K::PromptAdded => "A prompt was added",
            K::PromptRemoved => "A prompt was removed",
            K::PromptChanged => "A prompt changed",
            K::PromptArgumentAdded => "A prompt argument was added",
            K::PromptArgumentRemoved => "A prompt argument was removed",
            K::PromptArgumentChanged => "A prompt argument changed",
            K::ResourceAdded => "A resource was added",
            K::ResourceRemoved => "A resource was removed",
            K::ResourceChanged => "A resource changed",
            K::ResourceTemplateAdded => "A resource template was added",
            K::ResourceTemplateRemoved => "A resource template was removed",
            K::ResourceTemplateChanged => "A resource template changed",
            K::InstructionsChanged => "The server's instructions changed",
            K::ServerInfoChanged => "serverInfo changed",
            K::ServerAdded => "A server was added",
            K::ServerRemoved => "A server was removed",
            K::ServerUnapproved => "A server in mcplint.toml has no approval",
            K::PinChanged => "The source pin changed without a new approval",
            K::ApprovalStale => "An approval names a server no longer in mcplint.toml",
        }
    }
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a change is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// A tool.
    Tool,
    /// A prompt.
    Prompt,
    /// A resource.
    Resource,
    /// A resource template.
    ResourceTemplate,
    /// The server as a whole (instructions, serverInfo, approvals).
    Server,
}

impl Subject {
    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Subject::Tool => "tool",
            Subject::Prompt => "prompt",
            Subject::Resource => "resource",
            Subject::ResourceTemplate => "resource-template",
            Subject::Server => "server",
        }
    }
}

/// Where one side of a change sits in its file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Location {
    /// The file, as given.
    pub file: String,
    /// Byte range of the value.
    #[serde(skip)]
    pub span: Span,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// 1-based line of the value's end.
    pub end_line: usize,
    /// 1-based column of the value's end.
    pub end_column: usize,
}

/// One change between two versions of a server.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// The kind.
    pub kind: ChangeKind,
    /// How bad it is.
    pub severity: Severity,
    /// The server's name.
    pub server: String,
    /// What the change is about.
    pub subject: Subject,
    /// The tool, prompt, resource or template name (the new name after a
    /// rename); `None` for server-level changes.
    pub tool: Option<String>,
    /// JSON pointer inside the tool (or prompt, resource): `/inputSchema/properties/notes`.
    pub path: String,
    /// The value before (absent for additions).
    pub before: Option<serde_json::Value>,
    /// The value after (absent for removals).
    pub after: Option<serde_json::Value>,
    /// Where the old value is, when known.
    pub before_location: Option<Location>,
    /// Where the new value is, when known.
    pub after_location: Option<Location>,
    /// Ids of the rules the new text trips.
    pub rules: Vec<String>,
    /// One line for people.
    pub message: String,
}

impl Change {
    /// The location to point at: the new value, else the old one.
    pub fn location(&self) -> Option<&Location> {
        self.after_location
            .as_ref()
            .or(self.before_location.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kebab_case_and_match_serde() {
        for k in ChangeKind::ALL {
            let json = serde_json::to_string(k).expect("serialize");
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert!(k.name().chars().all(|c| c.is_ascii_lowercase() || c == '-'));
        }
    }

    #[test]
    fn table_follows_the_principle() {
        assert_eq!(ChangeKind::ParamAdded.base_severity(), Severity::High);
        assert_eq!(ChangeKind::ToolAdded.base_severity(), Severity::Medium);
        assert_eq!(ChangeKind::ToolRemoved.base_severity(), Severity::Low);
        assert_eq!(
            ChangeKind::AnnotationEscalated.base_severity(),
            Severity::High
        );
    }
}
