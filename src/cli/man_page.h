// The man pages, written from the tables the code uses: pvdisk(1) from the
// command table (command_table.h), each command's flags and the --disk
// options (disk_options.h); pvdisk-stats(5) from the counters' list
// (stats/counters.h), the latency columns (stats/render.h) and pvdisk stat's
// columns (stats/iostat.h). The build writes them (man_main.cc), so a flag,
// option or counter added to its table is in the page.
#pragma once

#include <string>
#include <string_view>

namespace pvdisk::cli {

// pvdisk(1) in man(7) roff.
std::string ManPagePvdisk(std::string_view version);

// pvdisk-stats(5) in man(7) roff.
std::string ManPageStats(std::string_view version);

// `text` safe as roff text: backslashes escaped, a leading '.' or '\''
// neutralised, and with `minus`, '-' as a minus sign (for flags and options,
// which the reader types).
std::string RoffText(std::string_view text, bool minus = false);

}  // namespace pvdisk::cli
