#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ for a fixed time on the nightly toolchain.
#
#   fuzz/run.sh [SECONDS] [TARGET...]     (default: 60 seconds, every target)
#
# - Installs cargo-fuzz with `cargo install` if it is missing, and checks that
#   a nightly toolchain is there (`rustup toolchain install nightly` if not).
# - Each target grows its corpus in fuzz/corpus/<target>/ (kept in the
#   repository; `cargo test` replays it on stable). The corpus is minimized
#   afterwards (`cargo fuzz cmin`) so that only inputs adding coverage stay.
# - Prints, per target, the executions reached and whether it crashed, and
#   appends the same table to fuzz/last-run.md. A crash stops the script with
#   a non-zero status; its input is in fuzz/artifacts/<target>/.
#
# Environment: FUZZ_TARGET_DIR (build directory, default fuzz/target),
# FUZZ_NO_CMIN=1 to keep the corpus as the run left it.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

SECONDS_PER_TARGET="${1:-60}"
shift || true
if ! [[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] || [ "$SECONDS_PER_TARGET" -eq 0 ]; then
    echo "fuzz/run.sh: SECONDS must be a whole number > 0, got '$SECONDS_PER_TARGET'" >&2
    exit 2
fi

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "== installing the nightly toolchain (cargo-fuzz needs it)"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

TARGET_DIR="${FUZZ_TARGET_DIR:-$ROOT/fuzz/target}"
if [ "$#" -gt 0 ]; then
    TARGETS=("$@")
else
    mapfile -t TARGETS < <(cargo +nightly fuzz list --fuzz-dir fuzz)
fi

LOG_DIR="$(mktemp -d)"
trap 'rm -rf "$LOG_DIR"' EXIT
REPORT="$ROOT/fuzz/last-run.md"
{
    echo
    echo "## $(date -u +%Y-%m-%dT%H:%MZ), ${SECONDS_PER_TARGET}s per target, $(rustc +nightly --version)"
    echo
    echo "| target | executions | exec/s | corpus files | result |"
    echo "|---|---:|---:|---:|---|"
} >>"$REPORT"

status=0
for target in "${TARGETS[@]}"; do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus" "fuzz/artifacts/$target"
    echo "== $target: ${SECONDS_PER_TARGET}s"
    log="$LOG_DIR/$target.log"
    result=ok
    if ! cargo +nightly fuzz run --fuzz-dir fuzz --target-dir "$TARGET_DIR" "$target" "$corpus" -- \
        -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 >"$log" 2>&1; then
        result="CRASH (see fuzz/artifacts/$target)"
        status=1
    fi
    # libFuzzer's closing line: "Done 12345 runs in 60 second(s)".
    runs="$(grep -Eo 'Done [0-9]+ runs' "$log" | tail -1 | grep -Eo '[0-9]+' || true)"
    runs="${runs:-$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')}"
    rate='?'
    if [[ "$runs" =~ ^[0-9]+$ ]]; then
        rate=$((runs / SECONDS_PER_TARGET))
    fi
    if [ "$result" = ok ] && [ "${FUZZ_NO_CMIN:-0}" != 1 ]; then
        cargo +nightly fuzz cmin --fuzz-dir fuzz --target-dir "$TARGET_DIR" "$target" "$corpus" \
            >"$LOG_DIR/$target.cmin.log" 2>&1 || echo "   (cmin failed; corpus kept as is)"
    fi
    files="$(find "$corpus" -type f | wc -l | tr -d ' ')"
    echo "   $runs executions ($rate/s), $files corpus files: $result"
    if [ "$result" != ok ]; then
        tail -40 "$log" >&2
    fi
    echo "| \`$target\` | $runs | $rate | $files | $result |" >>"$REPORT"
done
exit "$status"
