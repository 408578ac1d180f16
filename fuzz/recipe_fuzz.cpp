// libFuzzer target: the recipe parser, config::load_recipe (config/recipe.hpp).
//
// The input (tests/fuzz/recipe/) is used three ways, each through load_recipe:
//  1. as the TOML recipe file (written to a temporary file: load_recipe reads
//     a path, as the node does with --config);
//  2. line by line as --set KEY=VALUE arguments;
//  3. line by line as TROUPE_* environment variables (KEY=VALUE, dots as '_').
// A recipe_error is the expected answer to bad input; any other exception
// escapes (an uncaught exception aborts: a finding), and so does a crash.
// A recipe load_recipe accepted must pass validate() again.

#include "config/recipe.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace {

// One temporary file per process, rewritten for every input, removed at exit.
const std::string& recipe_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string p = std::string(dir && *dir ? dir : "/tmp") + "/recipe_fuzz." + std::to_string(::getpid()) + ".toml";
    std::atexit([] { std::remove(recipe_path().c_str()); });
    return p;
  }();
  return path;
}

void write_file(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror("recipe_fuzz: cannot write the recipe file");
    std::abort();  // not a finding in load_recipe: stop rather than fuzz nothing
  }
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
    std::perror("recipe_fuzz: cannot write the recipe file");
    std::abort();
  }
  std::fclose(f);
}

void load(const troupe::config::recipe_sources& sources) {
  try {
    auto r = troupe::config::load_recipe(sources);
    troupe::config::validate(r);  // what load_recipe accepted stays valid
    if (r.groups.empty())
      std::abort();
  } catch (const troupe::config::recipe_error&) {
    // Expected for bad input.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  troupe::config::recipe_sources file;
  file.file = recipe_path();
  write_file(file.file, input);
  load(file);

  troupe::config::recipe_sources sets, env;
  for (std::size_t pos = 0; pos <= input.size();) {
    auto eol = input.find('\n', pos);
    std::string line(input.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos));
    if (!line.empty()) {
      sets.sets.push_back(line);
      auto eq = line.find('=');
      // "limits.max_body_bytes=5" is also TROUPE_limits_max_body_bytes=5 (names are case-insensitive).
      std::string name = "TROUPE_" + line.substr(0, eq);
      for (char& c : name)
        if (c == '.')
          c = '_';
      env.env.emplace_back(std::move(name), eq == std::string::npos ? "" : line.substr(eq + 1));
    }
    if (eol == std::string_view::npos)
      break;
    pos = eol + 1;
  }
  load(sets);
  load(env);
  return 0;
}
