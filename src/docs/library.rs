//! # Linking the library
//!
//! The crate's public API is one store handle, [`Bundles`](crate::Bundles), with one method per
//! verb (`snapshot_agent`, `snapshot_dir`, `export`, `checkout`, `list`, `show`, `ls`, `cat`,
//! `diff`, `diff_paths`, `mount`, `pack`, `unpack`, `push`, `pull`, `verify`, `gc`, `review`,
//! `import_plan` and `import`, `sign`, `require_signed`); one error type
//! ([`Error`](crate::Error): the verb, its target, an [`ErrorKind`](crate::ErrorKind) to match
//! on, and the cause chain, each cause naming its path or field); the
//! [`Progress`](crate::Progress) trait the long verbs report to; and a
//! [`Cancel`](crate::Cancel) token that reaches the work through `Progress::cancel`
//! ([`Cancellable`](crate::Cancellable) adds one to any receiver). The library installs no
//! signal handlers: the program that links it decides what stops the work. Every item has an
//! example that runs as a doc test.
//!
//! The trust policy is the library's, not the CLI's: a handle applies the store's
//! `trust.toml` by default ([`TrustPolicy`](crate::TrustPolicy), [`super::signatures`]); a
//! client with `--allowed-signers`/`--require-signed` flags makes its policy with
//! [`SignerTrust`](crate::SignerTrust).
//!
//! A command line runs the agent verbs in two steps, so that a typo creates nothing:
//! [`Bundles::prepare_export`](crate::Bundles::prepare_export),
//! [`prepare_snapshot_agent`](crate::Bundles::prepare_snapshot_agent) and
//! [`prepare_snapshot_dir`](crate::Bundles::prepare_snapshot_dir) check the install, the agent
//! and the destination before a store exists, then `run` opens or creates it (and
//! [`SigningKey`](crate::SigningKey) is opened in between, for `--sign`).
//! [`Bundles::diff_stream`](crate::Bundles::diff_stream) (and
//! [`diff_in`](crate::Bundles::diff_in), which never creates a store) hands a
//! [`DiffSink`](crate::DiffSink) each change as the walk finds it. Every report is `Serialize`
//! (its serialization is the `--json` document), and the agent reports `render` the text the
//! CLI prints.
//!
//! Review a received bundle, then import exactly what was reviewed:
//!
//! ```
//! use zeroclaw_bundle::{render_review, Bundles, ImportRequest, Silent};
//! # let dir = tempfile::tempdir()?;
//! # let from = dir.path().join("from");
//! # std::fs::create_dir_all(from.join("agents/coder/workspace"))?;
//! # std::fs::write(from.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
//! # std::fs::write(from.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
//! # let store = dir.path().join("store");
//! # let bundle = dir.path().join("bundle");
//! # Bundles::create(&store)?.export(&from, "coder", &bundle, zeroclaw_bundle::Replace::Nothing, &Default::default(), &Silent)?;
//! # let install = dir.path().join("install");
//! # std::fs::create_dir(&install)?;
//! # std::fs::write(install.join("config.toml"), "schema_version = 3\n")?;
//! // The store's trust.toml applies to every verb (TrustPolicy::Store, the default).
//! let bundles = Bundles::open(&store)?;
//! let review = bundles.review(bundle.as_os_str(), &Default::default(), &Silent)?;
//! render_review(&review, &mut std::io::stdout())?;
//!
//! // Import what was reviewed, pinned to its content id.
//! let expect = review.root.to_hex();
//! let request = ImportRequest {
//!     source: bundle.as_os_str(),
//!     install: &install,
//!     agent_as: None,
//!     maps: &[],
//!     expect: Some(&expect),
//!     force: false,
//!     replace: &[],
//!     require: None,
//!     ..Default::default()
//! };
//! let plan = bundles.import_plan(&request, &Silent)?;
//! let imported = bundles.import(&plan, &[], &Silent)?;
//! assert_eq!(imported.alias, "coder");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## `zeroclaw bundle`
//!
//! `zeroclaw bundle ...` is the intended integration: ZeroClaw adds one variant to its clap
//! `Commands` enum and one match arm, each subcommand one call into this API. ZeroClaw 0.8.7
//! has no such subcommand (nor a mechanism for external subcommands), so today an operator runs
//! the `zeroclaw-bundle` binary beside it. `tests/zeroclaw-link/` is that integration written
//! out: a stand-in for ZeroClaw's binary with its `Commands` tree, reading the install with
//! `zeroclaw-config` and running each verb through the public API only. `scripts/test.sh`
//! builds it and checks it against the standalone binary (snapshot, export, diff and mount give
//! the same trees and bytes), and that it enforces the store's trust policy.
//!
//! ```text
//! #[derive(Subcommand)]
//! enum Commands {
//!     // ... ZeroClaw's own commands ...
//!     /// Snapshot, export, diff, mount and move agent bundles.
//!     Bundle { #[command(subcommand)] bundle_command: BundleCommands },
//! }
//!
//! Commands::Bundle { bundle_command } => {
//!     let bundles = zeroclaw_bundle::Bundles::create(config_dir.join("bundles"))?;
//!     let progress = zeroclaw_bundle::Cancellable::new(&zeroclaw_bundle::Silent, cancel.clone());
//!     match bundle_command {
//!         BundleCommands::Snapshot { alias } => {
//!             let snap = bundles.snapshot_agent(&config_dir, &alias, &Default::default(), &progress)?;
//!             println!("{}", snap.id);
//!         }
//!         // Export, Diff, Mount, Pack, Push, Pull: one call each.
//!     }
//! }
//! ```
