# Sourced by e2e/install-tools.sh and the build scripts next to this file.
# place STORED DEST: DEST becomes the stored file (a hard link; a copy across file systems), not
# a symlink: member processes run as user 65532, who cannot enter root's home, where the store is.
place() {
  [ "$1" -ef "$2" ] && return
  ln -f "$1" "$2.tmp" 2>/dev/null || cp -f "$1" "$2.tmp"
  mv -f "$2.tmp" "$2"
}
