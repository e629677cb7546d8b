#!/usr/bin/env bash
# Runs the example A2A agent (agent.py) on 127.0.0.1, after installing its pinned packages
# (requirements.txt, from PyPI; Python 3.10 or newer with venv) into a virtualenv of its own, once:
#
#   bash examples/a2a_agent/run.sh [--port 8090]   # serves until stopped (Ctrl-C)
#   bash examples/a2a_agent/run.sh --setup         # installs only, and prints the virtualenv's python
#
# The virtualenv is $A2A_AGENT_VENV, by default target/a2a-agent-venv in this checkout. It is made
# again when requirements.txt changes; two runs at once install it once (flock).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../target}"
venv="${A2A_AGENT_VENV:-$target/a2a-agent-venv}"
wanted="$(sha256sum "$here/requirements.txt" | cut -c1-16)"
mkdir -p "$(dirname "$venv")"
(
  flock 9
  if [ "$(cat "$venv/installed" 2>/dev/null)" != "$wanted" ]; then
    echo "installing the example agent's packages into $venv (once)" >&2
    python3 -m venv --clear "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
    echo "$wanted" >"$venv/installed"
  fi
) 9>"$venv.lock"
if [ "${1:-}" = "--setup" ]; then
  echo "$venv/bin/python"
  exit 0
fi
exec "$venv/bin/python" "$here/agent.py" "$@"
