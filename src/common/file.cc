#include "common/file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace chamber {

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::Unavailable(path + ": read failed");
  return buf.str();
}

}  // namespace chamber
