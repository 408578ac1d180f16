#!/bin/sh
# The test binaries build as unity batches (cmake/troupe_module.cmake): each
# tests/<module>/X_test.cpp keeps what it defines in `namespace X_test_file`, so
# that helpers of one name in two files do not collide in a batch. Prints every
# test file without it; fails if any.
cd "$1" || exit 2
bad=0
for f in tests/*/*_test.cpp; do
  ns="$(basename "$f" .cpp)_file"
  grep -q "^namespace $ns {" "$f" || { echo "$f: its definitions belong in namespace $ns"; bad=1; }
done
exit $bad
