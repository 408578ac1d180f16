// What the state machines' table tests (user_core, worker_core, commander_core)
// share: playing one row and naming it. A row is {name, given, when, then,
// effects, answer}: `given` brings a fresh rig (the core and the effects it
// records) to the row's state, the effects said so far are forgotten, `when` is
// the event (its answer, if any, as text), `then` the phase it must leave the
// core in and `effects` what it must have said, in order.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstddef>
#include <string>

namespace troupe::test {

template <class Row, class Rig>
void play_row(const Row& row, Rig& rig) {
  row.given(rig);
  rig.forget();
  auto answer = row.when(rig);
  EXPECT_EQ(rig.core.phase(), row.then) << row.name << ": " << to_string(rig.core.phase()) << " instead of "
                                        << to_string(row.then);
  EXPECT_EQ(rig.fx.said, row.effects) << row.name;
  EXPECT_EQ(answer, row.answer) << row.name;
}

// A row's test name: its index and the start of its description, in the
// characters GoogleTest allows.
inline std::string row_test_name(std::size_t index, std::string description) {
  for (auto& c : description)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return std::to_string(index) + "_" + description.substr(0, 60);
}

}  // namespace troupe::test
