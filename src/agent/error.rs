//! The one error enum of the agent module. Every message is lowercase and names the file, the
//! config field (as a dotted path) or the alias it is about, so the CLI can print it as is.
//! The words for where the install is by default ([`INSTALL_DEFAULT`]) live here too: the
//! "no install" errors print them, and so does every `--help` that takes `--install`.

use std::path::PathBuf;

/// Where the install is when `--install` is not given, in the one wording every `--help` that
/// takes `--install` and every "no install" error use (`install_root` is the rule).
pub const INSTALL_DEFAULT: &str =
    "$ZEROCLAW_CONFIG_DIR, else the install $ZEROCLAW_DATA_DIR belongs to, else ~/.zeroclaw";

/// What can go wrong while reading an install, planning an export or rendering a bundle.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Neither `--install`, the environment nor `$HOME` says where the install is.
    #[error(
        "no install location: $HOME is not set; pass --install DIR (without it, the install is {})",
        INSTALL_DEFAULT
    )]
    NoInstallLocation,
    /// The install path holds no `config.toml` file.
    #[error(
        "no ZeroClaw install at {}: {} {problem} (pass --install DIR to name the install; \
         without it, the install is {})",
        root.display(),
        config.display(),
        INSTALL_DEFAULT
    )]
    NoInstall {
        /// The install root looked at.
        root: PathBuf,
        /// Its `config.toml`.
        config: PathBuf,
        /// What is wrong with it: "does not exist", "is not a file".
        problem: &'static str,
    },
    /// `config.toml` could not be read.
    #[error("could not read {path}")]
    ReadConfig {
        /// The file that was read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `config.toml` is not valid TOML.
    #[error("could not parse {path} at line {line}, column {column}: {message}")]
    ParseConfig {
        /// The file that was parsed.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// The parser's description, without its own location header.
        message: String,
    },
    /// The requested alias is not an `[agents.<alias>]` entry.
    #[error(
        "agent '{alias}' is not configured in this install; configured agents: {}",
        if configured.is_empty() { "(none)".to_string() } else { configured.join(", ") }
    )]
    UnknownAgent {
        /// The alias that was asked for.
        alias: String,
        /// The configured aliases, sorted.
        configured: Vec<String>,
    },
    /// A config field the planner reads has a shape the schema does not allow.
    #[error("config field {field} {problem}")]
    InvalidField {
        /// Dotted path of the field.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// An `enc:`/`enc2:` value survived the scrub: the export must not be written. Secret
    /// fields never get here (they are blanked whatever they hold); this is ciphertext in a
    /// field the schema does not mark secret.
    #[error(
        "refusing to write the bundle: {path} holds encrypted config ciphertext, but ZeroClaw's \
         schema does not mark that field secret, so it is not scrubbed and this tool cannot \
         decrypt it; unset {path} in this install's config (keep any credential in a field the \
         schema marks secret, where it is scrubbed and listed in required_secrets) and export again"
    )]
    CiphertextSurvived {
        /// Dotted path of the value.
        path: String,
    },
    /// The config's `schema_version` is newer than the pinned ZeroClaw schema this crate reads.
    #[error(
        "config.toml has schema_version {found}, newer than schema version {supported} that this \
         zeroclaw-bundle reads; export it with a zeroclaw-bundle built for schema version {found}"
    )]
    SchemaTooNew {
        /// The version the config declares.
        found: i64,
        /// The version this crate reads.
        supported: i64,
    },
    /// The rendered fragment does not load, or fails ZeroClaw's `Config::validate()`, on its
    /// own (the closure gate).
    #[error(
        "the closure for agent '{alias}' does not validate on a clean install: {problem}; \
         a bundle has to stand on its own, so it is not written: fix that field in this install's config and export again"
    )]
    ClosureInvalid {
        /// The exported agent.
        alias: String,
        /// ZeroClaw's error, naming the field.
        problem: String,
    },
    /// An `export --exclude` pattern cannot be used.
    #[error("--exclude '{pattern}' {problem}")]
    InvalidExclude {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A bundle manifest does not follow format 1.
    #[error("manifest field {field} {problem}")]
    InvalidManifest {
        /// Dotted path of the field in `zeroclaw-agent.toml`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The capture reported a result that does not match the plan it was given.
    #[error("capture outcome does not match the export plan: {0}")]
    CaptureMismatch(String),
}
