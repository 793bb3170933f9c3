//! The config closure under seeded random mutation (issue 8's "fuzz ... the config closure"):
//! ZeroClaw's own example configs (tests/zeroclaw/) with a planted secret in every schema
//! secret field, mutated line by line (keys and values swapped, duplicated, dropped, typed
//! differently, secrets moved into other tables), then parsed, planned and rendered. Properties:
//! nothing panics; a closure that renders never carries a planted secret of a schema secret
//! field, and re-parses. Short by default (2,000 inputs); `ZCB_FUZZ_ITERS=N` and
//! `ZCB_FUZZ_SEED=S` change that (scripts/fuzz.sh sets them). A failure prints the seed and
//! the iteration, so it replays exactly.

use std::path::Path;

use super::*;

#[path = "../../tests/fuzz/rng.rs"]
mod rng;
use rng::Rng;

/// The secret value planted in every schema secret field; it must never be rendered.
const SECRET: &str = "FUZZ-PLANTED-SECRET";

/// A v3 base: a real config with an agent that reaches every family-specific secret field.
fn seeds() -> Vec<String> {
    let plant = format!(
        r#"
[providers.models.qwen.q]
model = "qwen"
api_key = "{SECRET}-1"
oauth_refresh_token = "{SECRET}-2"
fallback = ["minimax.m", "gemini.g"]
extra_headers = {{ X = "{SECRET}-3" }}
[providers.models.minimax.m]
model = "m"
oauth_refresh_token = "enc2:{SECRET}-4"
[providers.models.gemini.g]
model = "g"
oauth_client_id = "op://{SECRET}-5"
oauth_client_secret = "{SECRET}-6"
[providers.tts.edge.e]
api_key = "{SECRET}-7"
[providers.transcription.local_whisper.w]
uri = "http://127.0.0.1:9000/v1/audio"
bearer_token = "{SECRET}-8"
[[mcp.servers]]
name = "s"
command = "npx"
env = {{ T = "{SECRET}-9" }}
headers = {{ H = "{SECRET}-10" }}
[mcp_bundles.b]
servers = ["s"]
"#
    );
    let agent_keys = "summary_provider = \"qwen.q\"\ntts_provider = \"edge.e\"\ntranscription_provider = \"local_whisper.w\"\nmcp_bundles = [\"b\"]\n";
    [
        include_str!("../../tests/zeroclaw/dev-config.template.toml"),
        include_str!("../../tests/zeroclaw/dev-config.harness-test.toml"),
    ]
    .iter()
    .map(|base| {
        // The real agent table, plus the references that reach the planted providers.
        let base = base.replace(
            "[agents.default]\n",
            &format!("[agents.default]\n{agent_keys}"),
        );
        format!("{base}{plant}")
    })
    .collect()
}

/// One mutation of a config's lines.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let pick = |rng: &mut Rng, n: usize| rng.below(n);
    for _ in 0..1 + rng.below(4) {
        if lines.is_empty() {
            break;
        }
        let i = pick(rng, lines.len());
        match rng.below(9) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let j = pick(rng, lines.len());
                let l = lines[j].clone();
                lines.insert(i, l);
            }
            2 => {
                let j = pick(rng, lines.len());
                lines.swap(i, j);
            }
            3 => {
                // A value of another type.
                if let Some((k, _)) = lines[i].split_once('=') {
                    let v = ["true", "42", "[]", "{}", "\"\"", "[1, \"x\"]", "-1", "1e99"]
                        [rng.below(8)];
                    lines[i] = format!("{k}= {v}");
                }
            }
            4 => {
                // A secret moved under another, credential-named or ordinary key.
                let k = [
                    "api_key",
                    "token",
                    "model",
                    "uri",
                    "secret_sauce",
                    "max_tokens",
                ][rng.below(6)];
                lines.insert(i, format!("{k} = \"{SECRET}-moved\""));
            }
            5 => lines.insert(i, "[agents.default.workspace]".to_string()),
            6 => lines.insert(i, format!("schema_version = {}", rng.below(6))),
            7 => {
                // Truncate a line somewhere.
                let l = &lines[i];
                let mut cut = rng.below(l.len() + 1);
                while !l.is_char_boundary(cut) {
                    cut -= 1;
                }
                lines[i] = l[..cut].to_string();
            }
            _ => lines.insert(
                i,
                format!(
                    "[{}]",
                    ["risk_profiles.x", "mcp", "providers"][rng.below(3)]
                ),
            ),
        }
    }
    lines.join("\n")
}

fn check(text: &str) {
    let Ok(install) = Install::from_toml_str(Path::new("/zc"), text) else {
        return;
    };
    for alias in install.agent_aliases() {
        let Ok(plan) = plan_export(&install, &alias) else {
            continue;
        };
        let outcome = CaptureOutcome {
            carried_skill_bundles: plan.skills.iter().map(|s| s.alias.clone()).collect(),
            identity_document_carried: true,
            ..CaptureOutcome::default()
        };
        let provenance = Provenance::for_export(None, std::time::UNIX_EPOCH);
        let Ok(bundle) = plan.render(&outcome, &provenance) else {
            continue;
        };
        for n in 1..=10 {
            let planted = format!("{SECRET}-{n}");
            // `-1` is a prefix of `-10`: match the whole planted value.
            let found = bundle.config_toml.match_indices(&planted).any(|(at, _)| {
                !bundle.config_toml[at + planted.len()..].starts_with(|c: char| c.is_ascii_digit())
            });
            assert!(
                !found,
                "planted secret {planted} rendered:\n{}",
                bundle.config_toml
            );
        }
        let reparsed: Result<toml_edit::DocumentMut, _> = bundle.config_toml.parse();
        assert!(
            reparsed.is_ok(),
            "rendered closure does not parse:\n{}",
            bundle.config_toml
        );
    }
}

#[test]
fn the_closure_survives_mutated_real_configs() {
    let iters: u64 = std::env::var("ZCB_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let seed: u64 = std::env::var("ZCB_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_c105);
    let seeds = seeds();
    // The seeds themselves plan and render (the harness is not vacuous).
    for s in &seeds {
        let install = Install::from_toml_str(Path::new("/zc"), s).expect("seed parses");
        plan_export(&install, "default")
            .expect("seed plans")
            .render(
                &CaptureOutcome {
                    identity_document_carried: true,
                    ..CaptureOutcome::default()
                },
                &Provenance::for_export(None, std::time::UNIX_EPOCH),
            )
            .expect("seed renders");
    }
    let mut rng = Rng(seed | 1);
    for i in 0..iters {
        let base = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, base);
        let result = std::panic::catch_unwind(|| check(&input));
        assert!(
            result.is_ok(),
            "seed {seed} iteration {i} panicked on:\n{input}"
        );
    }
    eprintln!("config closure: {iters} mutated configs, seed {seed}");
}
