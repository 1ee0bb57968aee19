#include "stats/text_table.h"

#include <algorithm>

namespace pvdisk::stats {

std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         size_t left_aligned, std::string_view gap) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += gap;
      std::string pad(widths[c] - row[c].size(), ' ');
      line += c < left_aligned ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace pvdisk::stats
