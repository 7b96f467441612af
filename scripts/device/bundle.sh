#!/usr/bin/env bash
# Builds dist/device.tar.xz: everything `check.sh` needs on a GPU machine that
# has no Go toolchain (ragforge, the fixture-parity test binaries, the shared
# libraries they link, including glibc's loader so the bundle runs on an older
# distribution, and the fixtures). Usage: scripts/device/bundle.sh [SHARED_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${1:-../shared}
[ -d "$shared/fixtures" ] || { echo "bundle: $shared/fixtures not found (pass the shared directory)" >&2; exit 1; }
out=dist/device
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib" "$out/shared"
go build -ldflags "-s -w" -o "$out/bin/ragforge" ./cmd/ragforge
# The packages whose tests are fixture parity (forward, generation, training steps).
for pkg in models/t5 models/bert models/decoder train/filter train/retriever; do
  go test -c -ldflags "-s -w" -o "$out/bin/$(echo "$pkg" | tr / _).test" "./$pkg"
done
# Every shared library the binaries load, glibc and its loader included.
for b in "$out"/bin/*; do ldd "$b"; done | awk '/=> \//{print $3} /^\t\/lib64\//{print $1}' | sort -u |
  while read -r so; do cp -L "$so" "$out/lib/"; done
cp -r "$shared/fixtures" "$out/shared/"
cp scripts/device/check.sh scripts/device/hf_t5_bench.py "$out/"
tar -C dist -cJf dist/device.tar.xz device
ls -la dist/device.tar.xz
