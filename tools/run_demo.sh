#!/usr/bin/env bash
# Quick start: set up what building and running kael need (no test tools), build, then train the
# character-level language model demo (arguments go to it: --steps, --device, --temperature, --help).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup_env.sh --build
.venv/bin/python -m kael.examples.charlm "$@"
