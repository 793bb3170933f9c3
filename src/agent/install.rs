//! A ZeroClaw install as this crate reads it: the install root (the directory holding
//! `config.toml`) and its config, loaded the way ZeroClaw 0.8.7 loads it, minus every write.
//!
//! ZeroClaw's daemon loader (`Config::load_or_init`) parses the text, migrates a v1 or v2
//! config to the current schema in memory, deserializes it section by section (an invalid
//! section is skipped as "degraded" so the daemon still boots), restores the built-in
//! auto-approved tools of `risk_profiles.default`, and then writes to the install (creates
//! skill-bundle directories, may move a v1 workspace). [`Install::load`] does the first four
//! through `zeroclaw-config`'s pure functions and never the last: reading `config.toml` is the
//! only filesystem access of the agent module. Environment overrides (`ZEROCLAW_<path>`) and
//! secret decryption are not applied: a bundle describes the install's file, and every secret
//! is scrubbed anyway.

use std::path::{Path, PathBuf};

use zeroclaw_config::migration;
use zeroclaw_config::schema::Config;

use super::error::AgentError;
use super::layout::CONFIG_FILE;
use super::value::{Node, Table};

/// Fails with [`AgentError::NoInstall`] when `root` has no `config.toml` (or a directory by
/// that name). Any other kind of file (a FIFO, a device) is left to the config's reader, which
/// refuses it by kind without waiting on it.
pub fn require_install(root: &Path) -> Result<(), AgentError> {
    let config = root.join(CONFIG_FILE);
    match std::fs::metadata(&config) {
        Ok(m) if m.is_dir() => Err(AgentError::NoInstall {
            root: root.to_path_buf(),
            config,
            problem: "is a directory",
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(AgentError::NoInstall {
            root: root.to_path_buf(),
            config,
            problem: "does not exist",
        }),
        Err(source) => Err(AgentError::ReadConfig {
            path: config,
            source,
        }),
    }
}

/// Where the install is, as ZeroClaw 0.8.7 finds its own (`schema.rs`:
/// `resolve_runtime_config_dirs`): `--install`, else `$ZEROCLAW_CONFIG_DIR` (trimmed, `~`
/// expanded), else the install `$ZEROCLAW_DATA_DIR` (or the deprecated `$ZEROCLAW_WORKSPACE`)
/// belongs to, else `$ZEROCLAW_HOME` (this tool's own older name, which ZeroClaw does not read),
/// else `~/.zeroclaw`.
pub fn install_root(flag: Option<&Path>) -> Result<PathBuf, AgentError> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(dir) = var("ZEROCLAW_CONFIG_DIR") {
        return expand_tilde(&dir);
    }
    if let Some(data) = var("ZEROCLAW_DATA_DIR").or_else(|| var("ZEROCLAW_WORKSPACE")) {
        return Ok(config_dir_for_data(&expand_tilde(&data)?));
    }
    if let Some(h) = std::env::var_os("ZEROCLAW_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    Ok(home()?.join(".zeroclaw"))
}

fn home() -> Result<PathBuf, AgentError> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .ok_or(AgentError::NoInstallLocation)
}

fn expand_tilde(path: &str) -> Result<PathBuf, AgentError> {
    match path.strip_prefix('~') {
        Some("") => home(),
        Some(rest) if rest.starts_with('/') => Ok(home()?.join(rest.trim_start_matches('/'))),
        _ => Ok(PathBuf::from(path)),
    }
}

/// The install a data directory belongs to (ZeroClaw 0.8.7 `schema.rs`: `config_dir_for_data`;
/// it only reads whether files exist).
fn config_dir_for_data(data_dir: &Path) -> PathBuf {
    if data_dir.join(CONFIG_FILE).exists() {
        return data_dir.to_path_buf();
    }
    if let Some(legacy) = data_dir.parent().map(|p| p.join(".zeroclaw")) {
        let named_like_data = data_dir
            .file_name()
            .is_some_and(|n| n == "data" || n == "workspace");
        if legacy.join(CONFIG_FILE).exists() || named_like_data {
            return legacy;
        }
    }
    data_dir.to_path_buf()
}

/// A loaded install: where it lives, its config as written, and its config as ZeroClaw
/// means it.
#[derive(Clone, Debug)]
pub struct Install {
    root: PathBuf,
    /// The file as written (for messages and for the aliases a skipped section hid).
    pub(crate) config: Table,
    /// The config as ZeroClaw 0.8.7's loader reads it (migrated, salvaged, typed).
    pub(crate) typed: Config,
    /// The schema version the file declares (1 when it has no `schema_version`).
    schema_version: u32,
    /// Sections ZeroClaw's loader skips as invalid (dotted paths), with the strict loader's
    /// reason when there are any.
    degraded: Vec<String>,
    degraded_reason: Option<String>,
}

/// An install's `config.toml` above this is refused, never read whole (the real ones are a
/// few KiB; a FIFO or `/dev/zero` in its place is refused by type before any read).
pub(crate) const CONFIG_CAP: u64 = 16 << 20;

impl Install {
    /// Read and load `<root>/config.toml`. A parse error names the file and the line; a
    /// schema version newer than the pinned ZeroClaw's is refused by name.
    pub fn load(root: &Path) -> Result<Install, AgentError> {
        let path = root.join(CONFIG_FILE);
        let text = crate::sys::read_small_text(&path, CONFIG_CAP, "a ZeroClaw config.toml")
            .map_err(|source| AgentError::ReadConfig {
                path: path.clone(),
                source,
            })?;
        Self::parse(root, &path, &text)
    }

    /// Build an install from config text already in memory (`root` is where it would live).
    pub fn from_toml_str(root: &Path, text: &str) -> Result<Install, AgentError> {
        Self::parse(root, &root.join(CONFIG_FILE), text)
    }

    fn parse(root: &Path, path: &Path, text: &str) -> Result<Install, AgentError> {
        let doc: toml_edit::DocumentMut = text.parse().map_err(|err: toml_edit::TomlError| {
            let offset = err.span().map(|s| s.start).unwrap_or(0).min(text.len());
            let (line, column) = line_column(text, offset);
            AgentError::ParseConfig {
                path: path.to_path_buf(),
                line,
                column,
                message: err.message().trim().to_string(),
            }
        })?;
        let config = Table::from_toml_edit(doc.as_table());
        let schema_version = declared_schema_version(&config)?;
        // Relative config paths resolve against the install root, so make it absolute once
        // (lexically: the capture decides what the path really reaches).
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        let salvaged = migration::migrate_to_current_salvaged(text);
        let mut typed = salvaged.config;
        if salvaged
            .dropped_security
            .iter()
            .any(|p| p == migration::WHOLE_CONFIG_SENTINEL)
        {
            // Nothing of the file loaded: ZeroClaw would boot on defaults. There is no agent
            // to export from that, so say why with the strict loader's own words.
            let reason = strict_error(text).unwrap_or_else(|| "it does not load".to_string());
            return Err(AgentError::InvalidField {
                field: "config.toml".to_string(),
                problem: format!("does not load under ZeroClaw's schema: {reason}"),
            });
        }
        let mut degraded = salvaged.dropped;
        degraded.extend(salvaged.dropped_security);
        degraded.sort();
        let degraded_reason = if degraded.is_empty() {
            None
        } else {
            strict_error(text)
        };
        // What `load_or_init` does after deserializing, minus the writes: the computed paths
        // (the install root every relative path resolves against), and the built-in
        // auto-approved tools on an existing `risk_profiles.default`.
        let config_path = root.join(CONFIG_FILE);
        typed.config_path = config_path.clone();
        typed.data_dir = root.join("workspace");
        typed.loaded_from = Some(config_path);
        if let Some(default_profile) = typed.risk_profiles.get_mut("default") {
            default_profile.ensure_default_auto_approve();
        }
        Ok(Install {
            root,
            config,
            typed,
            schema_version,
            degraded,
            degraded_reason,
        })
    }

    /// The install root (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The schema version `config.toml` declares (1 when it has no `schema_version` key).
    /// Versions older than [`super::schema::SUPPORTED_SCHEMA_VERSION`] are migrated in memory.
    pub fn schema_version(&self) -> u32 {
        self.schema_version
    }

    /// Config sections ZeroClaw's loader skips as invalid, as dotted paths (an entry the
    /// loader does not accept, such as a provider alias with an unknown `auth_mode`).
    pub fn degraded_sections(&self) -> &[String] {
        &self.degraded
    }

    /// Why the strict loader refuses the file, when some section is skipped.
    pub fn degraded_reason(&self) -> Option<&str> {
        self.degraded_reason.as_deref()
    }

    /// The configured agent aliases (`[agents.<alias>]`) as ZeroClaw loads them, sorted.
    pub fn agent_aliases(&self) -> Vec<String> {
        let mut aliases: Vec<String> = self.typed.agents.keys().cloned().collect();
        aliases.sort();
        aliases
    }

    /// Whether `config.toml` as written has an `agents.<alias>` entry of any shape (ZeroClaw's
    /// loader may still skip it when its section is invalid).
    pub(crate) fn writes_agent(&self, alias: &str) -> bool {
        self.config.lookup(&["agents", alias]).is_some()
    }
}

/// The strict loader's error for a file the salvaging loader only partly loads.
fn strict_error(text: &str) -> Option<String> {
    migration::migrate_to_current(text)
        .err()
        .map(|e| format!("{e:#}").replace('\n', " ").trim().to_string())
}

/// `schema_version` as written (1 when absent), refusing a malformed or too new one by name.
/// ZeroClaw's loader would boot on defaults for a newer one; an export must not.
fn declared_schema_version(config: &Table) -> Result<u32, AgentError> {
    let found = match config.get("schema_version") {
        None => return Ok(1),
        Some(Node::Int(v)) => *v,
        Some(other) => {
            return Err(AgentError::InvalidField {
                field: "schema_version".to_string(),
                problem: format!("must be a positive integer, not {}", other.type_name()),
            })
        }
    };
    let supported = i64::from(migration::CURRENT_SCHEMA_VERSION);
    if found > supported {
        return Err(AgentError::SchemaTooNew { found, supported });
    }
    u32::try_from(found)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| AgentError::InvalidField {
            field: "schema_version".to_string(),
            problem: format!("must be a positive integer, not {found}"),
        })
}

