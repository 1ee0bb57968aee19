#!/usr/bin/env bash
# Writes the seed corpus of the qcow2_metadata fuzz target,
# tests/fuzz/corpus/qcow2_metadata/image-*: small qcow2 images (512-byte
# clusters, under 9 KiB) made and filled by qemu-img and qemu-io, one per
# variant the core reads: v2, v3, refcount widths 1/16/64, lazy refcounts,
# zero clusters, a backing file name and format, preallocated metadata,
# compressed clusters (zlib and zstd); two internal snapshots; and images with extended L2 entries
# (16 KiB clusters, the smallest they allow, under 112 KiB): subclusters
# allocated, zero and unallocated, over a backing file, and with invalid
# bitmaps (a subcluster both allocated and zero, allocated subclusters
# without a host cluster, a compressed entry with a bitmap).
# Usage: tests/fuzz/make_qcow2_seeds.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/corpus/qcow2_metadata
work=$(mktemp -d "${TMPDIR:-/tmp}/pvdisk-qcow2-seeds.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -f "$out"/image-*
fill() { qemu-io -c "write -P 0xab 0 1k" -c "write -z 4k 1k" \
  -c "write -P 0xcd 40k 512" "$1" >/dev/null; }
for variant in v3:compat=1.1 v2:compat=0.10 refcount1:refcount_bits=1 \
               refcount64:refcount_bits=64 lazy:lazy_refcounts=on; do
  name=${variant%%:*} opts=${variant#*:}
  qemu-img create -q -f qcow2 -o "cluster_size=512,$opts" "$work/$name" 64k
  fill "$work/$name"
  cp "$work/$name" "$out/image-$name"
done
qemu-img create -q -f qcow2 -o cluster_size=512 "$work/base" 64k
qemu-img create -q -f qcow2 -o cluster_size=512 -b base -F qcow2 \
  "$work/backing"
qemu-io -c "write -P 1 1k 1k" "$work/backing" >/dev/null
cp "$work/backing" "$out/image-backing"
qemu-img create -q -f qcow2 -o cluster_size=512,preallocation=metadata \
  "$work/prealloc" 4k
cp "$work/prealloc" "$out/image-prealloc"
qemu-img create -q -f raw "$work/raw" 16k
qemu-io -f raw -c "write -P 0x31 0 8k" "$work/raw" >/dev/null
qemu-img convert -c -O qcow2 -o cluster_size=512 "$work/raw" \
  "$out/image-compressed"
qemu-img convert -c -O qcow2 -o cluster_size=512,compression_type=zstd \
  "$work/raw" "$out/image-compressed-zstd"
# Extended L2: 16 KiB clusters (512-byte subclusters), 128 KiB disk.
xl2() { qemu-img create -q -f qcow2 -o cluster_size=16k,extended_l2=on "$@"; }
xl2 "$work/xl2" 128k
qemu-io -c "write -P 0xab 0 1k" -c "write -z 2k 1k" -c "write -P 0xcd 17k 3k" \
  -c "write -z 32k 16k" -c "discard 18k 512" "$work/xl2" >/dev/null
cp "$work/xl2" "$out/image-xl2"
xl2 -b base -F qcow2 "$work/xl2-backing" 64k
qemu-io -c "write -P 2 1536 1k" "$work/xl2-backing" >/dev/null
cp "$work/xl2-backing" "$out/image-xl2-backing"
# The L2 table of image-xl2 is its fifth cluster; entry 0 names a data
# cluster with subclusters 0 and 1 allocated.
l2=$((4 * 16384))
poke() {  # poke FILE OFFSET HEX16: 8 big-endian bytes at OFFSET
  printf "$(echo "$3" | sed 's/../\\x&/g')" |
    dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
cp "$work/xl2" "$work/bad"
poke "$work/bad" $((l2 + 8)) 0000000100000003
cp "$work/bad" "$out/image-xl2-allocated-and-zero"
cp "$work/xl2" "$work/bad"
poke "$work/bad" $((l2 + 16)) 0000000000000000
poke "$work/bad" $((l2 + 24)) 0000000000000001
cp "$work/bad" "$out/image-xl2-no-host"
cp "$work/xl2" "$work/bad"
poke "$work/bad" "$l2" 4000000000014000
cp "$work/bad" "$out/image-xl2-compressed-bitmap"
qemu-img create -q -f qcow2 -o cluster_size=512 "$work/snapshots" 64k
fill "$work/snapshots"
qemu-img snapshot -c first "$work/snapshots"
qemu-io -c "write -P 0x77 0 2k" "$work/snapshots" >/dev/null
qemu-img snapshot -c second "$work/snapshots"
cp "$work/snapshots" "$out/image-snapshots"
ls -l "$out"
