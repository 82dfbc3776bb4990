// SPDX-License-Identifier: MIT
// The native objects of the JVM host: what Java's wrappers stand for. A handle (a jlong in
// Java) is the address of a native_objects array; each of its objects is allocated on its own,
// as a real library's objects are, so the identity cache sees unrelated addresses.
#pragma once

#include <jni.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace palrt_jvmhost {

struct native_object {
  std::uint64_t id;  // its index in its array
};

class native_objects {
 public:
  explicit native_objects(std::size_t n);  // throws std::bad_alloc
  std::size_t size() const noexcept { return objects_.size(); }
  native_object* at(std::size_t i) const noexcept { return objects_[i].get(); }

 private:
  std::vector<std::unique_ptr<native_object>> objects_;
};

// Object `i` of the array behind `handle`, or null with a Java exception pending
// (NullPointerException for handle 0, IndexOutOfBoundsException for `i` out of range).
native_object* object_at(JNIEnv* env, jlong handle, jint i) noexcept;

}  // namespace palrt_jvmhost
