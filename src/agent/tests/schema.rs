//! The secret scrub (`schema`): schema-marked secret fields and credential-named keys are blanked and listed; ciphertext outside a secret field aborts.

use super::*;

#[test]
fn case05_no_secret_text_in_the_rendered_config() {
    for fx in [Fx::base(), Fx::loaded()] {
        let bundle = render(&fx.plan());
        for secret in ["ghp_realsecretvalue", "sk-ant-realkey", "***MASKED***"] {
            assert!(!bundle.config_toml.contains(secret));
        }
    }
}

#[test]
fn case06_required_secrets_lists_scrubbed_paths() {
    let plan = Fx::loaded().plan();
    assert_eq!(
        plan.required_secrets(),
        [
            "mcp.servers.github.env.GITHUB_TOKEN",
            "providers.models.anthropic.classifier.api_key",
            "providers.models.anthropic.main.api_key",
            "providers.tts.openai.voice.api_key",
        ]
    );
}

#[test]
fn case07_provider_key_is_blank() {
    let plan = Fx::base().plan();
    assert_eq!(
        get(
            plan.closure(),
            &["providers", "models", "anthropic", "main", "api_key"]
        ),
        Some(&s(""))
    );
}

#[test]
fn encrypted_and_referenced_secrets_are_blanked() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "api_key"],
        r#""enc2:cafebabe0123""#,
    );
    fx.set(
        &["providers", "models", "anthropic", "main", "extra_headers"],
        r#"{ X-Token = "op://vault/item/token" }"#,
    );
    let plan = fx.plan();
    assert_eq!(
        plan.required_secrets(),
        [
            "mcp.servers.github.env.GITHUB_TOKEN",
            "providers.models.anthropic.main.api_key",
            "providers.models.anthropic.main.extra_headers.X-Token",
        ]
    );
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("cafebabe"));
    assert!(!bundle.config_toml.contains("op://"));
    assert!(bundle.config_toml.contains("X-Token = \"\""));
}

#[test]
fn ciphertext_outside_a_secret_field_aborts() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "model"],
        r#""enc:0123abcd""#,
    );
    let err = plan_export(&fx.install(), "researcher").expect_err("ciphertext survives");
    match &err {
        AgentError::CiphertextSurvived { path } => {
            assert_eq!(path, "providers.models.anthropic.main.model")
        }
        other => panic!("unexpected {other:?}"),
    }
    // in an mcp server argument too
    let mut fx = Fx::base();
    let servers = fx.doc["mcp"]["servers"]
        .as_array_of_tables_mut()
        .expect("servers");
    servers.iter_mut().next().expect("github")["args"] =
        toml_edit::value(toml_edit::Array::from_iter(["--token", "enc2:ffff"]));
    let err = plan_export(&fx.install(), "researcher").expect_err("ciphertext survives");
    assert!(
        err.to_string().contains("mcp.servers.github.args.1"),
        "{err}"
    );
}

#[test]
fn empty_secrets_are_not_required() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "api_key"],
        r#""""#,
    );
    let plan = fx.plan();
    assert_eq!(
        plan.required_secrets(),
        ["mcp.servers.github.env.GITHUB_TOKEN"]
    );
}

#[test]
fn transcription_and_http_server_secrets_are_scrubbed() {
    let mut fx = Fx::base();
    fx.append(
        "[providers.transcription.local_whisper.local]\nbearer_token = \"whisper-bearer-secret\"\nuri = \"http://localhost:9000\"\n[mcp_bundles.web]\nservers = [\"search\"]\n",
    );
    fx.set(
        &["agents", "researcher", "transcription_provider"],
        r#""local_whisper.local""#,
    )
    .set(
        &["agents", "researcher", "mcp_bundles"],
        r#"["research", "web"]"#,
    )
    .set(&["mcp_bundles", "research", "exclude"], "[]");
    let plan = fx.plan();
    assert_eq!(server_names(plan.closure()), ["github", "search"]);
    assert_eq!(
        plan.required_secrets(),
        [
            "mcp.servers.github.env.GITHUB_TOKEN",
            "mcp.servers.search.headers.Authorization",
            "providers.models.anthropic.main.api_key",
            "providers.transcription.local_whisper.local.bearer_token",
        ]
    );
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("whisper-bearer-secret"));
    // the http server's url is not a secret and travels, as the header warns
    assert!(bundle
        .config_toml
        .contains("url = \"https://search.example.com/mcp\""));
    assert!(bundle.config_toml.contains("transport = \"http\""));
    // only the stdio server spawns a process
    assert_eq!(
        flags(&bundle.manifest.risk_flags),
        [("process_spawn", "mcp.servers.github.command".to_string())]
    );
}
