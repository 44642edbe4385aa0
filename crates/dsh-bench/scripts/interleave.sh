#!/usr/bin/env bash
# Compares two builds of dsh-bench in one session: runs them alternately
# (before, after, before, after, …) so both see the same machine load, then
# prints, per figure, the median over the runs of each build's figure, floor
# and ratio. Each build runs the `dsh` beside its `dsh-bench` (the `dsh acp`,
# `dsh tree` and `dsh run` rows), so copy both of each build together.
#
# usage: interleave.sh <before/dsh-bench> <after/dsh-bench> [runs per build, default 3] [bench args, e.g. --quick]
#
# Build the two binaries from two checkouts, e.g.
#   git worktree add /tmp/before <commit>
#   (cd /tmp/before && CARGO_TARGET_DIR=/tmp/before-target cargo build --release -p dsh-bench -p dsh)
#   cargo build --release -p dsh-bench -p dsh
set -euo pipefail

before=${1:?usage: interleave.sh <before-bin> <after-bin> [runs] [bench args]}
after=${2:?usage: interleave.sh <before-bin> <after-bin> [runs] [bench args]}
runs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
out=$(mktemp -d)
unset DSH_BENCH_DSH_BIN

echo "load before: $(cat /proc/loadavg)"
for ((i = 1; i <= runs; i++)); do
  for build in before after; do
    bin=$before
    [[ $build == after ]] && bin=$after
    "$bin" "$@" > "$out/$build.$i.md"
    echo "run $i: $build done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  done
done
echo "load after:  $(cat /proc/loadavg)"
echo "raw tables: $out"
echo
echo "| figure | flavor | before | before floor | before ratio | after | after floor | after ratio | after / before | pairs' median |"
echo "|---|---|---|---|---|---|---|---|---|---|"
# Rows: | figure | flavor | ours | floor | ratio | target |; numbers are the
# first number in a cell. Median over the runs of each build; the last
# column is the median over the runs of after / before within one run's
# pair, which the load both builds saw cancels out of.
awk -F' \\| ' '
  function num(cell) { if (match(cell, /[0-9]+(\.[0-9]+)?/)) return substr(cell, RSTART, RLENGTH) + 0; return "" }
  function unit(cell) { sub(/^[^0-9]*[0-9]+(\.[0-9]+)?[ ]*/, "", cell); sub(/[ (].*/, "", cell); return cell }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  FNR == 1 { build = FILENAME; sub(/.*\//, "", build); run = build; sub(/\..*/, "", build); sub(/^[a-z]*\./, "", run); sub(/\..*/, "", run); runs[run] = 1 }
  /^\| / && $0 !~ /^\| figure/ && $0 !~ /^\|---/ {
    figure = substr($1, 3); gsub(/ \([0-9]+ B page\)/, "", figure); key = figure " | " $2
    if (!(key in seen)) { seen[key] = 1; order[++count] = key; units[key] = unit($3) }
    ours[build, key] = ours[build, key] " " num($3)
    one[build, run, key] = num($3)
    if (num($4) != "") floor[build, key] = floor[build, key] " " num($4)
  }
  END {
    for (k = 1; k <= count; k++) {
      key = order[k]; u = units[key]
      b = median(ours["before", key]); a = median(ours["after", key])
      bf = floor["before", key] == "" ? "-" : median(floor["before", key])
      af = floor["after", key] == "" ? "-" : median(floor["after", key])
      br = bf == "-" || bf == 0 ? "-" : sprintf("%.1f×", b / bf)
      ar = af == "-" || af == 0 ? "-" : sprintf("%.1f×", a / af)
      pairs = ""
      for (r in runs) if (one["before", r, key] > 0 && one["after", r, key] != "") pairs = pairs " " one["after", r, key] / one["before", r, key]
      pm = pairs == "" ? "-" : sprintf("%.2f", median(pairs))
      printf "| %s | %s %s | %s | %s | %s %s | %s | %s | %.2f | %s |\n", key, b, u, bf, br, a, u, af, ar, (b == 0 ? 0 : a / b), pm
    }
  }
' "$out"/before.*.md "$out"/after.*.md
