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

UV_SETUP='python3 -m uv --version >/dev/null 2>&1 || { python3 -m pip install --user --quiet uv || python3 -m pip install --user --quiet --break-system-packages uv; }'
