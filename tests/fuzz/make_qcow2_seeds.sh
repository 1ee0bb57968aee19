#!/usr/bin/env bash
# Writes the seed corpus of the qcow2_metadata fuzz target,
# tests/fuzz/corpus/qcow2_metadata/image-*: small qcow2 images (512-byte
# clusters, under 9 KiB) made and filled by qemu-img and qemu-io, one per
# variant the core reads: v2, v3, refcount widths 1/16/64, lazy refcounts,
# zero clusters, a backing file name and format, preallocated metadata,
# compressed clusters (zlib and zstd), two internal snapshots.
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
qemu-img create -q -f qcow2 -o cluster_size=512 "$work/snapshots" 64k
fill "$work/snapshots"
qemu-img snapshot -c first "$work/snapshots"
qemu-io -c "write -P 0x77 0 2k" "$work/snapshots" >/dev/null
qemu-img snapshot -c second "$work/snapshots"
cp "$work/snapshots" "$out/image-snapshots"
ls -l "$out"
