#!/usr/bin/env bash
# Install what flyasm needs when it is missing: a gfx950-capable LLVM (apt, when root), then the
# Python package with its test dependencies. Safe to run again.
set -euo pipefail
have_llvm() {
  python3 - <<'PY' 2>/dev/null
import sys
sys.path.insert(0, ".")
from flyasm.asm.toolchain import find_toolchain
tc = find_toolchain()
missing = [t for t in ("clang", "llc", "llvm-readelf", "llvm-dwarfdump") if not tc.has(t)]
sys.exit(1 if missing else 0)
PY
}
if ! have_llvm; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "flyasm setup: installing llvm-22 lld-22 clang-22 with apt"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq llvm-22 lld-22 clang-22 >/dev/null
  else
    echo "flyasm setup: no gfx950-capable LLVM found. Install llvm-22 lld-22 clang-22 (Debian/Ubuntu) or ROCm," >&2
    echo "or set FLYASM_LLVM_BIN to a directory with llvm-mc, ld.lld, llvm-objdump, clang and llc." >&2
    exit 1
  fi
fi
# Headless Chromium renders the register-map picture in a test (it skips, saying why, without it).
if ! command -v chromium >/dev/null && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "flyasm setup: installing chromium (register-map rendering test)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "flyasm setup: chromium not installed; tests/test_regmap.py will skip its rendering check" >&2
fi
python3 -m pip install -q -e '.[test]'
python3 -c "import flyasm, torch, numpy; print('flyasm setup: ok (torch', torch.__version__ + ')')"
