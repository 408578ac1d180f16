#pragma once
/// \file
/// (Internal to transport/.) The one way an answer from the actor side gets
/// back onto an asio object's strand: a link holds a weak pointer to its
/// target (an HTTP session, a user call, a console, a stream writer), the
/// target's executor and a tag (the call id, the attempt); post() runs
/// fn(target, tag) on that executor if the target still exists, and marks the
/// link answered. A slot that derives from it answers a default in its
/// destructor when !answered() (a dropped message still gets an answer).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <cstdint>
#include <memory>
#include <utility>

namespace troupe {

template <class Target, class Tag = std::uint64_t>
class strand_link {
public:
  strand_link(std::weak_ptr<Target> target, boost::asio::any_io_executor ex, Tag tag = Tag{})
    : target_(std::move(target)), ex_(std::move(ex)), tag_(std::move(tag)) {}

protected:
  // Runs fn(target, tag) on the target's strand; the first call marks the link answered.
  template <class F>
  void post(F fn) {
    answered_ = true;
    boost::asio::post(ex_, [t = target_, tag = tag_, fn = std::move(fn)]() mutable {
      if (auto target = t.lock())
        fn(*target, tag);
    });
  }
  bool answered() const noexcept { return answered_; }
  // Runs fn(target, tag) on the target's strand, leaving the link unanswered (a notice before the answer).
  template <class F>
  void notify(F fn) {
    boost::asio::post(ex_, [t = target_, tag = tag_, fn = std::move(fn)]() mutable {
      if (auto target = t.lock())
        fn(*target, tag);
    });
  }

private:
  std::weak_ptr<Target> target_;
  boost::asio::any_io_executor ex_;
  Tag tag_;
  bool answered_ = false;
};

}  // namespace troupe
