// The artifact's own data, appended to a copy of this library's file by plan_build.py, as
// little-endian uint64 words and bytes: the plan's size, the number of cubins, each cubin's
// size, the plan text, the cubins, then the size of all the appended bytes (these two last
// words included) and the magic "EAGERCP1". Read back from that file when the library is
// loaded.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "plan.h"

namespace eagerc_launcher {
namespace {

void payload_anchor() {}  // an address inside this library, for dladdr

}  // namespace

Payload read_payload(const char* path) {
  Payload result;
  try {
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    const auto end = static_cast<uint64_t>(file.tellg());
    uint64_t tail[2] = {0, 0};
    if (!file || end < 16) throw std::runtime_error("unreadable file");
    file.seekg(static_cast<std::streamoff>(end - 16));
    file.read(reinterpret_cast<char*>(tail), 16);
    if (!file || std::memcmp(&tail[1], "EAGERCP1", 8) != 0) throw std::runtime_error("no plan appended");
    if (tail[0] < 32 || tail[0] > end) throw std::runtime_error("bad size");
    std::vector<char> bytes(tail[0] - 16);
    file.seekg(static_cast<std::streamoff>(end - tail[0]));
    file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!file) throw std::runtime_error("truncated");
    uint64_t at = 0;
    auto word = [&] {
      if (at + 8 > bytes.size()) throw std::runtime_error("truncated header");
      uint64_t w;
      std::memcpy(&w, bytes.data() + at, 8);
      at += 8;
      return w;
    };
    const uint64_t plan_size = word(), n = word();
    if (n > 4096) throw std::runtime_error("bad cubin count");
    std::vector<uint64_t> sizes(n);
    for (uint64_t& size : sizes) size = word();
    if (plan_size > bytes.size() - at) throw std::runtime_error("bad plan size");
    result.plan.assign(bytes.data() + at, plan_size);
    at += plan_size;
    for (uint64_t size : sizes) {
      if (size > bytes.size() - at) throw std::runtime_error("bad cubin size");
      void* copy = std::aligned_alloc(64, (size + 1 + 63) / 64 * 64);
      std::memcpy(copy, bytes.data() + at, size);
      static_cast<char*>(copy)[size] = 0;
      result.cubins.push_back(copy);
      at += size;
    }
  } catch (const std::exception& e) {
    result.error = e.what();
  }
  return result;
}

namespace {

Payload* own_payload() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&payload_anchor), &info) == 0 || info.dli_fname == nullptr) {
    auto* p = new Payload();
    p->error = "dladdr found no file";
    return p;
  }
  return new Payload(read_payload(info.dli_fname));
}

}  // namespace

// Read when the library is loaded, while its file is surely there (a cache may replace or
// prune files later); a failure is kept and raised by the first call, never at dlopen.
Payload& payload() {
  static Payload* p = own_payload();
  return *p;
}
__attribute__((constructor)) void read_payload_at_load() { payload(); }

}  // namespace eagerc_launcher
