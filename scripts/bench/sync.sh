#!/usr/bin/env bash
# Measures `sync` (issue 39): a no-op sync of 10 agents against a local S3 server (s3s-fs):
# requests made and wall time; and an update in place of one changed file in a 20,000-file
# workspace, against a fresh import of the same bundle. Run from the project root:
#   scripts/bench/sync.sh            (ZB=target/release/zeroclaw-bundle by default)
# Prints one line per figure. Needs s3s-fs (scripts/setup.sh) and ssh-keygen.
set -euo pipefail
ZB=${ZB:-$PWD/target/release/zeroclaw-bundle}
[[ -x $ZB ]] || cargo build --release -q
S3S=$(command -v s3s-fs || echo "${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs")
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$W"' EXIT
[[ -n ${KEEP:-} ]] && echo "work dir (kept): $W"
mkdir -p "$W/s3/bench"
RUST_LOG=info NO_COLOR=1 "$S3S" --host 127.0.0.1 --port 0 --access-key k --secret-key secret-key-1 \
	"$W/s3" >"$W/s3.log" 2>&1 &
for _ in $(seq 300); do
	EP=$(grep -o 'http://127.0.0.1:[0-9]*' "$W/s3.log" | head -n1 || true)
	[[ -n $EP ]] && break
	sleep 0.1
done
export AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=secret-key-1 AWS_REGION=us-east-1 NO_PROXY=127.0.0.1
A="$ZB --store $W/a" B="$ZB --store $W/b"
$A remote add origin s3://bench/fleet --endpoint "$EP" >/dev/null
$B remote add origin s3://bench/fleet --endpoint "$EP" >/dev/null
ssh-keygen -q -t ed25519 -C alice -N '' -f "$W/alice"
echo "alice@example.com $(cat "$W/alice.pub")" >"$W/allowed"
$B trust --allowed-signers "$W/allowed" >/dev/null

# Host A: ten agents; agent a1's workspace has 20,000 files.
I=$W/install-a
mkdir -p "$I"
{
	echo 'schema_version = 3'
	echo
	echo '[providers.models.anthropic.main]'
	echo 'model = "claude-opus-5"'
	echo
	echo '[risk_profiles.guarded]'
	echo 'level = "supervised"'
	for n in $(seq 10); do
		printf '\n[agents.a%s]\nmodel_provider = "anthropic.main"\nrisk_profile = "guarded"\n' "$n"
	done
} >"$I/config.toml"
for n in $(seq 10); do
	mkdir -p "$I/agents/a$n/workspace"
	echo "agent $n" >"$I/agents/a$n/workspace/IDENTITY.md"
done
python3 - "$I/agents/a1/workspace" <<'EOF'
import os, sys
root = sys.argv[1]
for d in range(100):
    os.makedirs(f"{root}/d{d:03}", exist_ok=True)
    for f in range(200):
        with open(f"{root}/d{d:03}/f{f:03}.md", "w") as out:
            out.write(f"file {d}/{f}\n" * 8)
EOF
publish() { # ALIAS
	local id
	id=$($A -q export "$1" --install "$I" --out "$W/out-$1" --replace-any)
	$A -q sign "$id" --key "$W/alice" >/dev/null
	$A -q push "$id" >/dev/null
}
for n in $(seq 10); do publish "a$n"; done

# Host B: imports all ten, then a no-op sync.
mkdir -p "$W/install-b"
echo 'schema_version = 3' >"$W/install-b/config.toml"
for n in $(seq 10); do $B import "origin/agent/a$n" --install "$W/install-b" --yes >/dev/null; done
t() { local a b; a=$(date +%s.%N); "$@" >"$W/t.out" 2>"$W/t.err"; b=$(date +%s.%N); awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", b-a}'; }
s=$(t $B --json sync --install "$W/install-b")
python3 - "$W/t.out" "$s" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
up = sum(a["outcome"] == "up-to-date" for a in v["agents"])
print(f"no-op sync of 10 agents: {up} up to date, {sys.argv[2]} s; remote origin: {v['listings'].get('origin')}")
EOF

# One changed file in a1's 20,000-file workspace: update in place vs a fresh import.
echo "changed" >>"$I/agents/a1/workspace/d050/f100.md"
publish a1
s=$(t $B sync --install "$W/install-b")
grep -q 'updated from' "$W/t.out" || { cat "$W/t.out" "$W/t.err"; exit 1; }
mkdir -p "$W/install-c"
echo 'schema_version = 3' >"$W/install-c/config.toml"
f=$(t $B import origin/agent/a1 --install "$W/install-c" --yes)
echo "update of 1 changed file in a 20,000-file workspace: sync $s s, fresh import of the same bundle $f s"
