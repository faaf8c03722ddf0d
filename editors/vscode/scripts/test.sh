#!/usr/bin/env bash
# Tests of the VS Code extension in editors/vscode:
#   - test/check-scopes.js: the TextMate grammar against a parser of
#     lang/RLHF.g4 on every stdlib/ and examples/ program, and against the
#     compiler's keywords, built-ins and units;
#   - test/extension.test.js: package.json and the language client, with a
#     fake VS Code;
#   - vscode-tmgrammar-test on test/*.test.rlhf (scope assertions);
#   - packaging with @vscode/vsce and a look inside the .vsix.
#
# Usage: editors/vscode/scripts/test.sh [WORKDIR]
#   Without WORKDIR it works in editors/vscode. With one (ctest passes
#   build/test/editors-vscode) it copies the extension there first and leaves
#   the source tree alone.
#
# node_modules is installed with `npm ci` from package-lock.json when it is
# missing or stale; that needs node, npm and the npm registry. Without them the
# script prints a SKIP line and exits 77, which ctest reports as skipped.
# Exit status: 0 passed, 77 skipped, 1 failed.
set -euo pipefail

SKIP_CODE=77
src=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$src/../.." && pwd)
skip() {
  echo "SKIP: editors/vscode tests: $*"
  exit $SKIP_CODE
}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  skip "node and npm are not installed"
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 18 ]; then
  skip "node $(node --version) is too old (18 or newer needed)"
fi

work=${1:-$src}
if [ "$work" != "$src" ]; then
  mkdir -p "$work"
  find "$work" -mindepth 1 -maxdepth 1 ! -name node_modules -exec rm -rf {} +
  (cd "$src" && tar --exclude=./node_modules --exclude='*.vsix' -cf - .) | (cd "$work" && tar -xf -)
fi
cd "$work"

# `npm ci` only when package-lock.json changed since the last install.
stamp=node_modules/.rlhf-installed-lock
lock_sum=$(cksum < package-lock.json)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
  if ! timeout 20 npm ping --fetch-retries=0 --loglevel=error >/dev/null 2>&1; then
    skip "npm registry not reachable"
  fi
  echo "editors/vscode: npm ci"
  if ! timeout 240 npm ci --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error; then
    echo "FAIL: editors/vscode: npm ci"
    exit 1
  fi
  echo "$lock_sum" > "$stamp"
fi

failed=()
run() {
  local name=$1
  shift
  echo "== $name"
  if ! "$@"; then failed+=("$name"); fi
}

run "grammar vs. RLHF.g4 parser" node test/check-scopes.js --repo "$repo"
run "extension unit tests" node test/extension.test.js
run "grammar scope assertions" node_modules/.bin/vscode-tmgrammar-test \
  -g syntaxes/rlhf.tmLanguage.json 'test/*.test.rlhf'

# Packaging: the .vsix holds the manifest, the client, the grammar and the
# runtime dependency, and none of the tests or dev dependencies.
zip_names() { # ZIP: one member name a line
  if command -v unzip >/dev/null 2>&1; then
    unzip -Z1 "$1"
  else
    python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$1"
  fi
}
zip_member() { # ZIP NAME: the member's bytes on stdout
  if command -v unzip >/dev/null 2>&1; then
    unzip -p "$1" "$2"
  else
    python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' "$1" "$2"
  fi
}
check_vsix() {
  local vsix=$work/rlhf-test.vsix names entry
  rm -f "$vsix"
  if ! node_modules/.bin/vsce package --skip-license --allow-missing-repository \
      -o "$vsix" </dev/null >node_modules/.vsce.log 2>&1; then
    cat node_modules/.vsce.log
    return 1
  fi
  [ -f "$vsix" ] || { echo "vsce did not write $vsix"; return 1; }
  names=$(zip_names "$vsix")
  for entry in extension/package.json extension/extension.js extension/README.md \
      extension/syntaxes/rlhf.tmLanguage.json extension/language-configuration.json \
      extension/node_modules/vscode-languageclient/node.js \
      extension/node_modules/vscode-languageclient/package.json; do
    if ! grep -qxF "$entry" <<<"$names"; then
      echo "missing from the .vsix: $entry"
      return 1
    fi
  done
  for entry in extension/test/ extension/scripts/ extension/node_modules/@vscode/vsce/ \
      extension/node_modules/vscode-tmgrammar-test/ extension/package-lock.json; do
    if grep -qF "$entry" <<<"$names"; then
      echo "should not be in the .vsix: $entry"
      return 1
    fi
  done
  if ! zip_member "$vsix" extension/syntaxes/rlhf.tmLanguage.json | cmp -s - syntaxes/rlhf.tmLanguage.json; then
    echo "the grammar in the .vsix differs from syntaxes/rlhf.tmLanguage.json"
    return 1
  fi
  echo "packaged $(basename "$vsix"): $(grep -c '^extension/' <<<"$names") files; manifest, client and grammar present"
}
run "vsix packaging" check_vsix

if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAIL: editors/vscode: %s\n' "${failed[@]}"
  exit 1
fi
echo "editors/vscode: all tests passed"
