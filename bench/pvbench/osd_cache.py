"""The BlueStore cache of a cluster's OSDs, read through their admin sockets:
its settings in effect and how many of the bytes the OSDs read came from it.

An RBD benchmark measures the path to the OSD only while the OSD serves
every read from its memory; a read that misses its cache reads the OSD's
disk instead, and which reads miss depends on what the runs before left in
the cache (bench/compare --rbd, docs/perf/rbd-cache-2026-12-06.md). This
module lets a run say, per fio run, that it did not happen.

The admin socket speaks one request per connection: the command as JSON
and a NUL byte; the answer is a 4-byte big-endian length and that many
bytes (JSON for the commands used here). Talking to it directly costs a
millisecond; the `ceph --admin-daemon` CLI costs half a second a call.
"""
import glob
import json
import os
import re
import socket
import struct

from . import BenchError

# Where the daemons put their sockets when ceph.conf does not say.
DEFAULT_RUN_DIR = "/var/run/ceph"
TIMEOUT_S = 10


def admin_command(path, prefix):
    """The JSON answer of the daemon at admin socket `path` to `prefix`
    (e.g. 'perf dump', 'config show')."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(TIMEOUT_S)
            s.connect(path)
            s.sendall(json.dumps({"prefix": prefix}).encode() + b"\0")
            length = struct.unpack(">I", _receive(s, 4))[0]
            return json.loads(_receive(s, length))
    except (OSError, ValueError) as e:
        raise BenchError("admin socket %s, %s: %s" % (path, prefix, e))


def _receive(s, count):
    data = b""
    while len(data) < count:
        chunk = s.recv(count - len(data))
        if not chunk:
            raise OSError("connection closed after %d of %d bytes"
                          % (len(data), count))
        data += chunk
    return data


def conf_value(conf, key, sections=("osd", "global")):
    """The value of `key` in ceph.conf `conf` (spaces, underscores and
    dashes alike in keys), from the first of `sections` that sets it; None
    if none does."""
    norm = lambda k: re.sub(r"[ _-]+", "_", k.strip().lower())
    found, section = {}, None
    with open(conf) as f:
        for line in f:
            line = line.split("#", 1)[0].split(";", 1)[0].strip()
            m = re.match(r"\[(.+)\]$", line)
            if m:
                section = m.group(1).strip()
            elif "=" in line and section:
                k, v = line.split("=", 1)
                found.setdefault((section, norm(k)), v.strip())
    for s in sections:
        if (s, norm(key)) in found:
            return found[(s, norm(key))]
    return None


def osd_sockets(conf):
    """The admin sockets of the OSDs running on this machine for the
    cluster of `conf`: its `admin socket` pattern ($cluster, $name, $pid
    as wildcards; default RUN_DIR/$cluster-$name.asok) for the names
    osd.N."""
    pattern = conf_value(conf, "admin socket") or os.path.join(
        conf_value(conf, "run dir") or DEFAULT_RUN_DIR, "$cluster-$name.asok")
    meta = r"\$(\{[a-z_]+\}|[a-z_]+)"
    values = {"name": r"osd\.[0-9]+", "pid": r"[0-9]+"}
    regex = "".join(
        values.get(part.strip("{}"), r"[^/]*") if i % 2 else re.escape(part)
        for i, part in enumerate(re.split(meta, pattern)))
    return sorted(p for p in glob.glob(re.sub(meta, "*", pattern))
                  if re.fullmatch(regex, p))


class OsdCache:
    """The OSDs' BlueStore caches of one cluster. Before each run start()
    reads the counters; stop() returns what the OSDs read during the run:
    {"osd_read_mib": MiB read, "osd_hit_pct": % of those bytes that came
    from the cache (None when nothing was read: a write job)}."""

    def __init__(self, conf):
        self.sockets = osd_sockets(conf)
        if not self.sockets:
            raise BenchError("no OSD admin socket found for %s (its "
                             "'admin socket' or 'run dir' setting)" % conf)
        self._before = None

    def counters(self):
        """(hit bytes, miss bytes, bytes cached) summed over the OSDs."""
        total = [0, 0, 0]
        for path in self.sockets:
            b = admin_command(path, "perf dump")["bluestore"]
            for i, key in enumerate(("bluestore_buffer_hit_bytes",
                                     "bluestore_buffer_miss_bytes",
                                     "bluestore_buffer_bytes")):
                total[i] += b[key]
        return total

    def start(self):
        self._before = self.counters()

    def stop(self):
        hit, miss, _ = (a - b for a, b in zip(self.counters(), self._before))
        read = hit + miss
        return {"osd_read_mib": read / 2**20,
                "osd_hit_pct": 100.0 * hit / read if read else None}

    def cached_mib(self):
        return self.counters()[2] / 2**20

    def settings(self):
        """The cache settings in effect (the first OSD's `config show`) and
        the data share they give: {"autotune", "cache_mib", "data_ratio",
        "shards", "data_mib", "buffered_write"}. With autotune the size
        moves with the OSD's memory target, and with no size set it is the
        default for the device's kind (rotational or not): cache_mib and
        data_mib are then None."""
        c = admin_command(self.sockets[0], "config show")
        autotune = c["bluestore_cache_autotune"] == "true"
        size = 0 if autotune else int(c["bluestore_cache_size"])
        ratio = 1.0 - sum(float(c["bluestore_cache_%s_ratio" % k])
                          for k in ("meta", "kv", "kv_onode"))
        return {"autotune": autotune,
                "cache_mib": size / 2**20 if size else None,
                "data_ratio": round(ratio, 4),
                "shards": int(c["osd_num_cache_shards"]),
                "data_mib": round(size * ratio / 2**20, 1) if size else None,
                "buffered_write":
                    c["bluestore_default_buffered_write"] == "true"}
