//! The translation between ZeroClaw's planner types (`zeroclaw_config::agent_bundle`) and this
//! module's own: its errors in [`AgentError`]'s words, its closure table as our ordered
//! [`Table`] and back, its dropped entries and its risk flags. Value for value, nothing added
//! or lost; the planner, the flags, the unknown-key check and the bundle all cross here.

use zeroclaw_config::agent_bundle as zc;

use super::error::AgentError;
use super::manifest::{DropReason, Dropped, RiskFlag, RiskKind};
use super::value::{Node, Table};

/// ZeroClaw's planner errors, in this module's words (the field or alias named).
pub(crate) fn from_zeroclaw(err: zc::ExportError) -> AgentError {
    match err {
        zc::ExportError::UnknownAgent(alias) => AgentError::UnknownAgent {
            alias,
            configured: Vec::new(),
        },
        zc::ExportError::Serialize(problem) => AgentError::InvalidField {
            field: "config.toml".to_string(),
            problem: format!("could not be serialized by ZeroClaw's schema: {problem}"),
        },
        zc::ExportError::UnscrubbedSecret { path } => AgentError::CiphertextSurvived { path },
        zc::ExportError::ClosureInvalid { alias, error } => AgentError::ClosureInvalid {
            alias,
            problem: error.replace('\n', " "),
        },
    }
}

/// ZeroClaw's closure table as this module's ordered tree (through its TOML text, so key
/// order and every value type survive exactly).
pub(crate) fn table_from_zeroclaw(table: &toml::Table) -> Result<Table, AgentError> {
    let text = toml::to_string(table).map_err(|e| AgentError::InvalidField {
        field: "config.toml".to_string(),
        problem: format!("could not be serialized: {e}"),
    })?;
    let doc: toml_edit::DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| AgentError::InvalidField {
                field: "config.toml".to_string(),
                problem: format!("does not re-parse: {}", e.message()),
            })?;
    Ok(Table::from_toml_edit(doc.as_table()))
}

/// This module's tree back as ZeroClaw's table, value for value.
pub(crate) fn table_to_zeroclaw(table: &Table) -> toml::Table {
    fn value(node: &Node) -> toml::Value {
        match node {
            Node::Str(s) => toml::Value::String(s.clone()),
            Node::Int(i) => toml::Value::Integer(*i),
            Node::Float(f) => toml::Value::Float(*f),
            Node::Bool(b) => toml::Value::Boolean(*b),
            Node::Datetime(d) => toml::Value::Datetime(*d),
            Node::Array(items) => toml::Value::Array(items.iter().map(value).collect()),
            Node::Table(t) => toml::Value::Table(table_to_zeroclaw(t)),
        }
    }
    table
        .iter()
        .map(|(k, v)| (k.to_string(), value(v)))
        .collect()
}

pub(crate) fn dropped_from(d: &zc::DroppedRef) -> Dropped {
    Dropped::new(
        d.path.clone(),
        DropReason::from_wire(d.reason.as_wire()).unwrap_or(DropReason::NotYetPortable),
        d.detail.clone(),
    )
}

pub(crate) fn dropped_to(d: &Dropped) -> zc::DroppedRef {
    zc::DroppedRef {
        path: d.path.clone(),
        reason: match d.reason {
            DropReason::HostSpecific => zc::DropReason::HostSpecific,
            DropReason::Relational => zc::DropReason::Relational,
            DropReason::DefaultClosed => zc::DropReason::DefaultClosed,
            DropReason::PrivateData => zc::DropReason::PrivateData,
            DropReason::NotYetPortable => zc::DropReason::NotYetPortable,
            DropReason::SourceMissing => zc::DropReason::SourceMissing,
        },
        detail: d.detail.clone(),
    }
}

pub(crate) fn flag_from(f: &zc::RiskFlag) -> RiskFlag {
    RiskFlag::new(
        RiskKind::from_wire(f.kind.as_wire()).unwrap_or(RiskKind::ProcessSpawn),
        f.path.clone(),
        f.detail.clone(),
    )
}

pub(crate) fn flag_to(f: &RiskFlag) -> zc::RiskFlag {
    zc::RiskFlag {
        kind: match f.kind {
            RiskKind::CarriedSkills => zc::RiskKind::CarriedSkills,
            RiskKind::FullAutonomy => zc::RiskKind::FullAutonomy,
            RiskKind::FilesystemEscape => zc::RiskKind::FilesystemEscape,
            RiskKind::SandboxDisabled => zc::RiskKind::SandboxDisabled,
            RiskKind::ApprovalBypass => zc::RiskKind::ApprovalBypass,
            RiskKind::EnvPassthrough => zc::RiskKind::EnvPassthrough,
            RiskKind::ExtraFilesystemRoots => zc::RiskKind::ExtraFilesystemRoots,
            RiskKind::DelegationEnabled => zc::RiskKind::DelegationEnabled,
            RiskKind::ProcessSpawn => zc::RiskKind::ProcessSpawn,
            RiskKind::UntrustedStartupContext => zc::RiskKind::UntrustedStartupContext,
        },
        path: f.path.clone(),
        detail: f.detail.clone(),
    }
}
