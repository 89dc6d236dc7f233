# Helpers shared by scripts/main.sh and scripts/test.sh: finding cargo and installing Debian and
# Python packages. Sourced, not run. Every install step skips what is already present, so the
# scripts can run again and again, as root (CI) or as a user with sudo.

log() { printf '==> %s\n' "$*"; }

die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# Root runs package managers itself; anyone else goes through sudo.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "installing packages needs root or sudo: $*"
  fi
}

# The machine's Rust toolchain: on PATH, or where rustup puts it.
ensure_cargo() {
  if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-${HOME:-/root}/.cargo}/bin/cargo" ]; then
    export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
  fi
  command -v cargo >/dev/null 2>&1 || die "cargo not found: tilekit needs a Rust toolchain, 1.80 or newer, on PATH"
  log "$(cargo --version), $(rustc --version)"
}

# install_apt PACKAGE...: installs the Debian packages that are not installed yet.
install_apt() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# install_pip REQUIREMENT...: pip leaves satisfied requirements alone, so this is cheap to repeat.
install_pip() {
  [ $# -eq 0 ] && return 0
  command -v python3 >/dev/null 2>&1 || install_apt python3
  python3 -m pip --version >/dev/null 2>&1 || install_apt python3-pip
  log "Python packages: $*"
  # Debian's own Python refuses user installs into it by default (PEP 668); the tools installed
  # here are for this machine's tests only.
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "$@"
}
