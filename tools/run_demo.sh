#!/usr/bin/env bash
# Quick start: set everything up, then train the character-level language model demo
# (arguments go to it: --steps, --device, --temperature, --help).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup_env.sh
.venv/bin/python -m kael.examples.charlm "$@"
