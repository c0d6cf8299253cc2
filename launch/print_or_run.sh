# Sourced by the launchers: `run CMD...` runs CMD, or with PRINT_ONLY=1 prints it
# shell-quoted instead; UV_SETUP is the shell line that makes `python3 -m uv`
# work (uv from the system pip into ~/.local; again with
# --break-system-packages where the system Python is externally managed, PEP 668).

run() {
  if [[ "$PRINT_ONLY" == 1 ]]; then
    printf '%q ' "$@" | sed 's/ $//'
    echo
  else
    "$@"
  fi
}

# `help_requested ARGS...`: whether --help or -h stands among the launcher's own
# options (before `--`; after it, they are train.py's).
help_requested() {
  local arg
  for arg in "$@"; do
    [[ "$arg" == "--" ]] && return 1
    [[ "$arg" == "--help" || "$arg" == "-h" ]] && return 0
  done
  return 1
}

UV_SETUP='python3 -m uv --version >/dev/null 2>&1 || { python3 -m pip install --user --quiet uv || python3 -m pip install --user --quiet --break-system-packages uv; }'

# `run_resuming MAX CMD...`: runs CMD (through `run`); while it exits with 75
# (train.py stopped by SIGTERM at a saved step: preemption, maintenance),
# reruns it, which resumes from that step, at most MAX times. Not after the
# launcher itself got SIGTERM or SIGINT (the machine going down, Ctrl-C in
# this terminal): then it exits with train.py's code.
PREEMPTED_EXIT_CODE=75
run_resuming() {
  local max="$1" restarts=0 code=0
  shift
  if [[ "$PRINT_ONLY" == 1 ]]; then
    run "$@"
    return 0
  fi
  LAUNCHER_SIGNALLED=0
  trap 'LAUNCHER_SIGNALLED=1' TERM INT
  while true; do
    code=0
    "$@" || code=$?
    if [[ "$code" != "$PREEMPTED_EXIT_CODE" || "$LAUNCHER_SIGNALLED" == 1 || "$restarts" -ge "$max" ]]; then
      break
    fi
    restarts=$((restarts + 1))
    echo "launcher: train.py stopped at a saved step (exit $code); rerunning the same command to resume (restart $restarts of at most $max)" >&2
  done
  trap - TERM INT
  return "$code"
}
