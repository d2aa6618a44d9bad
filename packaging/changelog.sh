#!/usr/bin/env bash
# Writes the Debian changelog of a kjoin .deb: an entry for the version being built, then
# one per release tag (v0.x.y), newest first. Usage: changelog.sh DEB_VERSION
set -euo pipefail
ver=$1
entry() { # version date(RFC 2822) text (wrapped at 80 columns, as Debian's changelog wants)
  printf 'kjoin (%s) unstable; urgency=medium\n\n' "$1"
  printf '%s\n' "$3" | fold -s -w 74 | sed 's/ *$//; 1s/^/  * /; 2,$s/^/    /'
  printf '\n -- kjoin maintainers <kjoin@kjoin.dev>  %s\n\n' "$2"
}
date=$(git log -1 --format=%aD 2>/dev/null || date -R)
latest=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || true)
if [ "v$ver" != "$latest" ]; then
  entry "$ver" "$date" "Build of $(git rev-parse --short HEAD 2>/dev/null || echo an unknown commit) (after ${latest:-no release})."
fi
for t in $(git tag --list 'v[0-9]*' --sort=-v:refname 2>/dev/null); do
  entry "${t#v}" "$(git log -1 --format=%aD "$t")" "$(git tag -l --format='%(contents:subject)' "$t" | sed 's/^$/Release '"${t#v}"'./')"
done
