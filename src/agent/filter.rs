//! Which bundle entries travel: the one owner of the "memory stays behind" rule at capture time
//! (layout's `workspace_entry_included`) and of the operator's `export --exclude GLOB` patterns.
//! The capture asks [`BundleFilter::keeps`] about every entry by its bundle path; the filter
//! remembers what each pattern left out, so the manifest can list it under `dropped` and a
//! pattern that matched nothing (a typo that would let a private file travel) fails the export.

use std::sync::Mutex;

use globset::{GlobSet, GlobSetBuilder};

use super::error::AgentError;
use super::layout::{workspace_entry_included, SKILLS_DIR, WORKSPACE_DIR};
use super::manifest::{DropReason, Dropped};

/// The keep rule of one agent capture.
#[derive(Debug)]
pub struct BundleFilter {
    patterns: Vec<String>,
    set: GlobSet,
    /// The pattern each glob of `set` comes from (`dir/**` adds a second glob for `dir`).
    pattern_of: Vec<usize>,
    /// (bundle path, indexes of every pattern that matched it), in capture order.
    excluded: Mutex<Vec<(String, Vec<usize>)>>,
}

impl BundleFilter {
    /// A filter with the memory rule and `patterns` (bundle-relative globs: `workspace/USER.md`,
    /// `workspace/**/*.log`, `skills/ops/deploy`; `*` stays within one path component, `**`
    /// crosses them). A pattern outside `workspace/` and `skills/`, absolute, or with `..` is
    /// refused, naming it.
    pub fn new(patterns: &[String]) -> Result<Self, AgentError> {
        let mut builder = GlobSetBuilder::new();
        let mut pattern_of = Vec::new();
        for (index, pattern) in patterns.iter().enumerate() {
            let bad = |problem: &str| AgentError::InvalidExclude {
                pattern: pattern.clone(),
                problem: problem.to_string(),
            };
            let first = pattern.split('/').next().unwrap_or("");
            if pattern.starts_with('/') {
                return Err(bad("is absolute; patterns are relative to the bundle root"));
            }
            if pattern.split('/').any(|c| c == "..") {
                return Err(bad("contains `..`"));
            }
            if first != WORKSPACE_DIR && first != SKILLS_DIR {
                return Err(bad(
                    "must start with workspace/ or skills/ (config.toml and the manifest always travel)",
                ));
            }
            let glob = |text: &str| {
                globset::GlobBuilder::new(text)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| bad(&format!("is not a valid glob: {}", e.kind())))
            };
            builder.add(glob(pattern)?);
            pattern_of.push(index);
            // `dir/**` leaves `dir` out too: everything in it goes, so an empty `dir` would
            // only say it was there.
            if let Some(dir) = pattern.strip_suffix("/**").filter(|d| d.contains('/')) {
                builder.add(glob(dir)?);
                pattern_of.push(index);
            }
        }
        let set = builder.build().map_err(|e| AgentError::InvalidExclude {
            pattern: patterns.join(" "),
            problem: e.to_string(),
        })?;
        Ok(BundleFilter {
            patterns: patterns.to_vec(),
            set,
            pattern_of,
            excluded: Mutex::new(Vec::new()),
        })
    }

    /// Whether the entry at `bundle_path` travels (a tree root such as `workspace` or
    /// `skills/<alias>` included); records it when a pattern left it out.
    pub fn keeps(&self, bundle_path: &str) -> bool {
        if let Some(rel) = bundle_path.strip_prefix("workspace/") {
            if !workspace_entry_included(rel) {
                return false;
            }
        }
        let mut matched: Vec<usize> = self
            .set
            .matches(bundle_path)
            .into_iter()
            .map(|glob| self.pattern_of[glob])
            .collect();
        if matched.is_empty() {
            return true;
        }
        matched.dedup();
        self.excluded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((bundle_path.to_string(), matched));
        false
    }

    /// What the patterns left out, as `dropped` entries (`private_data`: the operator chose to
    /// keep it on this host), in capture order.
    pub fn dropped(&self) -> Vec<Dropped> {
        self.excluded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .map(|(path, indexes)| {
                Dropped::new(
                    path.clone(),
                    DropReason::PrivateData,
                    format!(
                        "left out by the operator (export --exclude '{}')",
                        self.patterns[indexes[0]]
                    ),
                )
            })
            .collect()
    }

    /// Patterns that left nothing out (a typo, or a file that no longer exists). A pattern
    /// that overlaps another counts as matched: one that matched an entry another also
    /// matched, or one under a directory another left out (the capture never walked in).
    pub fn unmatched(&self) -> Vec<String> {
        let excluded = self
            .excluded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let under_excluded_dir = |pattern: &str| {
            let literal = pattern
                .split(['*', '?', '[', '{'])
                .next()
                .unwrap_or_default();
            excluded
                .iter()
                .any(|(path, _)| literal.starts_with(&format!("{path}/")))
        };
        self.patterns
            .iter()
            .enumerate()
            .filter(|(i, p)| !excluded.iter().any(|(_, m)| m.contains(i)) && !under_excluded_dir(p))
            .map(|(_, p)| p.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_patterns_are_not_typos() {
        let f = BundleFilter::new(&[
            "workspace/**/*.md".to_string(),
            "workspace/IDENTITY.md".to_string(),
            "workspace/notes".to_string(),
            "workspace/notes/plan.md".to_string(),
            "workspace/notes/*.txt".to_string(),
            "workspace/typo.md".to_string(),
        ])
        .expect("valid patterns");
        assert!(!f.keeps("workspace/IDENTITY.md"));
        assert!(!f.keeps("workspace/notes"));
        assert!(f.keeps("workspace/other.txt"));
        // Only the pattern that names nothing there is a typo: `IDENTITY.md` also matched
        // `**/*.md`, and the two under `notes` were never walked because `notes` was left out.
        assert_eq!(f.unmatched(), ["workspace/typo.md"]);
    }

    #[test]
    fn memory_rule_and_patterns() {
        let f = BundleFilter::new(&[
            "workspace/USER.md".to_string(),
            "workspace/**/*.log".to_string(),
            "skills/ops/*/secrets".to_string(),
            "workspace/nothing-here".to_string(),
        ])
        .expect("valid patterns");
        for kept in [
            "workspace/IDENTITY.md",
            "workspace/notes/USER.md",
            "workspace/notes/memory",
            "skills/ops/deploy/SKILL.md",
            "skills/ops/deploy/x/secrets",
        ] {
            assert!(f.keeps(kept), "{kept} must travel");
        }
        for left in [
            "workspace/memory",
            "workspace/MEMORY_SNAPSHOT.md",
            "workspace/USER.md",
            "workspace/a/b/run.log",
            "workspace/run.log",
            "skills/ops/deploy/secrets",
        ] {
            assert!(!f.keeps(left), "{left} must stay behind");
        }
        let dropped: Vec<String> = f.dropped().into_iter().map(|d| d.path).collect();
        assert_eq!(
            dropped,
            [
                "workspace/USER.md",
                "workspace/a/b/run.log",
                "workspace/run.log",
                "skills/ops/deploy/secrets"
            ]
        );
        assert_eq!(f.unmatched(), ["workspace/nothing-here"]);
    }

    #[test]
    fn a_directory_pattern_leaves_the_directory_out_too() {
        let f = BundleFilter::new(&["workspace/notes/**".to_string()]).unwrap();
        assert!(
            !f.keeps("workspace/notes"),
            "the emptied directory stays behind"
        );
        assert!(!f.keeps("workspace/notes/a.md"));
        assert!(f.keeps("workspace/notes.md"));
        assert!(f.keeps("workspace/other/notes"));
        let dropped = f.dropped();
        assert_eq!(dropped.len(), 2);
        assert!(dropped[0].detail.contains("workspace/notes/**"));
        assert!(f.unmatched().is_empty());
    }

    #[test]
    fn bad_patterns_are_refused_by_name() {
        for (pattern, needle) in [
            ("/etc/passwd", "absolute"),
            ("workspace/../x", ".."),
            ("config.toml", "workspace/ or skills/"),
            ("*.md", "workspace/ or skills/"),
            ("workspace/[x", "not a valid glob"),
        ] {
            let err = BundleFilter::new(&[pattern.to_string()]).expect_err(pattern);
            let text = err.to_string();
            assert!(text.contains(pattern) && text.contains(needle), "{text}");
        }
    }
}
