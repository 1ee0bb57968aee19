"""pvbench: the pieces shared by bench/compare, bench/experiments,
bench/spans and examples/pvlab.py (Python 3, standard library only).

  cli     option checks that end in one message and exit status 2, the tools
          a run needs, where results go, signals that still let a run clean up
  fio     the standard matrix, fio command lines, fio's JSON output
  lab     a scratch image and the targets fio runs on (the image itself,
          pvdisk mounts, a qemu-storage-daemon export), the side-by-side runner
  osd_cache  an RBD cluster's OSD caches, through their admin sockets: the
          settings in effect, and the share of each run's reads they served
  report  counters per request, medians and ratios, markdown, JSON, gnuplot
  spans   a request's spans layer by layer, from perf's io_uring and fuse
          tracepoints (bench/spans)

Import it from a script in bench/ or examples/ after putting bench/ on
sys.path.
"""


class BenchError(Exception):
    """A run that cannot go on: the message is for the user; status is the
    exit status (2 when an option was refused, else 1)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status
