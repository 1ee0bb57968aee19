#include "cli/args.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pvdisk::cli {

std::string ParsedArgs::Get(const std::string& name,
                            const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() || it->second.empty() ? fallback
                                                  : it->second.back();
}

FlagValues ParsedArgs::Flags() const {
  std::map<std::string, std::string, std::less<>> last;
  for (const auto& [name, given] : values) {
    last[name] = given.empty() ? std::string() : given.back();
  }
  return FlagValues(std::move(last));
}

absl::StatusOr<ParsedArgs> ParseArgs(absl::string_view command,
                                     const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args) {
  ParsedArgs parsed;
  auto allowed = [&] {
    std::vector<std::string> names;
    for (const FlagSpec& spec : specs) names.push_back("--" + spec.name);
    return names.empty() ? std::string("none") : absl::StrJoin(names, ", ");
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word.size() < 3 || word.rfind("--", 0) != 0) {
      if (word.size() > 1 && word[0] == '-') {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag '", word, "' for 'pvdisk ", command,
                         "'; allowed: ", allowed()));
      }
      parsed.positional.push_back(word);
      continue;
    }
    std::string name = word.substr(2);
    std::string value;
    bool has_inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const FlagSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '--", name, "' for 'pvdisk ", command,
                       "'; allowed: ", allowed()));
    }
    if (spec->takes_value && !has_inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", name, " needs a value (", spec->value_name, ")"));
      }
      value = args[++i];
    }
    if (!spec->takes_value && has_inline_value) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " takes no value"));
    }
    if (!spec->repeatable && parsed.values.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " is given more than once"));
    }
    parsed.values[name].push_back(value);
  }
  return parsed;
}

std::string FlagHelp(const std::vector<FlagSpec>& specs) {
  std::string out;
  for (const FlagSpec& spec : specs) {
    std::string left = "  --" + spec.name;
    if (spec.takes_value) absl::StrAppend(&left, " ", spec.value_name);
    if (left.size() < 28) left.resize(28, ' ');
    absl::StrAppend(&out, left, " ", spec.help);
    if (!spec.default_text.empty()) {
      absl::StrAppend(&out, " (default: ", spec.default_text, ")");
    }
    if (spec.repeatable) absl::StrAppend(&out, " [repeatable]");
    out += "\n";
  }
  return out;
}

absl::StatusOr<uint64_t> ParseNumber(absl::string_view flag,
                                     absl::string_view text, uint64_t min,
                                     uint64_t max) {
  return ParseWholeNumber(std::string_view(flag.data(), flag.size()),
                          std::string_view(text.data(), text.size()), min, max);
}

}  // namespace pvdisk::cli
