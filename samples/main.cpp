// build/bin/troupe: the node binary, hosting the sample actor types.
#include "notes/notes.hpp"
#include "tally/tally.hpp"

int main(int argc, char** argv) {
  return troupe::node_main(argc, argv,
                           troupe::user_types<notes_sample::notes_user>("notes")
                             .add<tally_sample::tally_user>("tally"));
}
