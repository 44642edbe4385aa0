# Sourced by the scripts that need Node.js tools from npm (pinned, into a
# scratch directory, never the system).
#
#   npm_tools <directory> <package>@<version>...
#
# Installs the packages into <directory>/node_modules unless each is already
# there at its version (a scoped name such as @scope/name@1.2.3 works).
npm_tools() {
  local work=$1 spec name version stale=
  shift
  mkdir -p "$work"
  for spec in "$@"; do
    name=${spec%@*}
    version=${spec##*@}
    grep -q "\"version\": \"$version\"" "$work/node_modules/$name/package.json" 2>/dev/null || stale=1
  done
  if [ -n "$stale" ]; then
    printf '\n==> npm install %s (into %s)\n' "$*" "$work"
    [ -f "$work/package.json" ] || printf '{ "private": true }\n' > "$work/package.json"
    npm install --prefix "$work" --no-audit --no-fund --loglevel=error "$@"
  fi
}
