#pragma once
// The config tests' scratch directory: under the system temp dir, removed at the end of the test.

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace troupe::config::test {

class temp_dir {
public:
  temp_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("troupe_config_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  /// Writes `text` to NAME in the directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

}  // namespace troupe::config::test
