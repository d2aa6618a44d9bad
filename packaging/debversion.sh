#!/usr/bin/env bash
# Maps a git describe of the v0.x.y tag scheme to a Debian version: v0.4.0 → 0.4.0,
# v0.4.0-3-gabc123 → 0.4.0+git3.gabc123, a dirty tree adds +dirty, no tag → 0.0.0~gitHASH.
set -euo pipefail
v=$1
dirty=""
case $v in *-dirty) dirty="+dirty"; v=${v%-dirty} ;; esac
if [[ $v =~ ^v([0-9]+\.[0-9]+\.[0-9]+)$ ]]; then
  echo "${BASH_REMATCH[1]}${dirty}"
elif [[ $v =~ ^v([0-9]+\.[0-9]+\.[0-9]+)-([0-9]+)-(g[0-9a-f]+)$ ]]; then
  echo "${BASH_REMATCH[1]}+git${BASH_REMATCH[2]}.${BASH_REMATCH[3]}${dirty}"
else
  echo "0.0.0~git${v}${dirty}" | tr -c 'a-zA-Z0-9.+~\n' '.'
fi
