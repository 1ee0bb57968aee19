// ThreadSanitizer reports of the processes a test program starts. In a TSan
// tree (`make tsan`) TSAN_OPTIONS carries log_path=PREFIX, so an instrumented
// process writes its reports to PREFIX.PID instead of to a stderr that
// nobody reads (a daemon's stderr is gone once it detaches). Before the
// first test, the program points its children at PREFIX-PID.CHILD (PID its
// own): ctest runs several test programs at once, and each must fail on its
// own processes' reports only. These turn such files into test failures.
// Without log_path (any other tree) they check nothing.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pvdisk::fuse_testing {

// The report files of this program and of the processes it started (pvdisk
// daemons, their backend processes), sorted.
std::vector<std::string> TsanReportFiles();

// Fails the current test, quoting the report, if process `pid` (a child of
// this program, or a child's child) wrote one.
void ExpectNoTsanReportFrom(pid_t pid);

}  // namespace pvdisk::fuse_testing
