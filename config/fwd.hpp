#pragma once
/// \file
/// The recipe and its sections, declared: a header that only names them
/// (node_context) includes this, its readers include the sections they read.

namespace troupe::config {

struct recipe;
struct node_settings;
struct limits_settings;
struct channel_settings;
struct log_settings;
struct deposit_settings;
struct commander_settings;
struct cluster_settings;
struct group_settings;
struct cors_settings;
struct static_settings;

}  // namespace troupe::config
