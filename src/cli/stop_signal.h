// Stop signals for commands that run until Ctrl-C (`pvdisk stat`, `pvdisk
// trace`): SIGINT and SIGTERM end the command's loop instead of the
// process, so that it finishes its output and exits with status 0.
#pragma once

namespace pvdisk::cli {

// Installs the handlers, without SA_RESTART: a sleep or a blocking read
// returns at once (EINTR) when a stop signal arrives.
void CatchStopSignals();

// Whether a stop signal has arrived since CatchStopSignals().
bool StopRequested();

}  // namespace pvdisk::cli
