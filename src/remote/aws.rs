//! Credentials and region from the standard AWS files, as the AWS CLI finds them:
//! `AWS_SHARED_CREDENTIALS_FILE` (else `~/.aws/credentials`, sections `[NAME]`) and
//! `AWS_CONFIG_FILE` (else `~/.aws/config`, sections `[default]` and `[profile NAME]`), for
//! the profile `AWS_PROFILE` (else `default`). The environment takes precedence: keys from
//! the files are used only when `AWS_ACCESS_KEY_ID` is unset, a region only when neither
//! `AWS_REGION` nor `AWS_DEFAULT_REGION` is set. Within the files the credentials file wins
//! over the config file, key by key, as in the CLI.
//!
//! object_store reads only the environment, so this module parses the INI subset these files
//! use (sections, `key = value`, `#`/`;` comment lines, indented sub-keys skipped) and hands
//! the values to the S3 builder. No value read here is ever formatted into a message: errors
//! name the file, the profile and the key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::RemoteError;

/// What the files give for the selected profile.
#[derive(Default, PartialEq, Eq)]
pub(crate) struct FileSettings {
    /// `aws_access_key_id` and `aws_secret_access_key` (with `aws_session_token`, if any).
    pub keys: Option<(String, String, Option<String>)>,
    /// `region`.
    pub region: Option<String>,
    /// Where the keys came from (for `-v`; a path, never a value).
    pub keys_from: Option<PathBuf>,
}

// Never print a secret, not even by accident through `{:?}`.
impl std::fmt::Debug for FileSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSettings")
            .field("keys", &self.keys.as_ref().map(|_| "<redacted>"))
            .field("region", &self.region)
            .field("keys_from", &self.keys_from)
            .finish()
    }
}

/// One INI file: section -> key -> value (keys lowercased).
type Ini = HashMap<String, HashMap<String, String>>;

