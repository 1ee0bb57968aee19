// pvdisk-build-files OUTDIR: writes the files the build makes from pvdisk's
// own tables: OUTDIR/pvdisk.1 and OUTDIR/pvdisk-stats.5 (man_page.h) and
// OUTDIR/pvdisk.bash-completion (completion.h). A build tool; not installed.
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/completion.h"
#include "cli/man_page.h"

namespace {

bool Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "pvdisk-build-files: cannot write %s\n", path.c_str());
  }
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pvdisk-build-files OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  using namespace pvdisk::cli;
  const bool ok =
      Write(dir + "/pvdisk.1", ManPagePvdisk(PVDISK_VERSION)) &&
      Write(dir + "/pvdisk-stats.5", ManPageStats(PVDISK_VERSION)) &&
      Write(dir + "/pvdisk.bash-completion", BashCompletion());
  return ok ? 0 : 1;
}
