//! `<store>/remotes.toml`: the configured remotes, one table each (`[remote.NAME]` with `url`
//! and an optional `endpoint`). Never holds credentials; written to a temporary file and
//! renamed into place.

use std::fs;
use std::path::{Path, PathBuf};

use toml_edit::{value, DocumentMut, Item, Table};

use super::RemoteError;

/// One configured remote (`--json` prints it as it serializes: `remote`, `url`, `endpoint`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RemoteSpec {
    /// Its name (`[A-Za-z0-9._-]`, not starting with `.` or `-`).
    #[serde(rename = "remote")]
    pub name: String,
    /// `s3://bucket/prefix` or `file:///path`.
    pub url: String,
    /// An S3-compatible server's endpoint (`http://host:port`), for `s3://` only.
    pub endpoint: Option<String>,
    /// Encrypted (`remote add --encrypt-to`): everything on it is sealed under its data key,
    /// and nothing is ever pushed to it in plaintext (see `sealed`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub encrypted: bool,
    /// An encrypted remote's key id, pinned when it was added (see `crypt::DataKeys::id`): a
    /// key file holding another data key is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The identity that opens its key file (`remote add --identity`; none: the key `sign`
    /// uses). `ZEROCLAW_BUNDLE_IDENTITY` overrides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

fn file_of(store_root: &Path) -> PathBuf {
    store_root.join("remotes.toml")
}