fn parse_ini(text: &str) -> Ini {
    let mut out: Ini = HashMap::new();
    let mut section: Option<String> = None;
    for line in text.lines() {
        // A line that starts with whitespace continues a nested block (`s3 =` followed by
        // indented settings): not a top-level key.
        if line.starts_with([' ', '\t']) && !line.trim().starts_with('[') {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_string();
            out.entry(name.clone()).or_default();
            section = Some(name);
            continue;
        }
        let (Some(sec), Some((k, v))) = (&section, line.split_once('=')) else {
            continue;
        };
        out.entry(sec.clone())
            .or_default()
            .insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    out
}

/// The AWS files hold a few profiles: a larger one is refused, never read whole.
const AWS_FILE_CAP: u64 = 1 << 20;

/// Reads `path`; a missing file is an empty one.
fn read_ini(path: &Path) -> Result<Option<Ini>, RemoteError> {
    match crate::sys::read_small_text(path, AWS_FILE_CAP, "an AWS credentials or config file") {
        Ok(text) => Ok(Some(parse_ini(&text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(RemoteError::Config {
            path: path.to_path_buf(),
            why: format!("could not read this AWS file: {e}"),
        }),
    }
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// The settings of the selected profile from the AWS files, looked up through `env` (the
/// process environment in production).
pub(crate) fn from_files(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<FileSettings, RemoteError> {
    let home = non_empty(env("HOME")).map(PathBuf::from);
    let default_in = |file: &str| home.as_ref().map(|h| h.join(".aws").join(file));
    let creds_path = non_empty(env("AWS_SHARED_CREDENTIALS_FILE"))
        .map(PathBuf::from)
        .or_else(|| default_in("credentials"));
    let config_path = non_empty(env("AWS_CONFIG_FILE"))
        .map(PathBuf::from)
        .or_else(|| default_in("config"));
    let explicit_profile = non_empty(env("AWS_PROFILE"));
    let profile = explicit_profile
        .clone()
        .unwrap_or_else(|| "default".to_string());

    let creds = match &creds_path {
        Some(p) => read_ini(p)?,
        None => None,
    };
    let config = match &config_path {
        Some(p) => read_ini(p)?,
        None => None,
    };
    let creds_section = creds.as_ref().and_then(|c| c.get(&profile));
    let config_section = config.as_ref().and_then(|c| {
        if profile == "default" {
            c.get("default").or_else(|| c.get("profile default"))
        } else {
            c.get(&format!("profile {profile}"))
        }
    });
    if explicit_profile.is_some() && creds_section.is_none() && config_section.is_none() {
        let shown = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or("(no file)".to_string(), |p| p.display().to_string())
        };
        return Err(RemoteError::Config {
            path: creds_path.clone().unwrap_or_default(),
            why: format!(
                "AWS_PROFILE names profile {profile:?}, which neither this file nor {} defines",
                shown(&config_path)
            ),
        });
    }

    let mut out = FileSettings::default();
    // Key by key: the credentials file first, then the config file.
    for (section, path) in [(creds_section, &creds_path), (config_section, &config_path)] {
        let Some(section) = section else { continue };
        let path = path.clone().unwrap_or_default();
        if out.keys.is_none() {
            let id = non_empty(section.get("aws_access_key_id").cloned());
            let secret = non_empty(section.get("aws_secret_access_key").cloned());
            match (id, secret) {
                (Some(id), Some(secret)) => {
                    let token = non_empty(section.get("aws_session_token").cloned());
                    out.keys = Some((id, secret, token));
                    out.keys_from = Some(path.clone());
                }
                (None, None) => {}
                (Some(_), None) | (None, Some(_)) => {
                    return Err(RemoteError::Config {
                        path,
                        why: format!(
                            "profile {profile:?} sets only one of aws_access_key_id and \
                             aws_secret_access_key"
                        ),
                    })
                }
            }
        }
        if out.region.is_none() {
            out.region = non_empty(section.get("region").cloned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn profiles_precedence_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("creds");
        let config = dir.path().join("config");
        std::fs::write(
            &creds,
            "# comment\n[default]\naws_access_key_id = AKD\naws_secret_access_key = SD\n\
             [work]\n aws_access_key_id=ignored-nested\naws_access_key_id=AKW\n\
             aws_secret_access_key= SW \naws_session_token = TW\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[default]\nregion = eu-west-1\n[profile work]\nregion=us-east-2\n\
             s3 =\n  max_concurrent_requests = 4\n[profile cfgonly]\n\
             aws_access_key_id = AKC\naws_secret_access_key = SC\n[profile half]\n\
             aws_access_key_id = AKH\n",
        )
        .unwrap();
        let base = vec![
            ("AWS_SHARED_CREDENTIALS_FILE", creds.display().to_string()),
            ("AWS_CONFIG_FILE", config.display().to_string()),
        ];
        let s = from_files(&env_of(&base)).unwrap();
        assert_eq!(s.keys, Some(("AKD".into(), "SD".into(), None)));
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));

        let mut work = base.clone();
        work.push(("AWS_PROFILE", "work".into()));
        let s = from_files(&env_of(&work)).unwrap();
        assert_eq!(s.keys, Some(("AKW".into(), "SW".into(), Some("TW".into()))));
        assert_eq!(s.region.as_deref(), Some("us-east-2"));
        assert!(!format!("{s:?}").contains("SW"), "Debug must redact");

        let mut cfg = base.clone();
        cfg.push(("AWS_PROFILE", "cfgonly".into()));
        let s = from_files(&env_of(&cfg)).unwrap();
        assert_eq!(s.keys, Some(("AKC".into(), "SC".into(), None)));
        assert_eq!(s.keys_from.as_deref(), Some(config.as_path()));

        let mut half = base.clone();
        half.push(("AWS_PROFILE", "half".into()));
        let err = from_files(&env_of(&half)).unwrap_err().to_string();
        assert!(err.contains("only one of") && !err.contains("AKH"), "{err}");

        let mut none = base.clone();
        none.push(("AWS_PROFILE", "nope".into()));
        let err = from_files(&env_of(&none)).unwrap_err().to_string();
        assert!(err.contains("\"nope\""), "{err}");

        // No files at all: nothing, no error.
        let s = from_files(&env_of(&[(
            "HOME",
            dir.path().join("none").display().to_string(),
        )]))
        .unwrap();
        assert_eq!(s, FileSettings::default());
    }
}
