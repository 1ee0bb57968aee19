"""sqlite commits: an fsync-bound application on a filesystem over a
target's disk file, for the latency group of bench/compare.

The filesystem: ext4 made on a loop device over the file (buffered, or
with --direct-io=on), mounted with noinit_itable (no background inode
table writes during the run). mkfs does not discard: the targets share
one image, filled with data before the run, and mkfs's discard would
punch it through the targets that honour discards (pvdisk, the kernel's
own file) but not through those that ignore them (qemu-storage-daemon's
export, bench/fuse_floor), so each target would write to a different
state of the image's blocks (holes to allocate or blocks in place),
whose cost on the host differs more than the targets do. The workload: a database in WAL mode with
synchronous=FULL, one 1 KiB row per transaction for a given time; the
figure is commits per second. Runnable alone:

  python3 bench/pvbench/sqlite_commits.py DIR SECONDS
"""
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

ROW_BYTES = 1024


def commits(folder, seconds):
    """Commits per second of one-row transactions into a new database in
    `folder` (WAL, synchronous=FULL) for `seconds`."""
    path = os.path.join(folder, "bench.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB)")
        row = os.urandom(ROW_BYTES)
        count = 0
        start = time.monotonic()
        end = start + seconds
        now = start
        while now < end:
            db.execute("INSERT INTO t (data) VALUES (?)", (row,))
            count += 1
            now = time.monotonic()
        return count / (now - start)
    finally:
        db.close()


def _run(cmd):
    p = subprocess.run(cmd, text=True, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd),
                                              (p.stderr or p.stdout).strip()))
    return p.stdout.strip()


def drop_file_cache(path):
    """Drops the page cache of `path` (the targets share one image: what
    another target wrote must be read again)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def on_loop(file, seconds, direct_io):
    """Commits per second on a new ext4 on a loop device over `file`; the
    loop device and the mount are gone afterwards, whatever happens."""
    drop_file_cache(file)
    loop = _run(["losetup", "--find", "--show",
                 "--direct-io=%s" % ("on" if direct_io else "off"), file])
    mnt = tempfile.mkdtemp(prefix="pvbench-sqlite.")
    mounted = False
    try:
        _run(["mkfs.ext4", "-q", "-F", "-E",
              "nodiscard,lazy_itable_init=1,lazy_journal_init=1", loop])
        _run(["mount", "-o", "noinit_itable", loop, mnt])
        mounted = True
        return commits(mnt, seconds)
    finally:
        if mounted:
            subprocess.run(["umount", mnt], capture_output=True)
        subprocess.run(["losetup", "-d", loop], capture_output=True)
        os.rmdir(mnt)


def command(direct_io):
    """The steps of one run, as shell lines (TARGET: the disk file)."""
    return ("losetup --find --show --direct-io=%s TARGET; "
            "mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 LOOP; "
            "mount -o noinit_itable LOOP DIR; "
            "python3 bench/pvbench/sqlite_commits.py DIR RUNTIME"
            % ("on" if direct_io else "off"))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: sqlite_commits.py DIR SECONDS", file=sys.stderr)
        sys.exit(2)
    print("%.0f commits/s" % commits(sys.argv[1], float(sys.argv[2])))
