//! A ZeroClaw install as this crate reads it: the install root (the directory holding
//! `config.toml`) and its parsed config. Reading `config.toml` is the only filesystem access of
//! the agent module; everything after it is pure logic over the parsed tree.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::AgentError;
use super::layout::CONFIG_FILE;
use super::value::{Node, Table};

/// Where the install is: `--install`, else `$ZEROCLAW_HOME`, else `~/.zeroclaw`.
pub fn install_root(flag: Option<&Path>) -> Result<PathBuf, AgentError> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(h) = std::env::var_os("ZEROCLAW_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .ok_or(AgentError::NoInstallLocation)?;
    Ok(PathBuf::from(home).join(".zeroclaw"))
}

/// A parsed install: where it lives and what its config says.
#[derive(Clone, Debug)]
pub struct Install {
    root: PathBuf,
    pub(crate) config: Table,
}

impl Install {
    /// Read and parse `<root>/config.toml`. A parse error names the file and the line.
    pub fn load(root: &Path) -> Result<Install, AgentError> {
        let path = root.join(CONFIG_FILE);
        let text = fs::read_to_string(&path).map_err(|source| AgentError::ReadConfig {
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
        // Relative config paths resolve against the install root, so make it absolute once
        // (lexically: the capture decides what the path really reaches).
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        Ok(Install {
            root,
            config: Table::from_toml_edit(doc.as_table()),
        })
    }

    /// The install root (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configured agent aliases (`[agents.<alias>]`), sorted.
    pub fn agent_aliases(&self) -> Vec<String> {
        let mut aliases: Vec<String> = self
            .config
            .get("agents")
            .and_then(Node::as_table)
            .map(|agents| {
                agents
                    .iter()
                    .filter(|(_, v)| v.as_table().is_some())
                    .map(|(k, _)| k.to_string())
                    .collect()
            })
            .unwrap_or_default();
        aliases.sort();
        aliases
    }
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
        fs::write(dir.path().join("config.toml"), "[agents.b]\n[agents.a]\n").expect("write");
        let install = Install::load(dir.path()).expect("loads");
        assert_eq!(install.agent_aliases(), ["a", "b"]);
        assert_eq!(install.root(), dir.path());
    }
}
