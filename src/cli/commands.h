// pvdisk's subcommands. Each returns the process exit code: 0 on success, 2
// for bad input (after printing one line naming what was wrong and what is
// allowed), 1 for a failure at run time.
#pragma once

#include <string>
#include <vector>

namespace pvdisk::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int RunCreate(const std::vector<std::string>& args);
int RunMount(const std::vector<std::string>& args);
int RunUnmount(const std::vector<std::string>& args);
// The hidden `__backend` command: a disk's backend process (--backend
// process); only the daemon starts it.
int RunBackend(const std::vector<std::string>& args);
int RunStat(const std::vector<std::string>& args);
int RunList(const std::vector<std::string>& args);
int RunInfo(const std::vector<std::string>& args);
int RunTrace(const std::vector<std::string>& args);
int RunPowercut(const std::vector<std::string>& args);
int RunMark(const std::vector<std::string>& args);
int RunReplay(const std::vector<std::string>& args);
int RunAttach(const std::vector<std::string>& args);
int RunDetach(const std::vector<std::string>& args);

// Prints "pvdisk: <message>" to stderr.
void PrintError(const std::string& message);

}  // namespace pvdisk::cli