/// 1-based line and character column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_error_names_file_and_line() {
        let err = Install::from_toml_str(Path::new("/zc"), "[agents.a]\nok = 1\nbroken = \n")
            .expect_err("invalid toml");
        let text = err.to_string();
        assert!(text.contains("/zc/config.toml"), "{text}");
        assert!(text.contains("line 3"), "{text}");
        assert!(matches!(err, AgentError::ParseConfig { line: 3, .. }));
    }

    #[test]
    fn load_reads_config_and_missing_file_names_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Install::load(dir.path()).expect_err("no config");
        assert!(err.to_string().contains("config.toml"), "{err}");
        std::fs::write(
            dir.path().join("config.toml"),
            "schema_version = 3\n[agents.b]\n[agents.a]\n",
        )
        .expect("write");
        let install = Install::load(dir.path()).expect("loads");
        assert_eq!(install.agent_aliases(), ["a", "b"]);
        assert_eq!(install.root(), dir.path());
        assert_eq!(install.schema_version(), 3);
    }

    #[test]
    fn newer_schema_is_refused_and_older_is_migrated() {
        let err =
            Install::from_toml_str(Path::new("/zc"), "schema_version = 4\n").expect_err("too new");
        assert!(
            matches!(err, AgentError::SchemaTooNew { found: 4, .. }),
            "{err}"
        );
        let v1 = Install::from_toml_str(Path::new("/zc"), "default_temperature = 0.5\n")
            .expect("v1 migrates");
        assert_eq!(v1.schema_version(), 1);
    }
}
