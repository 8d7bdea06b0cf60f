// Collectives of byte strings whose lengths may differ from rank to rank (a run's settings as JSON, say): every
// call is made of fixed-size collectives, so ranks that disagree on the content cannot truncate, crash or hang.
#pragma once
#include <string>
#include <vector>

#include "core/communicator.h"

namespace uoe {

// Every rank's `mine`, in rank order, on every rank. Lengths first (one int64 per rank), then the bytes of each
// rank padded to the longest.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);

}  // namespace uoe
