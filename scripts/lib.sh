# Shared by scripts/test and scripts/bench.

log() { printf '==> %s\n' "$*" >&2; }

# ensure_debs "command package" …: installs the Debian packages whose commands (or, for an
# absolute path, files) are missing.
ensure_debs() {
  local missing=() pair cmd pkg
  for pair in "$@"; do
    read -r cmd pkg <<<"$pair"
    if [[ $cmd == /* ]]; then
      [ -e "$cmd" ] || missing+=("$pkg")
    else
      command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
