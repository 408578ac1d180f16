// The one translation unit that compiles Boost.Asio and Boost.Beast
// (BOOST_*_SEPARATE_COMPILATION is set on every target that uses them).
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
