// pvdisk-man OUTDIR: writes OUTDIR/pvdisk.1 and OUTDIR/pvdisk-stats.5 (see
// man_page.h). A build tool; not installed.
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/man_page.h"

namespace {

bool Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) std::fprintf(stderr, "pvdisk-man: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pvdisk-man OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const bool ok =
      Write(dir + "/pvdisk.1", pvdisk::cli::ManPagePvdisk(PVDISK_VERSION)) &&
      Write(dir + "/pvdisk-stats.5", pvdisk::cli::ManPageStats(PVDISK_VERSION));
  return ok ? 0 : 1;
}
