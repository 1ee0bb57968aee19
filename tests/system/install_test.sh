#!/usr/bin/env bash
# `make install` into a staging folder (DESTDIR, prefix /usr): every file the
# package needs is where Debian and man(1), bash-completion and systemd look
# for it; the binary runs from there; the installed man pages render without
# a warning; the bash completion completes commands, flags and the values of
# flags with a fixed set.
# Usage: install_test.sh BUILD_DIR VERSION
set -euo pipefail
build=$1
version=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pvdisk-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

DESTDIR=$tmp/root cmake --install "$build" --prefix /usr >"$tmp/install.log"
root=$tmp/root
for f in usr/bin/pvdisk usr/share/man/man1/pvdisk.1.gz \
         usr/share/man/man5/pvdisk-stats.5.gz \
         usr/share/bash-completion/completions/pvdisk \
         usr/share/doc/pvdisk/copyright usr/share/doc/pvdisk/changelog.gz \
         usr/share/doc/pvdisk/reference.md \
         usr/lib/systemd/system/pvdisk@.service; do
  [ -f "$root/$f" ] || fail "make install did not install /$f"
done
[ -x "$root/usr/bin/pvdisk" ] || fail "/usr/bin/pvdisk is not executable"
got=$("$root/usr/bin/pvdisk" --version)
[ "$got" = "pvdisk $version" ] || fail "--version said '$got', not 'pvdisk $version'"

for page in man1/pvdisk.1.gz man5/pvdisk-stats.5.gz; do
  warnings=$(zcat "$root/usr/share/man/$page" |
             groff -ww -man -Tutf8 -z 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "$page: $warnings"
done
MANWIDTH=80 man -l "$root/usr/share/man/man1/pvdisk.1.gz" 2>/dev/null |
  grep -q -- '--queue-map' || fail "the installed pvdisk(1) lacks --queue-map"

# The completion function, as bash-completion calls it.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1));
           _pvdisk; echo "${COMPREPLY[*]}"' _ \
    "$root/usr/share/bash-completion/completions/pvdisk" "$@"
}
[ "$(complete_words pvdisk mo)" = "mount" ] ||
  fail "completion of 'pvdisk mo': '$(complete_words pvdisk mo)'"
[ "$(complete_words pvdisk mount /mnt --front)" = "--frontend" ] ||
  fail "completion of '--front': '$(complete_words pvdisk mount /mnt --front)'"
[ "$(complete_words pvdisk mount /mnt --frontend virtio)" = \
  "virtio virtio-packed" ] ||
  fail "completion of '--frontend virtio': '$(complete_words pvdisk mount /mnt --frontend virtio)'"
[ "$(complete_words pvdisk stat /mnt --js)" = "--json" ] ||
  fail "completion of 'stat --js': '$(complete_words pvdisk stat /mnt --js)'"
echo "install_test: 1 passed, 0 failed"
