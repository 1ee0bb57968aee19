#!/usr/bin/env python3
"""Writes the seed corpora tests/fuzz/corpus/NAME/seed-* for the fuzz targets.

Run it after changing an input layout:  python3 tests/fuzz/make_seeds.py
It replaces every seed-* file and leaves regression-* files (inputs that once
found a defect, kept so that every run replays them) alone.

The ring fuzzers read their input as little-endian fields, front to back
(tests/fuzz/fuzz_input.h): a configuration, then a script of actions, each an
action byte and its operands, as listed below and in the fuzzers' Action
enums. Seeds give the fuzzer a well-formed example of every request kind and
index trick; it mutates from there.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def u8(v):
    return struct.pack("<B", v & 0xFF)


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


# --- blkif (blkif_device_ring_fuzzer.cc) -----------------------------------
# Configuration: u8 ring order (slots = 1 << order % 7), u8 data pages - 1,
# u64 disk sectors, u16 max segments - 1, u8 read-only, u8 notify always.
B_PUSH, B_WRITE_SLOT, B_SET_PROD, B_ADD_PROD, B_EVENTS, B_DATA, B_FILL, \
    B_RACE, B_TAKE, B_RESPOND, B_PUBLISH, B_FINAL = range(12)
SLOT = 112
OP_READ, OP_WRITE, OP_BARRIER, OP_FLUSH, OP_DISCARD, OP_INDIRECT = \
    0, 1, 2, 3, 5, 6


def blkif_config(order=5, pages=16, sectors=2048, max_segments=11, ro=0,
                 always=0):
    return (u8(order) + u8(pages - 1) + u64(sectors) + u16(max_segments - 1) +
            u8(ro) + u8(always))


def blkif_rw(op, rid, sector, segments, nr=None):
    body = (u8(op) + u8(len(segments) if nr is None else nr) + u16(0) +
            u32(0) + u64(rid) + u64(sector))
    for gref, first, last in segments:
        body += u32(gref) + u8(first) + u8(last) + u16(0)
    return body.ljust(SLOT, b"\0")


def blkif_discard(rid, sector, count, flag=0):
    return (u8(OP_DISCARD) + u8(flag) + u16(0) + u32(0) + u64(rid) +
            u64(sector) + u64(count)).ljust(SLOT, b"\0")


def blkif_indirect(op, rid, sector, count, pages):
    body = (u8(OP_INDIRECT) + u8(op) + u16(count) + u32(0) + u64(rid) +
            u64(sector) + u16(0) + u16(0))
    for p in (list(pages) + [0] * 8)[:8]:
        body += u32(p)
    return body.ljust(SLOT, b"\0")


def push(slot):
    return u8(B_PUSH) + slot


def answer_all(n, code=0):
    return (u8(B_RESPOND) + u8(0) + u8(code)) * n + u8(B_PUBLISH) + \
        u8(B_FINAL)


def blkif_seeds():
    take = u8(B_TAKE)
    s = {}
    s["read"] = (blkif_config() +
                 push(blkif_rw(OP_READ, 7, 0, [(0, 0, 7), (1, 0, 3)])) +
                 take + answer_all(1))
    s["write-flush-discard"] = (
        blkif_config() +
        push(blkif_rw(OP_WRITE, 1, 8, [(2, 1, 7)])) +
        push(blkif_rw(OP_FLUSH, 2, 0, [])) +
        push(blkif_discard(3, 16, 8)) +
        push(blkif_discard(4, 24, 8, flag=2)) +
        take * 4 + answer_all(4, code=1))
    s["eleven-segments"] = (
        blkif_config(sectors=1 << 20) +
        push(blkif_rw(OP_READ, 5, 100, [(i, 0, 7) for i in range(11)])) +
        take + answer_all(1))
    s["indirect-one-page"] = (
        blkif_config(pages=32, sectors=1 << 20, max_segments=4096) +
        u8(B_FILL) + u8(31) + u16(100) + u8(0) +
        push(blkif_indirect(OP_READ, 9, 0, 100, [31])) +
        take + answer_all(1))
    s["indirect-two-pages"] = (
        blkif_config(pages=32, sectors=1 << 20, max_segments=1024) +
        u8(B_FILL) + u8(30) + u16(512) + u8(0) +
        u8(B_FILL) + u8(31) + u16(88) + u8(0) +
        push(blkif_indirect(OP_WRITE, 10, 8, 600, [30, 31])) +
        take + answer_all(1, code=2))
    s["indirect-not-negotiated"] = (
        blkif_config() +
        push(blkif_indirect(OP_READ, 11, 0, 1, [15])) + take + answer_all(0))
    s["invalid-requests"] = (
        blkif_config(ro=1) +
        push(blkif_rw(OP_READ, 1, 0, [(99, 0, 7)])) +       # page outside
        push(blkif_rw(OP_READ, 2, 0, [(0, 5, 2)])) +        # first > last
        push(blkif_rw(OP_READ, 3, 0, [], nr=0)) +           # no segments
        push(blkif_rw(OP_READ, 4, 0, [(0, 0, 7)], nr=12)) +  # too many
        push(blkif_rw(OP_READ, 5, 2047, [(0, 0, 7)])) +     # past the end
        push(blkif_rw(OP_WRITE, 6, 0, [(0, 0, 7)])) +       # read-only
        push(blkif_rw(OP_BARRIER, 7, 0, [])) +              # unsupported
        push(blkif_rw(77, 8, 0, [])) +                      # unknown
        take * 8 + answer_all(0))
    s["producer-overflow"] = (
        blkif_config(order=2) + u8(B_SET_PROD) + u32(1000) + take +
        answer_all(0))
    s["producer-back"] = (
        blkif_config(order=2) +
        push(blkif_rw(OP_READ, 1, 0, [(0, 0, 7)])) + take +
        u8(B_ADD_PROD) + u8(0xFE) + take + answer_all(1))
    s["ring-full"] = (
        blkif_config(order=2) +
        push(blkif_rw(OP_READ, 1, 0, [(0, 0, 7)])) * 4 + take * 4 +
        take + u8(B_RESPOND) + u8(2) + u8(0) + u8(B_RESPOND) + u8(0) +
        u8(1) + u8(B_PUBLISH) +
        push(blkif_rw(OP_READ, 2, 0, [(0, 0, 7)])) * 2 + take * 3 +
        answer_all(4))
    s["events"] = (
        blkif_config(order=3) + u8(B_EVENTS) + u32(0) + u32(3) +
        push(blkif_rw(OP_READ, 1, 0, [(0, 0, 7)])) * 3 + take * 3 +
        answer_all(3) + u8(B_FINAL) +
        push(blkif_rw(OP_READ, 2, 0, [(0, 0, 7)])) + u8(B_FINAL))
    s["race-indirect"] = (
        blkif_config(pages=32, sectors=1 << 20, max_segments=4096) +
        u8(B_FILL) + u8(31) + u16(8) + u8(0) +
        push(blkif_indirect(OP_READ, 12, 0, 8, [31])) +
        u8(B_RACE) + u32(2) + u8(0xFF) + take + answer_all(1))
    s["write-slot-then-publish"] = (
        blkif_config() + u8(B_WRITE_SLOT) + u8(0) +
        blkif_rw(OP_READ, 3, 0, [(0, 0, 0)]) +
        u8(B_DATA) + u8(0) + u16(0) + u8(4) + b"junk" +
        u8(B_ADD_PROD) + u8(1) + take + answer_all(1))
    return s


# --- virtio (virtio_device_ring_fuzzer.cc) ---------------------------------
# Configuration: u8 queue order (size = 1 << order % 9), u8 data pages - 1,
# u64 disk sectors, u16 max segments - 1, u8 read-only, u8 serial length,
# serial bytes, u8 notify always.
V_DESC, V_PUSH, V_SET_IDX, V_DRIVER_WORDS, V_DATA, V_RACE, V_TAKE, \
    V_RESPOND, V_PUBLISH, V_FINAL = range(10)
NEXT, WRITE, INDIRECT = 1, 2, 4
T_IN, T_OUT, T_FLUSH, T_GET_ID, T_DISCARD, T_WRITE_ZEROES = 0, 1, 4, 8, 11, 13


def virtio_config(order=4, pages=16, sectors=2048, max_segments=32, ro=0,
                  serial=b"pvdisk-0", always=0):
    return (u8(order) + u8(pages - 1) + u64(sectors) +
            u16(max_segments - 1) + u8(ro) + u8(len(serial)) + serial +
            u8(always))


def desc_bytes(addr, length, flags, nxt):
    return u64(addr) + u32(length) + u16(flags) + u16(nxt)


def desc(index, addr, length, flags=0, nxt=0):
    return u8(V_DESC) + u16(index) + desc_bytes(addr, length, flags, nxt)


def data(offset, payload):
    return u8(V_DATA) + u32(offset) + u8(len(payload)) + payload


def header(rtype, sector):
    return u32(rtype) + u32(0) + u64(sector)


def vpush(head):
    return u8(V_PUSH) + u16(head)


def vanswer(n, code=0):
    return (u8(V_RESPOND) + u8(0) + u8(code)) * n + u8(V_PUBLISH) + \
        u8(V_FINAL)


STATUS = 200  # the status byte's offset in page 0
SEGMENT = 32  # a discard segment's offset in page 0


def chain(rtype, data_descs, sector=0, base=0):
    """Header at page 0, the data descriptors, status byte: descs base..."""
    out = data(0, header(rtype, sector))
    descs = [(0, 16, 0)] + data_descs + [(STATUS, 1, WRITE)]
    for i, (addr, length, flags) in enumerate(descs):
        last = i == len(descs) - 1
        out += desc(base + i, addr, length, flags | (0 if last else NEXT),
                    0 if last else base + i + 1)
    return out


def virtio_seeds():
    take = u8(V_TAKE)
    s = {}
    s["read"] = (virtio_config() + chain(T_IN, [(4096, 8192, WRITE)]) +
                 vpush(0) + take + vanswer(1))
    s["write"] = (virtio_config() +
                  chain(T_OUT, [(4096, 512, 0), (12288, 1024, 0)], 8) +
                  vpush(0) + take + vanswer(1, code=1))
    s["flush"] = (virtio_config() + chain(T_FLUSH, []) + vpush(0) + take +
                  vanswer(1))
    s["get-id"] = (virtio_config() + chain(T_GET_ID, [(300, 20, WRITE)]) +
                   vpush(0) + take + vanswer(0))
    s["discard"] = (virtio_config() +
                    data(SEGMENT, u64(16) + u32(8) + u32(0)) +
                    chain(T_DISCARD, [(SEGMENT, 16, 0)]) + vpush(0) + take +
                    vanswer(1))
    s["write-zeroes"] = (virtio_config() +
                         data(SEGMENT, u64(16) + u32(8) + u32(1)) +
                         chain(T_WRITE_ZEROES, [(SEGMENT, 16, 0)]) +
                         vpush(0) + take + vanswer(1))
    table = (desc_bytes(0, 16, NEXT, 1) + desc_bytes(4096, 4096, WRITE | NEXT,
                                                     2) +
             desc_bytes(STATUS, 1, WRITE, 0))
    s["indirect"] = (virtio_config() + data(0, header(T_IN, 0)) +
                     data(8192, table) + desc(3, 8192, len(table), INDIRECT) +
                     vpush(3) + take + vanswer(1))
    s["direct-then-indirect"] = (
        virtio_config() + data(0, header(T_OUT, 0)) +
        data(8192, desc_bytes(4096, 512, NEXT, 1) +
             desc_bytes(STATUS, 1, WRITE, 0)) +
        desc(0, 0, 16, NEXT, 1) + desc(1, 8192, 32, INDIRECT) + vpush(0) +
        take + vanswer(1))
    s["loop"] = (virtio_config() + desc(0, 0, 16, NEXT, 1) +
                 desc(1, 4096, 512, NEXT, 0) + vpush(0) + take + vanswer(0))
    s["out-of-range"] = (virtio_config() + desc(0, 0, 16, NEXT, 999) +
                         vpush(0) + vpush(4000) + take * 2 + vanswer(0))
    s["too-long"] = (virtio_config(order=2, max_segments=2) +
                     chain(T_IN, [(4096, 512, WRITE)] * 3) + vpush(0) + take +
                     vanswer(0))
    s["avail-idx-forged"] = (virtio_config() + u8(V_SET_IDX) + u16(1000) +
                             take + vanswer(0))
    s["event-index"] = (virtio_config(order=3) +
                        u8(V_DRIVER_WORDS) + u16(0) + u16(1) +
                        chain(T_FLUSH, []) + vpush(0) + vpush(0) + vpush(0) +
                        take * 3 + (u8(V_RESPOND) + u8(0) + u8(0) +
                                    u8(V_PUBLISH)) * 3 + u8(V_FINAL))
    s["notify-always"] = (virtio_config(always=1) + chain(T_FLUSH, []) +
                          vpush(0) + take + vanswer(1) + u8(V_DRIVER_WORDS) +
                          u16(1) + u16(0) + vpush(0) + take + vanswer(1))
    s["unsupported"] = (virtio_config() + chain(99, []) + vpush(0) + take +
                        vanswer(0))
    s["race"] = (virtio_config() + chain(T_IN, [(4096, 4096, WRITE)]) +
                 u8(V_RACE) + u32(0) + u8(0xFF) + vpush(0) + take + vanswer(1))
    s["read-only-write"] = (virtio_config(ro=1) +
                            chain(T_OUT, [(4096, 512, 0)]) + vpush(0) + take +
                            vanswer(0))
    return s


# --- virtio packed (virtio_packed_device_ring_fuzzer.cc) -------------------
# Configuration: as virtio's. Driver actions, then BackendSide's.
P_ENTRY, P_HAND_OVER, P_FLAGS, P_MOVE, P_DRIVER_EVENT, P_DATA, P_RACE, \
    P_TAKE, P_RESPOND, P_PUBLISH, P_FINAL = range(11)
P_AVAIL, P_USED = 1 << 7, 1 << 15


def pentry(entry, addr, length, flags=0, buffer_id=0):
    """A whole ring entry, owner bits not set (P_HAND_OVER sets them)."""
    return (u8(P_ENTRY) + u16(entry) + u64(addr) + u32(length) +
            u16(buffer_id) + u16(flags))


def pdata(offset, payload):
    return u8(P_DATA) + u32(offset) + u8(len(payload)) + payload


def pchain(rtype, data_descs, first=0, buffer_id=0, sector=0, wrong=0):
    """Header at page 0, data, status: entries first...; handed over."""
    out = pdata(0, header(rtype, sector))
    descs = [(0, 16, 0)] + data_descs + [(STATUS, 1, WRITE)]
    for i, (addr, length, flags) in enumerate(descs):
        last = i == len(descs) - 1
        out += pentry(first + i, addr, length,
                      flags | (0 if last else NEXT), buffer_id)
    return out + u8(P_HAND_OVER) + u8(len(descs) - 1) + u8(wrong)


def panswer(n, code=0):
    return (u8(P_RESPOND) + u8(0) + u8(code)) * n + u8(P_PUBLISH) + \
        u8(P_FINAL)


def packed_seeds():
    take = u8(P_TAKE)
    s = {}
    s["read"] = (virtio_config() + pchain(T_IN, [(4096, 8192, WRITE)]) +
                 take + panswer(1))
    s["write"] = (virtio_config() +
                  pchain(T_OUT, [(4096, 512, 0), (12288, 1024, 0)], 0, 3, 8) +
                  take + panswer(1, code=1))
    s["flush-get-id"] = (virtio_config() + pchain(T_FLUSH, [], 0, 1) +
                         pchain(T_GET_ID, [(300, 20, WRITE)], 2, 2) +
                         take * 2 + panswer(1))
    s["discard"] = (virtio_config() +
                    pdata(SEGMENT, u64(16) + u32(8) + u32(0)) +
                    pchain(T_DISCARD, [(SEGMENT, 16, 0)]) + take + panswer(1))
    table = (u64(0) + u32(16) + u16(0) + u16(0) +
             u64(4096) + u32(4096) + u16(0) + u16(WRITE) +
             u64(STATUS) + u32(1) + u16(0) + u16(WRITE))
    s["indirect"] = (virtio_config() + pdata(0, header(T_IN, 0)) +
                     pdata(8192, table) +
                     pentry(0, 8192, len(table), INDIRECT, 5) +
                     u8(P_HAND_OVER) + u8(0) + u8(0) + take + panswer(1))
    s["wrong-lap"] = (virtio_config() + pchain(T_IN, [(4096, 512, WRITE)],
                                               wrong=2) + take + panswer(0))
    s["inconsistent"] = (virtio_config() + pentry(0, 0, 16, 0, 1) +
                         u8(P_FLAGS) + u16(0) + u16(P_AVAIL | P_USED) + take +
                         panswer(0))
    s["laps"] = (virtio_config(order=2) +
                 (pchain(T_FLUSH, [], 0, 0) + take + panswer(1) +
                  pchain(T_FLUSH, [], 2, 1) + take + panswer(1)) * 3)
    s["same-id"] = (virtio_config() + pchain(T_FLUSH, [], 0, 4) +
                    pchain(T_FLUSH, [], 2, 4) + take * 2 + panswer(2))
    s["event-desc"] = (virtio_config(order=3) + u8(P_DRIVER_EVENT) +
                       u16(0x8002) + u16(2) + pchain(T_FLUSH, [], 0, 0) +
                       pchain(T_FLUSH, [], 2, 1) + take * 2 + panswer(2))
    s["notify-always"] = (virtio_config(always=1) + pchain(T_FLUSH, []) +
                          take + panswer(1) + u8(P_DRIVER_EVENT) + u16(0) +
                          u16(1) + pchain(T_FLUSH, [], 2, 1) + take +
                          panswer(1))
    s["race"] = (virtio_config() + pchain(T_IN, [(4096, 4096, WRITE)]) +
                 u8(P_RACE) + u32(0) + u8(0xFF) + take + panswer(1))
    return s


# --- text parsers ----------------------------------------------------------
# --- FUSE protocol layer (fuse_session_fuzzer.cc) ----------------------------
# Options: u8 bit 0 want_uring, u8 max_write = 1 << (value % 21). Steps: u8
# action (0 classic: u16 length + request; 1 uring: 40-byte header, u8 n + n
# bytes of the op area, u16 payload length + payload; 2 answer kept replies,
# u8 reversed; 3 drop kept replies). The handler answers by unique % 4: 0
# error, 1 bytes, 2 kept, 3 through the payload buffer. Each seed stays under
# run_fuzzer.sh's -max_len of 1 KiB.
F_CLASSIC, F_URING, F_ANSWER, F_DROP = range(4)
(FOP_LOOKUP, FOP_FORGET, FOP_GETATTR, FOP_SETATTR, FOP_OPEN, FOP_READ,
 FOP_WRITE, FOP_STATFS, FOP_RELEASE, FOP_FSYNC, FOP_FLUSH, FOP_INIT,
 FOP_OPENDIR, FOP_READDIR, FOP_RELEASEDIR, FOP_INTERRUPT, FOP_DESTROY,
 FOP_BATCH_FORGET, FOP_FALLOCATE) = (1, 2, 3, 4, 14, 15, 16, 17, 18, 20, 25,
                                      26, 27, 28, 29, 36, 38, 42, 43)
INIT_EXT, MAX_PAGES, BIG_WRITES = 1 << 30, 1 << 22, 1 << 5
OVER_IO_URING_HI = 1 << 9  # bit 41 of the flags, in flags2


def fuse_header(length, opcode, unique, nodeid=1, extlen=0):
    return (u32(length) + u32(opcode) + u64(unique) + u64(nodeid) + u32(0) +
            u32(0) + u32(0) + u16(extlen) + u16(0))


def fclassic(opcode, unique, op=b"", payload=b"", nodeid=1, extlen=0,
             length=None):
    total = 40 + len(op) + len(payload)
    body = fuse_header(total if length is None else length, opcode, unique,
                       nodeid, extlen) + op + payload
    return u8(F_CLASSIC) + u16(len(body)) + body


def furing(opcode, unique, op=b"", payload=b"", nodeid=1):
    return (u8(F_URING) + fuse_header(40 + len(op) + len(payload), opcode,
                                      unique, nodeid) +
            u8(len(op)) + op + u16(len(payload)) + payload)


def finit(unique=1, minor=42, flags=INIT_EXT | MAX_PAGES | BIG_WRITES,
          flags2=OVER_IO_URING_HI, shape=fclassic):
    return shape(FOP_INIT, unique, u32(7) + u32(minor) + u32(131072) +
                 u32(flags) + u32(flags2) + bytes(44))


def fread(opcode, unique, offset, size, shape=fclassic):
    return shape(opcode, unique, u64(5) + u64(offset) + u32(size) + u32(0) +
                 u64(0) + u32(0) + u32(0))


def fwrite(unique, offset, data, size=None, shape=fclassic):
    return shape(FOP_WRITE, unique, u64(5) + u64(offset) +
                 u32(len(data) if size is None else size) + u32(0) + u64(0) +
                 u32(0) + u32(0), data)


def fuse_session_seeds():
    seeds = {}
    uring_options, classic_options = u8(1) + u8(20), u8(0) + u8(20)
    for shape, label in ((fclassic, "classic"), (furing, "uring")):
        options = uring_options if shape is furing else classic_options
        for mode in range(4):  # each way the handler answers
            s = finit(shape=shape)
            s += shape(FOP_LOOKUP, 4 + mode, b"", b"disk0.img\0")
            s += shape(FOP_GETATTR, 8 + mode, u32(0) + u32(0) + u64(5))
            s += fread(FOP_READ, 12 + mode, 4096, 4096, shape=shape)
            s += fwrite(16 + mode, 512, b"w" * 64, shape=shape)
            s += fread(FOP_READDIR, 20 + mode, 0, 512, shape=shape)
            s += u8(F_ANSWER) + u8(mode & 1)
            seeds["%s-data-%d" % (label, mode)] = options + s
        s = finit(shape=shape)
        s += shape(FOP_OPEN, 5, u32(2) + u32(0))
        s += shape(FOP_SETATTR, 6, bytes(88))
        s += shape(FOP_STATFS, 7)
        s += shape(FOP_FSYNC, 8, u64(5) + u32(1) + u32(0))
        s += shape(FOP_FLUSH, 9, bytes(24))
        s += shape(FOP_RELEASE, 10, bytes(24))
        s += shape(FOP_OPENDIR, 11, bytes(8))
        s += shape(FOP_RELEASEDIR, 12, bytes(24))
        s += shape(FOP_FALLOCATE, 13, u64(5) + u64(0) + u64(1 << 20) +
                   u32(0) + u32(0))
        seeds[label + "-meta"] = options + s + u8(F_DROP)
        s = finit(shape=shape)
        s += shape(FOP_FORGET, 60, u64(1), nodeid=2)
        s += shape(FOP_BATCH_FORGET, 61, u32(2) + u32(0),
                   u64(2) + u64(1) + u64(3) + u64(1))
        s += shape(FOP_INTERRUPT, 62, u64(22))
        s += shape(99, 63)  # an opcode nobody serves
        s += shape(FOP_DESTROY, 64)
        seeds[label + "-forget-destroy"] = options + s
        # Malformed: what request.h refuses, one by one.
        s = finit(shape=shape)
        s += fread(FOP_READ, 4, 0, 0, shape=shape)           # READ of 0
        s += fread(FOP_READ, 5, 0, (1 << 20) + 1, shape=shape)
        s += fread(FOP_READ, 6, 1 << 63, 4096, shape=shape)  # offset
        s += fwrite(7, 0, b"x" * 16, size=17, shape=shape)   # short data
        s += fwrite(9, (1 << 63) - 8, b"x" * 16, shape=shape)
        seeds[label + "-malformed-io"] = options + s
        s = finit(shape=shape)
        s += shape(FOP_LOOKUP, 10, b"", b"no-nul")
        s += shape(FOP_LOOKUP, 11, b"", b"\0")               # empty name
        s += shape(FOP_BATCH_FORGET, 12, u32(1000) + u32(0), u64(2) + u64(1))
        s += shape(FOP_FALLOCATE, 13, u64(5) + u64(1 << 62) + u64(1 << 62) +
                   u32(0) + u32(0))
        s += finit(unique=14, shape=shape)                   # a second INIT
        seeds[label + "-malformed-args"] = options + s
    # Shapes only /dev/fuse has: a len that lies, extensions, short headers.
    s = finit()
    s += fclassic(FOP_GETATTR, 2, bytes(16), length=4000)
    s += fclassic(FOP_GETATTR, 3, bytes(16), extlen=200)
    s += fclassic(FOP_GETATTR, 4, bytes(8))                  # short op
    s += u8(F_CLASSIC) + u16(12) + bytes(12)                 # no header
    s += fclassic(FOP_FORGET, 5, u64(1), length=3)
    seeds["classic-cut"] = classic_options + s
    # Before INIT, old kernels, and a small max_write.
    s = fclassic(FOP_GETATTR, 2, bytes(16))
    s += finit(unique=3, minor=22, flags=0, flags2=0)
    s += fwrite(5, 0, b"y" * 200) + fread(FOP_READ, 6, 0, 300)
    seeds["before-init-and-old-kernel"] = u8(0) + u8(7) + s + u8(F_DROP)
    seeds["bad-major"] = uring_options + furing(FOP_INIT, 1, u32(8) + u32(0))
    for label, seed in seeds.items():
        assert len(seed) <= 1024, (label, len(seed))
    return seeds


def text_seeds(items):
    return {"%02d" % i: t.encode() for i, t in enumerate(items)}


SIZE = ["512", "4k", "64K", "256M", "1G", "1GiB", "2gb", "1T", "100B",
        "18446744073709551615", "16777216T", "0", "1.5G", "-1", "1 G", "1X"]
DISK_ARG = ["disk.img", "/tmp/a.img,ro", "a.img,size=1G", "a.img,eio=2048+8",
            "a.img,eio=7", "a.img,ro,size=64M,eio=7+1", "a.img,bogus", ",ro",
            "a.img,,ro", "a.img,size=", "a.img,eio=1+0", "a.img,eio=1+2+3",
            "a.img,eio=x", "a.img,lock=off", "a.img,ro,lock=on",
            "a.img,lock=maybe"]
STATS_COMMAND = ["reset", "reset\n", "  reset\t\n", "resett", "", "RESET",
                 "reset reset"]
ARGS = ["--disk\0a.img\0--queues\0004\0mnt",
        "--allow-other\0mnt",
        "--queues=2\0--disk=a.img,ro\0--disk\0b.img\0x",
        "--queues\0001\0--queues\0002",
        "--allow-other=yes",
        "-x\0--\0---\0--bogus",
        "--queues"]


# --- nvme (nvme_device_ring_fuzzer.cc) ------------------------------------
# Configuration: u8 size order (size = 2 << order % 8), virtio's limits, u8
# mode (bit 0: notify always; bit 1: coalescing, then u8 threshold - 1 and
# u16 time). Driver actions, then BackendSide's.
N_ENTRY, N_PUSH, N_SQ_TAIL, N_CQ_HEAD, N_CQ_EVENT, N_CONSUME, N_DATA, \
    N_RACE, N_TAKE, N_RESPOND, N_PUBLISH, N_FINAL = range(12)
N_READ, N_WRITE, N_FLUSH, N_ZEROES, N_DSM = 0x02, 0x01, 0x00, 0x08, 0x09
N_SGL = 0x40


def nvme_config(order=3, mode=0, coalesce=b""):
    return (u8(order) + virtio_config()[1:-1] + u8(mode) + coalesce)


def ncommand(opcode, cid, slba=0, blocks=1, dptr0=0, dptr1=0, flags=0,
             cdw10=None, cdw11=None, cdw12=None):
    return (u8(opcode) + u8(flags) + u16(cid) + u32(1) + u32(0) + u32(0) +
            u64(0) + u64(dptr0) + u64(dptr1) +
            u32(slba if cdw10 is None else cdw10) +
            u32(slba >> 32 if cdw11 is None else cdw11) +
            u32(blocks - 1 if cdw12 is None else cdw12) + u32(0) * 3)


def npush(cmd):
    return u8(N_PUSH) + cmd


def ndata(offset, payload):
    return u8(N_DATA) + u32(offset) + u8(len(payload)) + payload


def nanswer(n, code=0):
    return ((u8(N_RESPOND) + u8(0) + u8(code)) * n + u8(N_PUBLISH) +
            u8(N_CONSUME) + u8(n + 1) + u8(N_FINAL))


def sgl(addr, length, kind):
    return u64(addr) + u32(length) + b"\0\0\0" + u8(kind)


def nvme_seeds():
    take = u8(N_TAKE)
    s = {}
    s["read-prp"] = (nvme_config() +
                     npush(ncommand(N_READ, 1, 8, 16, 4096, 8192)) + take +
                     nanswer(1))
    prp_list = u64(8192) + u64(12288) + u64(16384)
    s["write-prp-list"] = (nvme_config(mode=1) + ndata(40960, prp_list) +
                           npush(ncommand(N_WRITE, 2, 0, 32, 4096, 40960)) +
                           take + nanswer(1, code=1))
    seg = sgl(4096, 4096, 0) + sgl(12288, 2048, 0)
    s["read-sgl-segment"] = (
        nvme_config() + ndata(40960, seg) +
        npush(ncommand(N_READ, 3, 0, 12, flags=N_SGL)[:24] +
              sgl(40960, 32, 0x30) + ncommand(N_READ, 3, 0, 12)[40:]) +
        take + nanswer(1))
    s["flush-zeroes-dsm"] = (
        nvme_config(mode=2, coalesce=u8(1) + u16(50)) +
        ndata(0, u32(0) + u32(8) + u64(16)) +
        npush(ncommand(N_FLUSH, 4)) +
        npush(ncommand(N_ZEROES, 5, 64, 8, cdw12=7 | (1 << 25))) +
        npush(ncommand(N_DSM, 6, dptr0=0, cdw10=0, cdw11=4, cdw12=0)) +
        take * 3 + nanswer(3))
    s["bad-doorbell"] = (nvme_config() + npush(ncommand(N_READ, 1, 0, 8)) +
                         u8(N_SQ_TAIL) + u32(1000) + take + nanswer(0))
    s["cid-conflict"] = (nvme_config() + npush(ncommand(N_READ, 7, 0, 8)) +
                         npush(ncommand(N_READ, 7, 8, 8)) + take * 2 +
                         nanswer(2))
    return s


def write(name, seeds):
    folder = os.path.join(HERE, "corpus", name)
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        if old.startswith("seed-"):
            os.remove(os.path.join(folder, old))
    for label, payload in seeds.items():
        with open(os.path.join(folder, "seed-" + label), "wb") as f:
            f.write(payload)


def main():
    write("blkif_device_ring", blkif_seeds())
    write("virtio_device_ring", virtio_seeds())
    write("virtio_packed_device_ring", packed_seeds())
    write("nvme_device_ring", nvme_seeds())
    write("fuse_session", fuse_session_seeds())
    write("size", text_seeds(SIZE))
    write("disk_arg", text_seeds(DISK_ARG))
    write("stats_command", text_seeds(STATS_COMMAND))
    write("args", text_seeds(ARGS))


if __name__ == "__main__":
    main()
