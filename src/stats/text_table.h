// Cells laid out as aligned text columns, for the `stats` file and
// `pvdisk stat`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pvdisk::stats {

// One line per row, each column as wide as its widest cell, columns
// separated by `gap`. The first `left_aligned` columns (names) are
// left-aligned, the rest (numbers) right-aligned; no line ends in spaces.
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         size_t left_aligned, std::string_view gap);

}  // namespace pvdisk::stats
