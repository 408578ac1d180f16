// The one translation unit that compiles Boost.Asio and Boost.Beast
// (BOOST_*_SEPARATE_COMPILATION is set on every target that uses them), and
// Asio's OpenSSL layer (the front's TLS, issue 14).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
