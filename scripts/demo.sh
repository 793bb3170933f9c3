#!/usr/bin/env bash
# The main job on a built-in example: build zeroclaw-bundle, create a sample ZeroClaw install,
# export its agent, list and show the snapshot, change the workspace and export again (--force),
# diff the exports (files, and what the agent may do), carry one as a pack to a second store,
# then mount both snapshots read-only and diff them the way a reviewer would.
set -euo pipefail
cd "$(dirname "$0")/.."
# One stream, in order: each command's notes (its stderr: "packed ...", "unpacked ...") stay
# under the step that printed them, on a terminal and in a pipe or a log file alike.
exec 2>&1
# Only what the demo uses (FUSE, getfattr): not the S3 server of the remote tests.
echo "demo: checking for the tools it uses (fuse3, attr)"
scripts/setup.sh --demo
echo "demo: building zeroclaw-bundle (cargo build --release: the first build compiles every"
echo "      dependency and can take several minutes; later runs take seconds)"
# The binary's path comes from cargo itself, so CARGO_TARGET_DIR or a `build.target-dir` in a
# cargo config is followed: never assume ./target.
zb=$(cargo build --release --bins --message-format=json-render-diagnostics \
  | sed -n 's/.*"executable":"\([^"]*zeroclaw-bundle\)".*/\1/p' | tail -n 1)
if [ -z "$zb" ] || [ ! -x "$zb" ]; then
  echo "demo: cargo built no zeroclaw-bundle executable (see the output above)" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/zeroclaw-bundle-demo.XXXXXX")
export ZEROCLAW_BUNDLE_STORE=$work/store
mounts=()
cleanup() {
  for m in "${mounts[@]}"; do "$zb" umount "$m" 2>/dev/null || true; done
}
trap cleanup EXIT
# Bold step lines on a terminal only: a pipe or a file gets plain text, no escape codes.
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; }

scripts/sample-install.sh "$work/install" >/dev/null
step zeroclaw-bundle export researcher --install "$work/install" --out "$work/bundle"
report=$("$zb" export researcher --install "$work/install" --out "$work/bundle")
printf '%s\n' "$report"
first=$(tail -n 1 <<<"$report")

step find "$work/bundle" -type f
(cd "$work/bundle" && find . -type f | sort)

printf '\n- read one more paper\n' >> "$work/install/agents/researcher/workspace/notes/2026-11-28.md"
printf '# new skill\n' > "$work/install/shared/skills/writing/drafts/STYLE.md"
step zeroclaw-bundle export researcher --out "$work/bundle" --force '# after editing the workspace'
second=$("$zb" -q export researcher --install "$work/install" --out "$work/bundle" --force | tail -n 1)

step zeroclaw-bundle list
"$zb" list
step zeroclaw-bundle show "${second:0:12}"
"$zb" show "$second"
step zeroclaw-bundle ls -r agent/researcher
"$zb" ls -r agent/researcher

step zeroclaw-bundle diff "${first:0:12}" "${second:0:12}" '# what changed between the two exports'
"$zb" diff "$first" "$second" || true
step zeroclaw-bundle diff "${second:0:12}" bundle '# the published bundle against its snapshot'
"$zb" diff "$second" "$work/bundle" && echo "(equal)"

# The same agent granted a stdio MCP server: the diff marks the new grant.
cp -r "$work/install" "$work/install2"
printf '\n[[mcp.servers]]\nname = "shell"\ncommand = "bash"\nargs = ["-c", "serve"]\n' >> "$work/install2/config.toml"
sed -i 's/^servers = \["github"\]/servers = ["github", "shell"]/' "$work/install2/config.toml"
third=$("$zb" -q export researcher --install "$work/install2" --out "$work/bundle2" | tail -n 1)
step zeroclaw-bundle diff "${second:0:12}" "${third:0:12}" --exit-on-new-grants '# new grants are marked !, exit 3'
"$zb" diff "$second" "$third" --exit-on-new-grants || echo "(exit $?)"

step zeroclaw-bundle pack "${second:0:12}" --out researcher.zcpack '# one self-verifying file'
"$zb" pack "$second" --out "$work/researcher.zcpack"
step zeroclaw-bundle --store other-host unpack researcher.zcpack '# on the other host'
"$zb" --store "$work/other-host" unpack "$work/researcher.zcpack"
"$zb" --store "$work/other-host" verify

mkdir -p "$work/mnt/first" "$work/mnt/second"
step zeroclaw-bundle mount "${first:0:12}" "$work/mnt/first" --daemon
"$zb" mount "$first" "$work/mnt/first" --daemon && mounts+=("$work/mnt/first")
"$zb" mount "$second" "$work/mnt/second" --daemon && mounts+=("$work/mnt/second")
step diff -ru mnt/first mnt/second '# review what changed, with your own tools'
(cd "$work/mnt" && diff -ru first second) || true
step getfattr -n user.zeroclaw.blake3 mnt/second/config.toml
getfattr -n user.zeroclaw.blake3 "$work/mnt/second/config.toml" || true
step touch mnt/second/workspace/new-file '# read-only: EROFS'
touch "$work/mnt/second/workspace/new-file" || true
for m in "${mounts[@]}"; do "$zb" umount "$m"; done
mounts=()

step zeroclaw-bundle verify
"$zb" verify
echo
echo "demo files are in $work"
