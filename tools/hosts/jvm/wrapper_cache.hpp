// SPDX-License-Identifier: MIT
// The binding's identity cache (palrt::jni::identity_cache), made by JNI_OnLoad and never
// destroyed: the sweeper thread is a daemon, which may be inside sweep() while the process
// exits, after static destructors ran.
#pragma once

#include "palrt/jni/identity_cache.hpp"

namespace palrt_jvmhost {

// Valid once JNI_OnLoad succeeded, which happens before any native of the package can be
// called (Binding.java: class initialisation orders the load before every use).
palrt::jni::identity_cache& wrapper_cache() noexcept;

}  // namespace palrt_jvmhost