fn config_err(path: &Path, why: impl Into<String>) -> RemoteError {
    RemoteError::Config {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// Checks a remote's name, URL and endpoint.
pub fn validate(spec: &RemoteSpec) -> Result<(), RemoteError> {
    let invalid = |why: String| RemoteError::Invalid {
        name: spec.name.clone(),
        why,
    };
    let name_ok = !spec.name.is_empty()
        && spec.name.len() <= 64
        && !spec.name.starts_with(['.', '-'])
        && spec
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !name_ok {
        return Err(RemoteError::Invalid {
            name: format!("{:?}", spec.name),
            why: "a remote name is 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)".into(),
        });
    }
    // `agent/<alias>` is a local snapshot ref; a remote of that name would shadow it in
    // `diff` and `mount`, which read `NAME/SNAPSHOT` as a remote ref.
    if spec.name == "agent" {
        return Err(RemoteError::Invalid {
            name: spec.name.clone(),
            why: "`agent` is reserved (agent/<alias> names a local snapshot); pick another name"
                .into(),
        });
    }
    // Printed by `remote list` and in errors: no control characters (escaped there too).
    for (what, text) in [
        ("URL", Some(&spec.url)),
        ("endpoint", spec.endpoint.as_ref()),
    ] {
        let Some(text) = text else { continue };
        if text.chars().any(char::is_control) {
            return Err(invalid(format!(
                "the {what} {} holds a control character",
                zeroclaw_bundle_store::escape_text(text)
            )));
        }
        // A query or fragment is where presigned tokens and keys hide: refused, not stored.
        if text.contains(['?', '#']) {
            return Err(invalid(format!(
                "the {what} has a query string or fragment (?...#...); credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or ~/.aws files, never from the URL"
            )));
        }
    }
    if let Some(rest) = spec.url.strip_prefix("s3://") {
        let bucket = rest.split('/').next().unwrap_or("");
        if bucket.is_empty() {
            return Err(invalid(format!(
                "{} names no bucket (s3://BUCKET/PREFIX)",
                spec.url
            )));
        }
        if bucket.contains('@') {
            return Err(invalid(
                "credentials do not belong in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                    .into(),
            ));
        }
    } else if let Some(path) = spec.url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(invalid(format!(
                "{} is not an absolute file URL (file:///PATH)",
                spec.url
            )));
        }
        if spec.endpoint.is_some() {
            return Err(invalid("--endpoint applies to s3:// remotes only".into()));
        }
    } else {
        return Err(invalid(format!(
            "{} is not a remote URL (s3://BUCKET/PREFIX or file:///PATH)",
            spec.url
        )));
    }
    if let Some(ep) = &spec.endpoint {
        let Some(host) = ep
            .strip_prefix("http://")
            .or_else(|| ep.strip_prefix("https://"))
        else {
            return Err(invalid(format!(
                "endpoint {ep} is not an http:// or https:// URL"
            )));
        };
        if host.split('/').next().unwrap_or("").contains('@') {
            return Err(invalid(
                "credentials do not belong in the endpoint; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// `remotes.toml` names a few remotes: a larger one is refused, never read whole.
const REMOTES_CAP: u64 = 1 << 20;

fn read_doc(path: &Path) -> Result<DocumentMut, RemoteError> {
    match crate::sys::read_small_text(path, REMOTES_CAP, "a remotes.toml") {
        Ok(text) => text
            .parse::<DocumentMut>()
            .map_err(|e| config_err(path, format!("not valid TOML: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DocumentMut::new()),
        Err(e) => Err(config_err(path, format!("could not read it: {e}"))),
    }
}

/// The remotes configured for the store at `store_root`, in file order.
pub fn load_remotes(store_root: &Path) -> Result<Vec<RemoteSpec>, RemoteError> {
    let path = file_of(store_root);
    let doc = read_doc(&path)?;
    let Some(remotes) = doc.get("remote") else {
        return Ok(Vec::new());
    };
    let table = remotes
        .as_table()
        .ok_or_else(|| config_err(&path, "remote is not a table"))?;
    let mut out = Vec::new();
    for (name, item) in table.iter() {
        let field = |key: &str| -> Result<Option<String>, RemoteError> {
            match item.get(key) {
                None => Ok(None),
                Some(v) => v.as_str().map(|s| Some(s.to_string())).ok_or_else(|| {
                    config_err(&path, format!("remote.{name}.{key} is not a string"))
                }),
            }
        };
        let spec = RemoteSpec {
            name: name.to_string(),
            url: field("url")?
                .ok_or_else(|| config_err(&path, format!("remote.{name}.url is missing")))?,
            endpoint: field("endpoint")?,
            encrypted: match item.get("encrypted") {
                None => false,
                Some(v) => v.as_bool().ok_or_else(|| {
                    config_err(
                        &path,
                        format!("remote.{name}.encrypted is not true or false"),
                    )
                })?,
            },
            key_id: field("key_id")?,
            identity: field("identity")?,
        };
        validate(&spec).map_err(|e| config_err(&path, e.to_string()))?;
        out.push(spec);
    }
    Ok(out)
}

/// The remote named `name`.
pub fn find_remote(store_root: &Path, name: &str) -> Result<RemoteSpec, RemoteError> {
    let all = load_remotes(store_root)?;
    let known = if all.is_empty() {
        "none".to_string()
    } else {
        all.iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    all.into_iter()
        .find(|r| r.name == name)
        .ok_or_else(|| RemoteError::Unknown {
            name: name.to_string(),
            known,
        })
}

/// Adds `spec` to the store's remotes; refuses a name already configured.
pub fn add_remote(store_root: &Path, spec: &RemoteSpec) -> Result<(), RemoteError> {
    validate(spec)?;
    let path = file_of(store_root);
    let mut doc = read_doc(&path)?;
    if !doc.contains_key("remote") {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert("remote", Item::Table(t));
    }
    let remotes = doc["remote"]
        .as_table_mut()
        .ok_or_else(|| config_err(&path, "remote is not a table"))?;
    if remotes.contains_key(&spec.name) {
        return Err(RemoteError::Invalid {
            name: spec.name.clone(),
            why: format!("already configured in {}", path.display()),
        });
    }
    let mut t = Table::new();
    t.insert("url", value(&spec.url));
    if let Some(ep) = &spec.endpoint {
        t.insert("endpoint", value(ep));
    }
    if spec.encrypted {
        t.insert("encrypted", value(true));
    }
    if let Some(id) = &spec.key_id {
        t.insert("key_id", value(id));
    }
    if let Some(identity) = &spec.identity {
        t.insert("identity", value(identity));
    }
    remotes.insert(&spec.name, Item::Table(t));
    write_doc(store_root, &path, &doc)
}

/// Removes the remote `name` from the store's remotes file (written to a temporary file and
/// renamed into place). The remote's data is never touched. Works on the file as it is, so
/// an entry that no longer validates can still be removed.
pub fn remove_remote(store_root: &Path, name: &str) -> Result<RemoteSpec, RemoteError> {
    let path = file_of(store_root);
    let mut doc = read_doc(&path)?;
    let removed = doc
        .get_mut("remote")
        .and_then(Item::as_table_mut)
        .and_then(|t| t.remove(name));
    let Some(item) = removed else {
        let known = doc
            .get("remote")
            .and_then(Item::as_table)
            .map(|t| t.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>())
            .unwrap_or_default();
        return Err(RemoteError::Unknown {
            name: name.to_string(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        });
    };
    let text = |key: &str| item.get(key).and_then(Item::as_str).map(String::from);
    let spec = RemoteSpec {
        name: name.to_string(),
        url: text("url").unwrap_or_default(),
        endpoint: text("endpoint"),
        encrypted: item.get("encrypted").and_then(Item::as_bool) == Some(true),
        key_id: text("key_id"),
        identity: text("identity"),
    };
    write_doc(store_root, &path, &doc)?;
    Ok(spec)
}

fn write_doc(store_root: &Path, path: &Path, doc: &DocumentMut) -> Result<(), RemoteError> {
    let tmp = store_root.join(format!(
        ".remotes.toml.{}",
        zeroclaw_bundle_store::random_token()
    ));
    let io = |op, p: &Path, e| RemoteError::Io {
        op,
        path: p.to_path_buf(),
        source: e,
    };
    fs::write(&tmp, doc.to_string()).map_err(|e| io("write", &tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io("rename into place", path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, url: &str, endpoint: Option<&str>) -> RemoteSpec {
        RemoteSpec {
            name: name.into(),
            url: url.into(),
            endpoint: endpoint.map(String::from),
            encrypted: false,
            key_id: None,
            identity: None,
        }
    }

    #[test]
    fn names_and_urls() {
        assert!(validate(&spec("origin", "s3://b/p", None)).is_ok());
        assert!(validate(&spec("o.2_x-", "file:///srv/r", None)).is_ok());
        assert!(validate(&spec("s", "s3://b", Some("http://127.0.0.1:9000"))).is_ok());
        for bad in ["", "-x", ".x", "a/b", "a b", "agent"] {
            assert!(validate(&spec(bad, "s3://b", None)).is_err(), "{bad:?}");
        }
        for bad in ["s3://", "s3:///p", "http://x", "file://rel", "b/p"] {
            assert!(validate(&spec("o", bad, None)).is_err(), "{bad}");
        }
        assert!(validate(&spec("o", "s3://k:s@b/p", None)).is_err());
        assert!(validate(&spec("o", "s3://b", Some("http://k:s@h:1"))).is_err());
        assert!(validate(&spec("o", "s3://b", Some("ftp://h"))).is_err());
        assert!(validate(&spec("o", "file:///x", Some("http://h"))).is_err());
        for bad in [
            "s3://b/p?x-amz-security-token=SECRET",
            "s3://b/p#SECRET",
            "file:///x?t=1",
            "s3://b/p\x1b[2J",
            "s3://b/p\n",
        ] {
            assert!(validate(&spec("o", bad, None)).is_err(), "{bad:?}");
        }
        for bad in ["http://h/?token=SECRET", "http://h:1#x", "http://h\t"] {
            assert!(
                validate(&spec("o", "s3://b", Some(bad))).is_err(),
                "{bad:?}"
            );
        }
        let err = validate(&spec("o", "s3://b/p?token=hunter2", None)).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(err.to_string().contains("environment"), "{err}");
    }

    #[test]
    fn remove_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        add_remote(dir.path(), &spec("a", "file:///srv/a", None)).unwrap();
        add_remote(dir.path(), &spec("b", "s3://bk/pre", Some("http://h:1"))).unwrap();
        let gone = remove_remote(dir.path(), "a").unwrap();
        assert_eq!(gone, spec("a", "file:///srv/a", None));
        assert_eq!(
            load_remotes(dir.path()).unwrap(),
            vec![spec("b", "s3://bk/pre", Some("http://h:1"))]
        );
        assert!(matches!(
            remove_remote(dir.path(), "a"),
            Err(RemoteError::Unknown { .. })
        ));
        // An entry that no longer validates can still be removed.
        fs::write(
            dir.path().join("remotes.toml"),
            "[remote.x]\nurl = \"s3://b/p?token=SECRET\"\n",
        )
        .unwrap();
        assert!(load_remotes(dir.path()).is_err());
        remove_remote(dir.path(), "x").unwrap();
        assert!(load_remotes(dir.path()).unwrap().is_empty());
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
    }

    #[test]
    fn add_then_load() {
        let dir = tempfile::tempdir().unwrap();
        add_remote(dir.path(), &spec("a", "file:///srv/a", None)).unwrap();
        add_remote(dir.path(), &spec("b", "s3://bk/pre", Some("http://h:1"))).unwrap();
        assert!(add_remote(dir.path(), &spec("a", "file:///x", None)).is_err());
        let all = load_remotes(dir.path()).unwrap();
        assert_eq!(
            all,
            vec![
                spec("a", "file:///srv/a", None),
                spec("b", "s3://bk/pre", Some("http://h:1"))
            ]
        );
        assert!(matches!(
            find_remote(dir.path(), "c"),
            Err(RemoteError::Unknown { .. })
        ));
    }
}
