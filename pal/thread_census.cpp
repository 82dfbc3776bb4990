#include "palrt/pal/thread_census.hpp"

#include "internal/thread_census.h"

namespace palrt::pal {

int threads_in_process() noexcept { return palrt_threads_in_process(); }

}  // namespace palrt::pal
