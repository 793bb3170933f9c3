#!/usr/bin/env bash
# Builds a small sample ZeroClaw install at $1 (the README's built-in example): one agent
# `researcher` with a workspace (including memory that must never travel), two skill bundles
# (one with an excluded skill), model providers with keys and a fallback chain, a TTS
# provider, a risk profile, an MCP bundle granting a stdio server with a secret env, and the
# Telegram channel the agent is bound to (bindings stay home). It passes ZeroClaw's own
# `Config::validate()`, so it can also receive an import (tests/cli/first_run.rs checks both).
set -euo pipefail
root=${1:?usage: sample-install.sh DIR}
mkdir -p "$root"
cat > "$root/config.toml" <<'EOF'
schema_version = 3

[providers.models.anthropic.main]
api_key = "sk-ant-SAMPLE-SECRET-0001"
model = "claude-opus-5"
fallback = ["openai.backup"]

[providers.models.openai.backup]
api_key = "sk-SAMPLE-SECRET-0002"
model = "gpt-backup"

[providers.models.anthropic.summarizer]
model = "claude-haiku"

[providers.tts.openai.voice]
api_key = "tts-SAMPLE-SECRET-0003"
voice = "alloy"

[risk_profiles.guarded]
level = "supervised"
workspace_only = true
shell_env_passthrough = ["LANG"]

[runtime_profiles.standard]
agentic = true

[runtime_profiles.standard.context_compression]
summary_provider = "anthropic.summarizer"

[skill_bundles.research_tools]
exclude = ["internal-only"]

[skill_bundles.writing]

[mcp_bundles.research]
servers = ["github"]

[[mcp.servers]]
name = "github"
transport = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[mcp.servers.env]
GITHUB_TOKEN = "ghp_SAMPLE-SECRET-0004"

[channels.telegram.work]
enabled = true
bot_token = "123456:SAMPLE-SECRET-0005"

[agents.researcher]
enabled = true
model_provider = "anthropic.main"
tts_provider = "openai.voice"
risk_profile = "guarded"
runtime_profile = "standard"
skill_bundles = ["research_tools", "writing"]
mcp_bundles = ["research"]
channels = ["telegram.work"]

[agents.researcher.identity]
format = "aieos"
aieos_path = "identity/aieos.json"
EOF
ws="$root/agents/researcher/workspace"
mkdir -p "$ws/notes/memory" "$ws/identity" "$ws/memory" "$ws/tools"
printf '# Researcher\n\nReads papers, writes summaries.\n' > "$ws/IDENTITY.md"
printf '{"name": "researcher", "version": 1}\n' > "$ws/identity/aieos.json"
printf '# 2026-11-28\n\n- read three papers on retrieval\n' > "$ws/notes/2026-11-28.md"
printf 'scratch notes travel: only the top-level memory stays home\n' > "$ws/notes/memory/scratch.md"
printf 'PRIVATE MEMORY: never exported\n' > "$ws/memory/brain.db"
printf 'PRIVATE SNAPSHOT: never exported\n' > "$ws/MEMORY_SNAPSHOT.md"
printf '#!/bin/sh\necho "fetching $1"\n' > "$ws/tools/fetch.sh"
chmod +x "$ws/tools/fetch.sh"
ln -sf /etc/hostname "$ws/host-link"
sk="$root/shared/skills"
mkdir -p "$sk/research_tools/web-search" "$sk/research_tools/summarize" \
  "$sk/research_tools/internal-only" "$sk/writing/drafts"
# Each SKILL.md opens with the name and description agents read first (agentskills.io), so the
# bundle also exports as an Agent Plugin (`export-plugin research_tools`).
skill() { printf -- '---\nname: %s\ndescription: %s\n---\n# %s\n%s\n' "$2" "$3" "$2" "$3" > "$1/$2/SKILL.md"; }
skill "$sk/research_tools" web-search 'Search the web and cite sources.'
skill "$sk/research_tools" summarize 'Summarize a document in five bullets.'
skill "$sk/research_tools" internal-only 'Excluded by config: must not travel.'
printf 'loose file at the bundle root: ignored\n' > "$sk/research_tools/.sync-marker"
skill "$sk/writing" drafts 'Keep drafts short.'
echo "$root"
