#!/usr/bin/env python3
"""pvdisk@.service without systemd as PID 1: its ExecStartPre, ExecStart and
ExecStop lines run as systemd would run them (EnvironmentFile read, %i, ${VAR}
as one word and $VAR split at spaces, `pvdisk` looked up on the search path)
for a conf file of the test's own.

- Type=notify: the READY=1 datagram arrives on NOTIFY_SOCKET (a socket this
  test binds) from the main process, once the mount serves;
- a stop while fio writes: ExecStop exits 0, the main process exits 0, the
  mount is gone, and no block of the image is torn: each is either never
  written or whole with its fio checksum (checked on the image file).

Usage: systemd_test.py PVDISK UNIT_FILE"""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77
NAME = "test"


def unit_lines(path):
    """The [Service] keys of a unit file: key -> list of values."""
    keys = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;[":
                continue
            key, value = line.split("=", 1)
            keys.setdefault(key.strip(), []).append(value.strip())
    return keys


def expand(line, env):
    """systemd's expansion of an Exec line: %i, ${VAR} as one word, $VAR
    split at whitespace."""
    words = []
    for word in shlex.split(line.replace("%i", NAME)):
        whole = re.fullmatch(r"\$\{(\w+)\}", word)
        split = re.fullmatch(r"\$(\w+)", word)
        if whole:
            words.append(env.get(whole.group(1), ""))
        elif split:
            words += env.get(split.group(1), "").split()
        else:
            words.append(re.sub(r"\$\{(\w+)\}",
                                lambda m: env.get(m.group(1), ""), word))
    return words


def mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


class SystemdUnitTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pvdisk-systemd-test.")
        self.mnt = os.path.join(self.tmp, "mnt")
        self.procs = []

    def tearDown(self):
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt])
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, argv, **kwargs):
        proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def test_notify_and_stop_under_fio(self):
        keys = unit_lines(UNIT)
        self.assertEqual(keys["Type"], ["notify"])
        self.assertEqual(keys["EnvironmentFile"], ["/etc/pvdisk/%i.conf"])
        # The test's conf file stands in for /etc/pvdisk/test.conf.
        image = os.path.join(self.tmp, "a.img")
        subprocess.run([PVDISK, "create", image, "--size", "64M"], check=True,
                       capture_output=True)
        env = {"MOUNTPOINT": self.mnt, "DISKS": "--disk " + image,
               "FLAGS": "--queues 2 --shutdown-timeout 10"}
        # systemd finds a command without a folder on its search path.
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        os.symlink(PVDISK, os.path.join(bindir, "pvdisk"))

        def command(line):
            argv = expand(line, env)
            if "/" not in argv[0]:
                argv[0] = shutil.which(argv[0], path=bindir + ":/usr/bin:/bin")
            return argv

        notify_path = os.path.join(self.tmp, "notify")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(notify_path)
        listener.settimeout(60)
        self.addCleanup(listener.close)
        service_env = dict(os.environ, NOTIFY_SOCKET=notify_path)

        for line in keys["ExecStartPre"]:
            subprocess.run(command(line), check=True, env=service_env)
        self.assertTrue(os.path.isdir(self.mnt))
        main = self.start(command(keys["ExecStart"][0]), env=service_env,
                          stdout=subprocess.DEVNULL)
        message, _ = listener.recvfrom(4096)
        fields = dict(line.split("=", 1)
                      for line in message.decode().split("\n") if line)
        self.assertEqual(fields.get("READY"), "1", message)
        self.assertEqual(fields.get("MAINPID"), str(main.pid), message)
        self.assertTrue(mounted(self.mnt), "READY=1 before the mount serves")
        self.assertIsNone(main.poll())

        # fio writes 16 KiB blocks in order, each with its checksum, until
        # the stop (which comes long before the end of the disk).
        fio_args = ["fio", "--name=svc", "--rw=write", "--bs=16k",
                    "--size=64M", "--direct=1", "--ioengine=io_uring",
                    "--iodepth=16", "--verify=crc32c", "--randseed=99"]
        fio = self.start(fio_args + ["--filename=" + os.path.join(
            self.mnt, "a.img"), "--do_verify=0"], cwd=self.tmp,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stats = os.path.join(self.mnt, "stats.json")
        deadline = time.monotonic() + 60
        while True:
            with open(stats) as f:
                done = sum(d["total"]["writes_done"]
                           for d in json.load(f)["disks"])
            if done >= 200:
                break
            self.assertLess(time.monotonic(), deadline, "fio wrote nothing")
            time.sleep(0.05)

        stop = subprocess.run(command(keys["ExecStop"][0]), env=service_env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(stop.returncode, 0, stop.stderr)
        self.assertEqual(main.wait(timeout=60), 0, "the service's exit status")
        fio.wait(timeout=60)
        self.assertFalse(mounted(self.mnt))

        # No torn block: each is either never written (all zeros) or whole
        # with a checksum that matches (fio checks those; a block whose
        # header is zero is fio's "bad magic header 0" and must be zero
        # throughout).
        block = 16 * 1024
        written = 0
        with open(image, "rb") as f:
            while True:
                data = f.read(block)
                if not data:
                    break
                if data[:4096] == bytes(4096):
                    self.assertTrue(data == bytes(len(data)),
                                    "torn block at %d" % (f.tell() - block))
                else:
                    written += 1
        self.assertGreaterEqual(written, 200)
        check = subprocess.run(
            fio_args + ["--filename=" + image, "--verify_only",
                        "--continue_on_error=verify"],
            cwd=self.tmp, capture_output=True, text=True, timeout=120)
        errors = [line for line in check.stderr.splitlines() + check.stdout.
                  splitlines() if "verify" in line and "fail" in line or
                  re.search(r"verify: bad (?!magic header 0,)", line)]
        self.assertEqual(errors, [], "blocks fio wrote that are not whole")


if __name__ == "__main__":
    PVDISK, UNIT = os.path.realpath(sys.argv[1]), sys.argv[2]
    for tool in ["fio", "fusermount3"]:
        if not shutil.which(tool):
            print("SKIP: %s not found" % tool)
            sys.exit(SKIP)
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        print("SKIP: /dev/fuse not usable")
        sys.exit(SKIP)
    unittest.main(argv=sys.argv[:1])
