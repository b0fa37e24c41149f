# Sourced by scripts/go-libs.sh and scripts/go-wasm.sh: the files whose
# checksums say whether a checked-in build artifact is fresh.
# files PATH...: what git would commit under the paths (untracked files too),
# sorted. Symlinks are left out (core/lua points at lua/, which callers list).
files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -- "$@" | while read -r f; do [[ -f "$f" && ! -L "$f" ]] && echo "$f"; done
  else
    find "$@" -type f
  fi | LC_ALL=C sort -u
}
