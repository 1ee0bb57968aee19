#include "cli/completion.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/command_table.h"

namespace pvdisk::cli {
namespace {

// The choices of a value name such as "on|off", or "" when the value is
// free (a value name with capitals, such as "N" or "FILE|syslog").
std::string Choices(const std::string& value_name) {
  if (value_name.find('|') == std::string::npos) return "";
  for (char c : value_name) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c))) return "";
  }
  return absl::StrJoin(absl::StrSplit(value_name, '|'), " ");
}

}  // namespace

std::string BashCompletion() {
  std::string names, flag_cases, value_cases;
  for (const CommandInfo& command : Commands()) {
    const std::string name(command.name);
    absl::StrAppend(&names, name, " ");
    std::string flags;
    for (const FlagSpec& flag : command.flags()) {
      absl::StrAppend(&flags, flags.empty() ? "" : " ", "--", flag.name);
      const std::string choices = Choices(flag.value_name);
      if (!choices.empty()) {
        absl::StrAppend(&value_cases, "    \"", name, " --", flag.name,
                        "\") words=\"", choices, "\" ;;\n");
      }
    }
    absl::StrAppend(&flag_cases, "    ", name, ") flags=\"", flags, "\" ;;\n");
  }
  return absl::StrCat(
      "# bash completion for pvdisk(1), written by its build from the "
      "command table.\n"
      "_pvdisk() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} "
      "prev=${COMP_WORDS[COMP_CWORD-1]} flags= words=\n"
      "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
      "    COMPREPLY=($(compgen -W \"",
      names,
      "--help --version\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  case \"${COMP_WORDS[1]} $prev\" in\n",
      value_cases,
      "  esac\n"
      "  if [ -n \"$words\" ]; then\n"
      "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  case \"${COMP_WORDS[1]}\" in\n",
      flag_cases,
      "  esac\n"
      "  if [[ $cur == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
      "  else\n"
      "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "  fi\n"
      "}\n"
      "complete -o filenames -F _pvdisk pvdisk\n");
}

}  // namespace pvdisk::cli
