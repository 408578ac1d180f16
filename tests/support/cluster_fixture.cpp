#include "cluster_fixture.hpp"
#include "eventually.hpp"

#include <signal.h>

#include <filesystem>
#include <regex>
#include <stdexcept>
#include <thread>

namespace troupe::test {

cluster_fixture::cluster_fixture() : cluster_fixture(options{}) {}

cluster_fixture::cluster_fixture(options opts) : opts_(std::move(opts)) {
  dir_ = make_temp_dir("troupe-cluster");
  deposit_ = dir_ + "/deposit";
  std::filesystem::create_directories(deposit_);
}

cluster_fixture::~cluster_fixture() {
  members_.clear();  // each SIGKILLs its process and removes its temp dir
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void cluster_fixture::start(std::size_t n, const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < n; ++i)
    add(args);
}

std::size_t cluster_fixture::add(const std::vector<std::string>& args, std::optional<std::size_t> through) {
  auto index = members_.size();
  auto name = "n" + std::to_string(index + 1);
  std::vector<std::string> argv{"--deposit",        deposit_,        "--set", "node.name=" + name, "--set",
                                "cluster.listen=127.0.0.1:0"};
  if (!through)
    for (std::size_t i = 0; i < members_.size(); ++i)
      if (running(i)) {
        through = i;
        break;
      }
  if (through) {
    argv.push_back("--join");
    argv.push_back(cluster_address(*through));
  }
  argv.insert(argv.end(), opts_.common_args.begin(), opts_.common_args.end());
  argv.insert(argv.end(), args.begin(), args.end());
  node_options o;
  o.with_deposit = false;
  o.start_timeout = opts_.start_timeout;
  auto member = std::make_unique<node_process>(std::move(argv), o);
  // The line is logged before the front listens, so it is there once the
  // ready line was read; polled all the same (stderr is a file).
  const std::regex line("cluster: member " + name + " of \\S+ at (\\S+:[0-9]+)");
  std::string address;
  if (!eventually([&] {
        std::smatch m;
        auto log = member->stderr_log();
        if (!std::regex_search(log, m, line))
          return false;
        address = m[1];
        return true;
      }, std::chrono::seconds(5), std::chrono::milliseconds(20)))
    throw std::runtime_error("cluster_fixture: member " + name + " logged no cluster address\n" +
                             member->diagnostics());
  members_.push_back(std::move(member));
  addresses_.push_back(address);
  return index;
}

node_process& cluster_fixture::member(std::size_t i) {
  return *members_.at(i);
}

std::string cluster_fixture::name(std::size_t i) const {
  if (i >= members_.size())
    throw std::out_of_range("cluster_fixture: no member " + std::to_string(i));
  return "n" + std::to_string(i + 1);
}

const std::string& cluster_fixture::cluster_address(std::size_t i) const {
  return addresses_.at(i);
}

void cluster_fixture::kill9(std::size_t i) {
  members_.at(i)->kill9();
}

void cluster_fixture::pause(std::size_t i) {
  members_.at(i)->send_signal(SIGSTOP);
}

void cluster_fixture::resume(std::size_t i) {
  members_.at(i)->send_signal(SIGCONT);
}

bool cluster_fixture::running(std::size_t i) {
  return members_.at(i)->running();
}

std::vector<std::size_t> cluster_fixture::live() {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < members_.size(); ++i)
    if (running(i))
      out.push_back(i);
  return out;
}

std::string cluster_fixture::diagnostics() {
  std::string out;
  for (std::size_t i = 0; i < members_.size(); ++i)
    out += "==== member " + name(i) + " (cluster " + addresses_[i] + ") ====\n" + members_[i]->diagnostics() + "\n";
  return out;
}

}  // namespace troupe::test
