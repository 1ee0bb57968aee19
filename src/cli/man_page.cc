#include "cli/man_page.h"

#include "absl/strings/str_cat.h"
#include "cli/command_table.h"
#include "cli/disk_options.h"
#include "stats/counters.h"
#include "stats/iostat.h"
#include "stats/render.h"

namespace pvdisk::cli {
namespace {

constexpr std::string_view kDate = "2026-12-05";

std::string Header(std::string_view name, int section, std::string_view version,
                   std::string_view title) {
  return absl::StrCat(".TH ", std::string(name), " ", section, " ",
                      std::string(kDate), " \"pvdisk ", std::string(version),
                      "\" \"", std::string(title), "\"\n");
}

// ".TP" entry: `tag` in bold (a flag or option), `body` as text.
std::string Entry(std::string_view tag, std::string_view body) {
  return absl::StrCat(".TP\n.B ", RoffText(tag, true), "\n", RoffText(body),
                      "\n");
}

std::string FlagEntries(const std::vector<FlagSpec>& flags) {
  std::string out;
  for (const FlagSpec& flag : flags) {
    std::string tag = "--" + flag.name;
    if (flag.takes_value) absl::StrAppend(&tag, " ", flag.value_name);
    std::string body = flag.help;
    if (!flag.default_text.empty()) {
      absl::StrAppend(&body, " (default: ", flag.default_text, ")");
    }
    if (flag.repeatable)
      absl::StrAppend(&body, "; may be given more than once");
    absl::StrAppend(&out, Entry(tag, body));
  }
  return out;
}

}  // namespace

std::string RoffText(std::string_view text, bool minus) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-' && minus) {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

std::string ManPagePvdisk(std::string_view version) {
  std::string out = Header("PVDISK", 1, version, "User Commands");
  absl::StrAppend(&out, ".SH NAME\npvdisk \\- a user-space paravirtual disk\n",
                  ".SH SYNOPSIS\n");
  for (const CommandInfo& command : Commands()) {
    absl::StrAppend(&out, ".B pvdisk ", std::string(command.name), "\n",
                    RoffText(command.synopsis, true), "\n.br\n");
  }
  absl::StrAppend(
      &out, ".B pvdisk\n\\-\\-help | \\-\\-version\n", ".SH DESCRIPTION\n",
      "pvdisk serves disk images (raw, qcow2 or RBD) as files of a FUSE "
      "mount. Each request goes through a paravirtual frontend (Xen blkif or "
      "virtio-blk) into multi-queue shared-memory rings to a backend that "
      "does the I/O with io_uring. Each mount has a stats file with a row "
      "per queue (see\n.BR pvdisk-stats (5)).\n",
      ".PP\nBad input is one line on stderr naming what is wrong and what is "
      "allowed, with exit status 2 and nothing made; a failure at run time "
      "exits with 1.\n",
      ".PP\nA mount can also be made by\n.BR mount (8)\nand /etc/fstab, "
      "through\n.BR mount.fuse3 (8):\n.PP\n.RS\n.nf\n",
      "mount \\-t fuse.pvdisk IMAGE[:IMAGE...] MOUNTPOINT \\-o "
      "queues=4,frontend=virtio\n",
      ".fi\n.RE\n.PP\nwhere every flag of\n.B pvdisk mount\nis an option "
      "of the same name without its dashes (a switch such as "
      "\\-\\-allow\\-other takes no value), each \\-\\-disk option of an image "
      "follows it after a comma, and\n.B umount\nstops the daemon as\n"
      ".B pvdisk unmount\ndoes.\n.SH COMMANDS\n");
  for (const CommandInfo& command : Commands()) {
    absl::StrAppend(&out, ".SS pvdisk ", RoffText(command.name), "\n.B pvdisk ",
                    std::string(command.name), "\n",
                    RoffText(command.synopsis, true), "\n.PP\n",
                    RoffText(command.description), "\n");
    if (command.name == "mount") {
      absl::StrAppend(
          &out, ".PP\n.I \\-\\-disk options.\n",
          "An image file is given as PATH[,OPTION...], an RBD image as "
          "rbd:POOL/IMAGE[,OPTION...], with these options:\n");
      for (const DiskOptionInfo& option : DiskOptions()) {
        std::string body(option.help);
        if (option.applies == "qcow2") body += " (qcow2 images only)";
        if (option.applies == "rbd") body += " (rbd: disks only)";
        absl::StrAppend(&out, Entry(option.syntax, body));
      }
      absl::StrAppend(&out, ".PP\n.I Flags.\n");
    } else if (command.name == "stat") {
      absl::StrAppend(&out, ".PP\n.I Columns.\n",
                      Entry("disk", "the disk's file name in the mount"),
                      Entry("queue",
                            "all (the disk's row), or the queue's "
                            "number"));
      for (const stats::IostatColumn& column : stats::kIostatColumns) {
        absl::StrAppend(&out, Entry(column.name, column.meaning));
      }
      absl::StrAppend(&out, ".PP\n.I Flags.\n");
    }
    absl::StrAppend(&out, FlagEntries(command.flags()));
  }
  absl::StrAppend(
      &out,
      ".SH EXIT STATUS\n0 on success, 1 for a failure at run time, 2 "
      "for bad input.\n",
      ".SH FILES\n.TP\n.I /etc/pvdisk/NAME.conf\nthe disks and flags the "
      "systemd unit pvdisk@NAME.service mounts\n",
      ".SH SEE ALSO\n.BR pvdisk-stats (5),\n.BR mount.fuse3 (8),\n"
      ".BR fusermount3 (1),\n.BR fio (1)\n");
  return out;
}

std::string ManPageStats(std::string_view version) {
  std::string out = Header("PVDISK-STATS", 5, version, "File Formats");
  absl::StrAppend(
      &out, ".SH NAME\npvdisk-stats \\- the stats files of a pvdisk mount\n",
      ".SH DESCRIPTION\nEvery\n.BR pvdisk (1)\nmount has three read-only "
      "files beside its disks:\n.TP\n.B stats\na text table per disk: a "
      "comment line starting with \"# disk\" with the disk's configuration, "
      "a header row, one row per queue and a \"total\" row. Writing \"reset\" "
      "to it zeroes the counters.\n.TP\n.B stats.json\nthe same as one JSON "
      "object: daemon_pid, now_ns, since_ns and disks, each with name, config, "
      "queues and total; the latency histograms are read_latency_ns and "
      "write_latency_ns, lists of [upper bound in ns, count] pairs.\n.TP\n"
      ".B metrics\nthe same counters in the Prometheus text format.\n",
      ".PP\nThe total row is the sum over the queues, except for the "
      "highest-seen values (marked max below), which are the highest of any "
      "queue. Counters only grow until a reset; gauges go up and down and a "
      "reset keeps them.\n",
      ".SH COLUMNS\n");
  absl::StrAppend(&out, Entry("disk", "the disk's file name in the mount"),
                  Entry("queue", "the queue's number, or total"));
  for (const stats::CounterInfo& counter : stats::kCounterInfo) {
    std::string body(counter.meaning);
    if (counter.kind == stats::CounterKind::kGauge) body += " (gauge)";
    if (counter.kind == stats::CounterKind::kMax) body += " (max)";
    absl::StrAppend(&out, Entry(counter.name, body));
  }
  for (const std::string& name : stats::LatencyColumnNames()) {
    absl::StrAppend(
        &out, Entry(name,
                    "a latency percentile from the histograms, arrival to "
                    "reply, in whole microseconds rounded up"));
  }
  absl::StrAppend(&out,
                  ".SH PVDISK STAT COLUMNS\n.B pvdisk stat\nprints rates "
                  "over an interval from these files, in these columns "
                  "after disk and queue (all: the disk's row):\n");
  for (const stats::IostatColumn& column : stats::kIostatColumns) {
    absl::StrAppend(&out, Entry(column.name, column.meaning));
  }
  absl::StrAppend(&out, ".SH SEE ALSO\n.BR pvdisk (1),\n.BR iostat (1)\n");
  return out;
}

}  // namespace pvdisk::cli
